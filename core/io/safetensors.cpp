#include "core/io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tl {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, so a
// forged length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("cannot open safetensors file '" + path + "'");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw IOError("cannot read safetensors file '" + path + "'");
  in.seekg(0);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw IOError("cannot read safetensors file '" + path + "'");
  return bytes;
}

struct Entry {
  std::string key;
  std::string dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

}  // namespace

StateDict load_safetensors(const std::string& path) { return load_safetensors_bytes(read_file(path), path); }

StateDict load_safetensors_bytes(const std::vector<uint8_t>& file, const std::string& path) {
  auto fail = [&](const std::string& why) { return IOError("safetensors file '" + path + "': " + why); };
  if (file.size() < 8)
    throw fail("only " + std::to_string(file.size()) + " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | file[size_t(i)];
  if (header_len < 2 || header_len > kMaxHeaderBytes)
    throw fail("header length " + std::to_string(header_len) + " is not plausible (expected 2.." +
               std::to_string(kMaxHeaderBytes) + ")");
  if (header_len > file.size() - 8)
    throw fail("header length " + std::to_string(header_len) + " runs past the end of the " +
               std::to_string(file.size()) + "-byte file (truncated?)");
  const uint8_t* data = file.data() + 8 + header_len;
  const uint64_t data_size = file.size() - 8 - header_len;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(header_len));
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw fail("header is not a JSON object");

  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    Entry e;
    e.key = it.key();
    auto bad = [&](const std::string& why) { return fail("tensor '" + e.key + "': " + why); };
    if (!v.is_object()) throw bad("entry is not a JSON object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw bad("missing or non-string 'dtype'");
    e.dtype = v["dtype"].get<std::string>();
    const size_t elem = host_dtype_size(e.dtype);
    if (!elem) throw bad("unsupported dtype '" + e.dtype + "'");
    if (!v.contains("shape") || !v["shape"].is_array()) throw bad("missing or non-array 'shape'");
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw bad("shape " + v["shape"].dump() + " has a non-integer or negative size");
      const uint64_t n = d.get<uint64_t>();
      if (n > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(count, n, &count) ||
          count > uint64_t(std::numeric_limits<int64_t>::max()) / 8)
        throw bad("shape " + v["shape"].dump() + " has an absurd number of elements");
      e.shape.push_back(int64_t(n));
    }
    const auto& off = v.contains("data_offsets") ? v["data_offsets"] : nlohmann::json();
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad("'data_offsets' must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      throw bad("data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                "] lie outside the " + std::to_string(data_size) + " data bytes (truncated file?)");
    if (count * elem != e.end - e.begin)
      throw bad("shape " + host_shape_str(e.shape) + " of " + e.dtype + " needs " + std::to_string(count * elem) +
                " bytes but data_offsets span " + std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }

  // The format requires the data to be one gapless run: each tensor starts
  // where the previous one ended and the last ends at the end of the file.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    if (e.begin < expected) throw fail("tensor '" + e.key + "' overlaps the tensor before it");
    if (e.begin > expected)
      throw fail("gap of " + std::to_string(e.begin - expected) + " bytes before tensor '" + e.key + "'");
    expected = e.end;
  }
  if (expected != data_size)
    throw fail(std::to_string(data_size - expected) + " bytes after the last tensor are not described by the header");

  StateDict out;
  for (const Entry& e : entries) {
    HostTensor t;
    t.shape = e.shape;
    t.dtype = e.dtype;
    const size_t count = size_t((e.end - e.begin) / host_dtype_size(e.dtype));
    t.data.resize(count);
    host_to_float(data + e.begin, count, e.dtype, t.data.data());
    out.emplace(e.key, std::move(t));
  }
  return out;
}

void save_safetensors(const std::string& path, const StateDict& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [key, t] : tensors) {
    int64_t count = 1;
    for (int64_t d : t.shape) {
      if (d < 0) throw IOError("cannot save '" + key + "' to '" + path + "': negative size in " + host_shape_str(t.shape));
      count *= d;
    }
    if (uint64_t(count) != t.data.size())
      throw IOError("cannot save '" + key + "' to '" + path + "': shape " + host_shape_str(t.shape) + " has " +
                    std::to_string(count) + " elements but the data holds " + std::to_string(t.data.size()));
    const uint64_t bytes = uint64_t(count) * 4;
    header[key] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  // Pad with spaces (allowed by the format) so the data starts 8-aligned,
  // which lets readers map the floats in place.
  json.append((8 - json.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IOError("cannot write safetensors file '" + tmp + "'");
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(json.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(json.data(), std::streamsize(json.size()));
    for (const auto& entry : tensors)
      out.write(reinterpret_cast<const char*>(entry.second.data.data()), std::streamsize(entry.second.data.size() * 4));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw IOError("failed while writing safetensors file '" + tmp + "' (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw IOError("cannot move '" + tmp + "' to '" + path + "'");
  }
}

}  // namespace tl
