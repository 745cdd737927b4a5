#include "core/io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io/limits.h"

namespace tl {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, so a
// forged length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// A first pass over the header with nlohmann's SAX interface, before any
// JSON value is built: it refuses nesting deeper than the limit (the DOM and
// its dump() recurse), a __metadata__ that is not a flat map of strings (the
// format's rule; a hostile file fills it with millions of empty objects), and
// a header whose values would take more memory than the load budget.
class HeaderScan {
 public:
  HeaderScan(io::LoadBudget& budget, std::function<IOError(const std::string&)> fail)
      : budget_(budget), fail_(std::move(fail)), max_depth_(io::load_limits().max_nesting) {}

  bool null() { return value(Kind::Null); }
  bool boolean(bool) { return value(Kind::Other); }
  bool number_integer(int64_t) { return value(Kind::Other); }
  bool number_unsigned(uint64_t) { return value(Kind::Other); }
  bool number_float(double, const std::string&) { return value(Kind::Other); }
  bool string(std::string& s) {
    charge(32 + s.size());
    return value(Kind::String);
  }
  bool binary(std::vector<uint8_t>&) { return value(Kind::Other); }
  bool start_object(size_t) { return open(false); }
  bool start_array(size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    charge(96 + k.size());  // a map node and its key
    if (depth_ == 1) {
      metadata_next_ = k == "__metadata__";
      // A JSON parser keeps the last of two equal keys: the file would load
      // a tensor other than the one its first entry describes.
      if (!keys_.insert(k).second) throw fail_("tensor '" + io::clip(k) + "' appears twice in the header");
    }
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (why.size() > 200) why = why.substr(0, 200) + "...";
    throw fail_("header is not valid JSON: " + why);
  }

 private:
  enum class Kind { Null, String, Other };
  std::set<std::string> keys_;  // the header's top-level keys

  bool value(Kind kind) {
    charge(16);
    if (depth_ == 1 && metadata_next_) {
      metadata_next_ = false;
      if (kind != Kind::Null) throw fail_("__metadata__ must be a JSON object of strings");
    } else if (in_metadata_ && kind != Kind::String) {
      throw fail_("__metadata__ must map strings to strings; it holds a non-string value");
    }
    return true;
  }
  bool open(bool array) {
    charge(16);
    if (in_metadata_)
      throw fail_(std::string("__metadata__ must map strings to strings; it holds a nested ") +
                  (array ? "array" : "object"));
    if (depth_ == 1 && metadata_next_) {
      metadata_next_ = false;
      if (array) throw fail_("__metadata__ must be a JSON object of strings, not an array");
      in_metadata_ = true;
    }
    if (++depth_ > max_depth_) throw fail_("header nests JSON deeper than " + std::to_string(max_depth_) + " levels");
    return true;
  }
  bool close() {
    if (depth_ == 2) in_metadata_ = false;
    --depth_;
    return true;
  }
  void charge(uint64_t bytes) {
    if (!budget_.try_take(bytes))
      throw fail_("header would need more than the " + std::to_string(budget_.budget()) +
                  " bytes allowed for a file of " + std::to_string(budget_.file_bytes()) + " bytes");
  }

  io::LoadBudget& budget_;
  std::function<IOError(const std::string&)> fail_;
  int max_depth_;
  int depth_ = 0;               // containers open around the current event
  bool metadata_next_ = false;  // the next top-level value is __metadata__'s
  bool in_metadata_ = false;    // inside the __metadata__ object
};

// A JSON value for an error message, without recursing into it and without
// printing more than a line: "[1, 2, [...], ... (5000 items)]".
std::string summary(const nlohmann::json& j) {
  auto scalar = [](const nlohmann::json& v) -> std::string {
    if (v.is_array()) return "[...]";
    if (v.is_object()) return "{...}";
    std::string text = v.dump();
    return text.size() > 40 ? text.substr(0, 40) + "..." : text;
  };
  if (!j.is_array()) return scalar(j);
  std::string out = "[";
  size_t i = 0;
  for (const auto& item : j) {
    if (i == 8) {
      out += ", ... (" + std::to_string(j.size()) + " items)";
      break;
    }
    out += (i++ ? ", " : "") + scalar(item);
  }
  return out + "]";
}

struct Entry {
  std::string key;
  std::string dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

}  // namespace

StateDict load_safetensors(const std::string& path) {
  return load_safetensors_bytes(io::read_whole_file_bytes(path, "safetensors file"), path);
}

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

  io::LoadBudget budget(file.size());
  const auto json_begin = file.begin() + 8, json_end = file.begin() + 8 + std::ptrdiff_t(header_len);
  HeaderScan scan(budget, fail);
  nlohmann::json::sax_parse(json_begin, json_end, &scan);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json_begin, json_end);
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    throw fail("header is not valid JSON: " + why.substr(0, 200));
  }
  if (!header.is_object()) throw fail("header is not a JSON object");

  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    Entry e;
    e.key = it.key();
    auto bad = [&](const std::string& why) { return fail("tensor '" + io::clip(e.key) + "': " + why); };
    if (!v.is_object()) throw bad("entry is not a JSON object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw bad("missing or non-string 'dtype'");
    e.dtype = v["dtype"].get<std::string>();
    const size_t elem = host_dtype_size(e.dtype);
    if (!elem) throw bad("unsupported dtype '" + io::clip(e.dtype) + "'");
    if (!v.contains("shape") || !v["shape"].is_array()) throw bad("missing or non-array 'shape'");
    const size_t max_rank = size_t(io::load_limits().max_tensor_rank);
    if (v["shape"].size() > max_rank)
      throw bad("shape " + summary(v["shape"]) + " has more than the " + std::to_string(max_rank) +
                " dimensions a tensor may have");
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw bad("shape " + summary(v["shape"]) + " has a non-integer or negative size");
      const uint64_t n = d.get<uint64_t>();
      if (n > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(count, n, &count) ||
          count > uint64_t(std::numeric_limits<int64_t>::max()) / 8)
        throw bad("shape " + summary(v["shape"]) + " has an absurd number of elements");
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
    if (e.begin < expected) throw fail("tensor '" + io::clip(e.key) + "' overlaps the tensor before it");
    if (e.begin > expected)
      throw fail("gap of " + std::to_string(e.begin - expected) + " bytes before tensor '" + io::clip(e.key) + "'");
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
    budget.take(uint64_t(count) * sizeof(float), "safetensors file '" + path + "', tensor '" + io::clip(e.key) + "'");
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
