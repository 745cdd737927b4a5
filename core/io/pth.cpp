#include "core/io/pth.h"

#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include <zip.h>

#include "core/error.h"
#include "core/io/pickle.h"

namespace tl {

namespace {

using pickle::Value;

// Raw bytes of each storage, by key.
using Storages = std::map<std::string, std::vector<uint8_t>>;

void collect_storages(const Value& v, std::map<std::string, std::shared_ptr<pickle::StorageRef>>& out) {
  // State dicts are at most two levels deep ({"state_dict": {...}}), so a
  // bounded walk suffices and hostile nesting cannot recurse far.
  std::vector<std::pair<const Value*, int>> todo = {{&v, 0}};
  while (!todo.empty()) {
    auto [cur, depth] = todo.back();
    todo.pop_back();
    if (cur->kind == Value::Kind::Tensor) {
      out.emplace(cur->tensor->storage->key, cur->tensor->storage);
    } else if (cur->kind == Value::Kind::Storage) {
      out.emplace(cur->storage->key, cur->storage);
    } else if (depth < 8) {
      for (const auto& item : cur->items) todo.push_back({item.get(), depth + 1});
      for (const auto& entry : cur->entries) todo.push_back({entry.second.get(), depth + 1});
    }
  }
}

const Value& unwrap(const Value& top, const std::string& path) {
  if (top.kind != Value::Kind::Dict)
    throw IOError("checkpoint '" + path + "' holds a " + pickle::describe(top) + ", not a state dict");
  for (const char* wrapper : {"state_dict", "model"})
    if (const Value* inner = top.get(wrapper); inner && inner->kind == Value::Kind::Dict) return *inner;
  return top;
}

HostTensor convert(const pickle::TensorRef& t, const Storages& storages, const std::string& key,
                   const std::string& path) {
  auto bad = [&](const std::string& why) {
    return IOError("checkpoint '" + path + "', tensor '" + key + "': " + why);
  };
  const size_t elem = host_dtype_size(t.dtype);
  if (!elem) throw bad("unsupported dtype " + t.dtype);
  auto it = storages.find(t.storage->key);
  if (it == storages.end()) throw bad("storage '" + t.storage->key + "' is missing from the file");
  const std::vector<uint8_t>& raw = it->second;
  if (t.size.size() != t.stride.size())
    throw bad("size " + host_shape_str(t.size) + " and stride " + host_shape_str(t.stride) + " differ in rank");

  // Everything in elements of t.dtype, checked against the bytes we have.
  const uint64_t available = raw.size() / elem;
  uint64_t count = 1, last = uint64_t(t.storage->view_offset);
  if (t.offset < 0) throw bad("negative storage offset " + std::to_string(t.offset));
  if (__builtin_add_overflow(last, uint64_t(t.offset), &last)) throw bad("storage offset overflows");
  for (size_t d = 0; d < t.size.size(); ++d) {
    if (t.size[d] < 0 || t.stride[d] < 0)
      throw bad("negative size or stride in " + host_shape_str(t.size) + " / " + host_shape_str(t.stride));
    uint64_t reach;
    if (__builtin_mul_overflow(uint64_t(t.size[d]), count, &count) ||
        (t.size[d] > 0 && (__builtin_mul_overflow(uint64_t(t.size[d] - 1), uint64_t(t.stride[d]), &reach) ||
                           __builtin_add_overflow(last, reach, &last))))
      throw bad("size " + host_shape_str(t.size) + " with stride " + host_shape_str(t.stride) + " overflows");
  }
  if (count > 0 && last >= available)
    throw bad("size " + host_shape_str(t.size) + ", stride " + host_shape_str(t.stride) + ", offset " +
              std::to_string(t.offset) + " reach element " + std::to_string(last) + " but storage '" +
              t.storage->key + "' holds " + std::to_string(available) + " (truncated file?)");

  HostTensor out;
  out.shape = t.size;
  out.dtype = t.dtype;
  out.data.resize(count);
  if (count == 0) return out;
  const uint8_t* base = raw.data() + (uint64_t(t.storage->view_offset) + uint64_t(t.offset)) * elem;

  // Row-major strides of the logical shape: equal strides mean one copy.
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t d = t.size.size(); d-- > 0;) {
    if (t.size[d] != 1 && t.stride[d] != expect) contiguous = false;
    expect *= t.size[d];
  }
  if (contiguous) {
    host_to_float(base, count, t.dtype, out.data.data());
    return out;
  }
  // Gather element by element with an odometer over the indices.
  const size_t rank = t.size.size();
  std::vector<int64_t> index(rank, 0);
  uint64_t src = 0;
  for (uint64_t i = 0; i < count; ++i) {
    host_to_float(base + src * elem, 1, t.dtype, &out.data[i]);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < t.size[d]) {
        src += uint64_t(t.stride[d]);
        break;
      }
      src -= uint64_t(t.stride[d]) * uint64_t(index[d] - 1);
      index[d] = 0;
    }
  }
  return out;
}

StateDict build_state_dict(const Value& top, const Storages& storages, const std::string& path) {
  const Value& dict = unwrap(top, path);
  StateDict out;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind != Value::Kind::String || v->kind != Value::Kind::Tensor) continue;
    out[k->text] = convert(*v->tensor, storages, k->text, path);
  }
  if (out.empty()) {
    std::string keys;
    for (size_t i = 0; i < dict.entries.size() && i < 10; ++i)
      keys += (i ? ", " : "") + pickle::describe(*dict.entries[i].first);
    throw IOError("checkpoint '" + path + "' has no tensors (top-level keys: " + (keys.empty() ? "none" : keys) + ")");
  }
  return out;
}

// ---- zip layout ----

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};

std::vector<uint8_t> read_entry(zip_t* z, zip_uint64_t index, const std::string& name, const std::string& path,
                                uint64_t file_size) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(z, index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    throw IOError("checkpoint '" + path + "': cannot stat record '" + name + "'");
  // torch stores records uncompressed; allow deflate's best ratio and no more,
  // so a forged size field cannot make us allocate without bound.
  const uint64_t bound = (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size * 1100 + 1024 : file_size * 1100 + 1024;
  if (st.size > bound || st.size > (uint64_t(1) << 36))
    throw IOError("checkpoint '" + path + "': record '" + name + "' claims " + std::to_string(st.size) +
                  " bytes, more than the archive can hold");
  zip_file_t* f = zip_fopen_index(z, index, 0);
  if (!f) throw IOError("checkpoint '" + path + "': cannot open record '" + name + "': " + zip_strerror(z));
  std::vector<uint8_t> data(st.size);
  zip_uint64_t done = 0;
  while (done < st.size) {
    zip_int64_t n = zip_fread(f, data.data() + done, st.size - done);
    if (n <= 0) {
      std::string why = n < 0 ? zip_error_strerror(zip_file_get_error(f)) : "unexpected end of record";
      zip_fclose(f);
      throw IOError("checkpoint '" + path + "': cannot read record '" + name + "': " + why + " (truncated file?)");
    }
    done += zip_uint64_t(n);
  }
  // Reading once more past the end makes libzip verify the CRC.
  uint8_t extra;
  zip_int64_t n = zip_fread(f, &extra, 1);
  std::string why = n < 0 ? zip_error_strerror(zip_file_get_error(f)) : "";
  zip_fclose(f);
  if (n != 0)
    throw IOError("checkpoint '" + path + "': record '" + name + "' is corrupt" + (why.empty() ? "" : ": " + why));
  return data;
}

StateDict load_zip(const std::string& path, const std::vector<uint8_t>& file) {
  const uint64_t file_size = file.size();
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* source = zip_source_buffer_create(file.data(), file.size(), 0, &err);
  std::unique_ptr<zip_t, ZipCloser> z(source ? zip_open_from_source(source, ZIP_RDONLY, &err) : nullptr);
  if (!z) {
    std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    if (source) zip_source_free(source);
    throw IOError("checkpoint '" + path + "' is not a readable zip archive: " + why + " (truncated file?)");
  }
  zip_error_fini(&err);
  // The records live under one root folder whose name varies with the torch
  // version ("archive", or the file's stem); data.pkl tells us which.
  const zip_int64_t entries = zip_get_num_entries(z.get(), 0);
  std::string root;
  zip_int64_t pkl_index = -1;
  for (zip_int64_t i = 0; i < entries; ++i) {
    const char* n = zip_get_name(z.get(), zip_uint64_t(i), 0);
    if (!n) continue;
    std::string name = n;
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.substr(slash) == "/data.pkl") {
      root = name.substr(0, slash + 1);
      pkl_index = i;
      break;
    }
  }
  if (pkl_index < 0) throw IOError("checkpoint '" + path + "' is a zip archive without a <root>/data.pkl record");

  const zip_int64_t order = zip_name_locate(z.get(), (root + "byteorder").c_str(), 0);
  if (order >= 0) {
    auto bytes = read_entry(z.get(), zip_uint64_t(order), root + "byteorder", path, file_size);
    if (std::string(bytes.begin(), bytes.end()) != "little")
      throw IOError("checkpoint '" + path + "' was written big-endian; only little-endian files are supported");
  }

  const auto pkl = read_entry(z.get(), zip_uint64_t(pkl_index), root + "data.pkl", path, file_size);
  const pickle::LoadResult result = pickle::load(pkl.data(), pkl.size(), path + ":" + root + "data.pkl");

  std::map<std::string, std::shared_ptr<pickle::StorageRef>> refs;
  collect_storages(unwrap(*result.value, path), refs);
  Storages storages;
  for (const auto& [key, ref] : refs) {
    const std::string name = root + "data/" + key;
    const zip_int64_t index = zip_name_locate(z.get(), name.c_str(), 0);
    if (index < 0) throw IOError("checkpoint '" + path + "': storage record '" + name + "' is missing");
    storages[key] = read_entry(z.get(), zip_uint64_t(index), name, path, file_size);
  }
  return build_state_dict(*result.value, storages, path);
}

// ---- legacy layout ----

StateDict load_legacy(const std::string& path, const std::vector<uint8_t>& file) {
  size_t pos = 0;
  auto next = [&](const char* what) {
    try {
      auto r = pickle::load(file.data() + pos, file.size() - pos, path);
      pos += r.consumed;
      return r;
    } catch (const IOError& e) {
      throw IOError(std::string(e.what()) + " [while reading the " + what + "]");
    }
  };
  // 0x1950a86a20f9469cfc6c, the magic number torch writes first, as LONG1.
  static const uint8_t kMagic[] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  auto magic = next("magic number");
  if (!magic.value->is_big_int() || magic.value->text != std::string(reinterpret_cast<const char*>(kMagic), 10))
    throw IOError("'" + path + "' is not a PyTorch checkpoint (wrong magic number)");
  auto protocol = next("protocol version");
  if (protocol.value->kind != Value::Kind::Int || protocol.value->integer != 1001)
    throw IOError("checkpoint '" + path + "' has unsupported legacy protocol " + pickle::describe(*protocol.value));
  auto sys_info = next("sys_info");
  if (const Value* le = sys_info.value->get("little_endian"); le && le->kind == Value::Kind::Bool && !le->boolean)
    throw IOError("checkpoint '" + path + "' was written big-endian; only little-endian files are supported");
  auto object = next("state dict");
  auto keys = next("storage key list");
  if (keys.value->kind != Value::Kind::List)
    throw IOError("checkpoint '" + path + "': storage key list is a " + pickle::describe(*keys.value));

  std::map<std::string, std::shared_ptr<pickle::StorageRef>> refs;
  collect_storages(*object.value, refs);
  Storages storages;
  for (const auto& key_value : keys.value->items) {
    if (key_value->kind != Value::Kind::String)
      throw IOError("checkpoint '" + path + "': storage key is a " + pickle::describe(*key_value));
    const std::string& key = key_value->text;
    auto ref = refs.find(key);
    // The blocks carry no type, so an unreferenced one cannot even be skipped.
    if (ref == refs.end())
      throw IOError("checkpoint '" + path + "': storage '" + key + "' is listed but no tensor uses it");
    const size_t elem = host_dtype_size(ref->second->dtype);
    if (file.size() - pos < 8)
      throw IOError("checkpoint '" + path + "': storage '" + key + "' is cut off (truncated file?)");
    uint64_t numel = 0;
    for (int i = 7; i >= 0; --i) numel = numel << 8 | file[pos + size_t(i)];
    pos += 8;
    if (numel > (file.size() - pos) / elem)
      throw IOError("checkpoint '" + path + "': storage '" + key + "' needs " + std::to_string(numel) +
                    " elements of " + ref->second->dtype + " but only " + std::to_string(file.size() - pos) +
                    " bytes remain (truncated file?)");
    storages[key].assign(file.begin() + std::ptrdiff_t(pos), file.begin() + std::ptrdiff_t(pos + numel * elem));
    pos += numel * elem;
  }
  return build_state_dict(*object.value, storages, path);
}

}  // namespace

StateDict load_pth_bytes(const std::vector<uint8_t>& file, const std::string& path) {
  if (file.empty()) throw IOError("checkpoint '" + path + "' is empty");
  if (file.size() >= 4 && std::memcmp(file.data(), "PK\x03\x04", 4) == 0) return load_zip(path, file);
  if (file[0] != 0x80)
    throw IOError("'" + path + "' is not a PyTorch checkpoint (neither a zip archive nor a pickle)");
  return load_legacy(path, file);
}

StateDict load_pth(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IOError("cannot open checkpoint '" + path + "'");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw IOError("cannot read checkpoint '" + path + "'");
  in.seekg(0);
  std::vector<uint8_t> file(static_cast<size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(file.data()), size))
    throw IOError("cannot read checkpoint '" + path + "'");
  return load_pth_bytes(file, path);
}

}  // namespace tl
