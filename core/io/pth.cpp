#include "core/io/pth.h"

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <unordered_set>

#include <zip.h>

#include "core/error.h"
#include "core/io/limits.h"
#include "core/io/pickle.h"

namespace tl {

namespace {

using pickle::Value;

// The bytes of one storage while its tensors are converted: a view of the
// file (legacy layout) or a record read out of the zip, which is given back
// to the budget as soon as its tensors are done.
struct StorageBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::vector<uint8_t> owned;
};
using FetchStorage = std::function<StorageBytes(const pickle::StorageRef&)>;

// Calls `visit` once for every value reachable from `root`. A hostile pickle
// can make a list contain itself (or one list many times) through the memo,
// so each object is visited once, and nesting past max_nesting is refused.
void walk(const Value& root, const std::function<void(const Value&)>& visit, const std::string& path) {
  const int max_depth = io::load_limits().max_nesting;
  std::unordered_set<const Value*> seen;
  std::vector<std::pair<const Value*, int>> todo = {{&root, 0}};
  while (!todo.empty()) {
    auto [cur, depth] = todo.back();
    todo.pop_back();
    if (!cur || !seen.insert(cur).second) continue;
    if (depth > max_depth)
      throw IOError("checkpoint '" + path + "': containers nested deeper than " + std::to_string(max_depth));
    visit(*cur);
    for (const auto& item : cur->items) todo.push_back({item.get(), depth + 1});
    for (const auto& [key, value] : cur->entries) todo.push_back({value.get(), depth + 1});
  }
}

const Value& unwrap(const Value& top, const std::string& path) {
  if (top.kind != Value::Kind::Dict)
    throw IOError("checkpoint '" + path + "' holds a " + pickle::describe(top) + ", not a state dict");
  for (const char* wrapper : {"state_dict", "model"})
    if (const Value* inner = top.get(wrapper); inner && inner->kind == Value::Kind::Dict) return *inner;
  return top;
}

HostTensor convert(const pickle::TensorRef& t, const StorageBytes& raw, const std::string& key,
                   const std::string& path, io::LoadBudget& budget) {
  auto bad = [&](const std::string& why) {
    return IOError("checkpoint '" + path + "', tensor '" + io::clip(key) + "': " + why);
  };
  const size_t elem = host_dtype_size(t.dtype);
  if (!elem) throw bad("unsupported dtype " + t.dtype);
  if (t.size.size() != t.stride.size())
    throw bad("size " + host_shape_str(t.size) + " and stride " + host_shape_str(t.stride) + " differ in rank");

  // Everything in elements of t.dtype, checked against the bytes we have.
  const uint64_t available = raw.size / elem;
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
              io::clip(t.storage->key) + "' holds " + std::to_string(available) + " (truncated file?)");
  // The elements fit the storage, but stride 0 and storages shared by many
  // tensors repeat bytes: what we materialise is bounded by the budget.
  const uint64_t max_elements = io::load_limits().max_tensor_elements;
  if (count > max_elements)
    throw bad("size " + host_shape_str(t.size) + " has " + std::to_string(count) + " elements, more than the " +
              std::to_string(max_elements) + " a tensor may have");
  budget.take(count * sizeof(float), "checkpoint '" + path + "', tensor '" + io::clip(key) + "' (size " +
                                         host_shape_str(t.size) + ", stride " + host_shape_str(t.stride) + ")");

  HostTensor out;
  out.shape = t.size;
  out.dtype = t.dtype;
  out.data.resize(count);
  if (count == 0) return out;
  const uint8_t* base = raw.data + (uint64_t(t.storage->view_offset) + uint64_t(t.offset)) * elem;

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

// Converts the tensors of the (unwrapped) top-level dict, one storage at a
// time: each storage is fetched once, its tensors converted, then released.
StateDict build_state_dict(const Value& top, const FetchStorage& fetch, const std::string& path,
                           io::LoadBudget& budget) {
  const Value& dict = unwrap(top, path);
  std::map<std::string, const pickle::TensorRef*> tensors;  // a repeated key: the last one wins
  for (const auto& [k, v] : dict.entries)
    if (k->kind == Value::Kind::String && v->kind == Value::Kind::Tensor) tensors[k->text] = v->tensor.get();
  if (tensors.empty()) {
    std::string keys;
    for (size_t i = 0; i < dict.entries.size() && i < 10; ++i)
      keys += (i ? ", " : "") + pickle::describe(*dict.entries[i].first);
    throw IOError("checkpoint '" + path + "' has no tensors (top-level keys: " + (keys.empty() ? "none" : keys) + ")");
  }
  std::map<std::string, std::vector<std::pair<std::string, const pickle::TensorRef*>>> by_storage;
  for (const auto& [key, t] : tensors) by_storage[t->storage->key].emplace_back(key, t);
  StateDict out;
  for (const auto& [storage_key, users] : by_storage) {
    const StorageBytes raw = fetch(*users.front().second->storage);
    for (const auto& [key, t] : users) out[key] = convert(*t, raw, key, path, budget);
    budget.give(raw.owned.size());
  }
  return out;
}

// ---- zip layout ----

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};

// Deflate cannot expand data by more than about 1032:1.
constexpr uint64_t kMaxDeflateRatio = 1032;

std::vector<uint8_t> read_entry(zip_t* z, zip_uint64_t index, const std::string& name, const std::string& path,
                                io::LoadBudget& budget) {
  zip_stat_t st;
  zip_stat_init(&st);
  const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
  if (zip_stat_index(z, index, 0, &st) != 0 || (st.valid & need) != need)
    throw IOError("checkpoint '" + path + "': cannot stat record '" + io::clip(name) + "'");
  // The sizes come from the central directory, which libzip does not check
  // against the archive: a forged size must not make us allocate it.
  const uint64_t archive = budget.file_bytes();
  auto forged = [&](const std::string& why) {
    return IOError("checkpoint '" + path + "': record '" + io::clip(name) + "' " + why +
                   " (corrupt or forged zip directory)");
  };
  if (st.comp_size > archive)
    throw forged("claims " + std::to_string(st.comp_size) + " compressed bytes, more than the whole " +
                 std::to_string(archive) + "-byte archive");
  if (st.comp_method == ZIP_CM_STORE) {
    if (st.size != st.comp_size)
      throw forged("is stored uncompressed but claims " + std::to_string(st.size) + " bytes in " +
                   std::to_string(st.comp_size));
  } else if (st.comp_method == ZIP_CM_DEFLATE) {
    if (st.size > st.comp_size * kMaxDeflateRatio + 1024)
      throw forged("claims " + std::to_string(st.size) + " bytes, more than deflate can expand its " +
                   std::to_string(st.comp_size) + " compressed bytes to");
  } else {
    throw IOError("checkpoint '" + path + "': record '" + io::clip(name) + "' uses zip compression method " +
                  std::to_string(st.comp_method) + "; only stored and deflated records are supported");
  }
  budget.take(st.size, "checkpoint '" + path + "': record '" + io::clip(name) + "'");
  zip_file_t* f = zip_fopen_index(z, index, 0);
  if (!f) throw IOError("checkpoint '" + path + "': cannot open record '" + io::clip(name) + "': " + zip_strerror(z));
  std::vector<uint8_t> data(st.size);
  zip_uint64_t done = 0;
  while (done < st.size) {
    zip_int64_t n = zip_fread(f, data.data() + done, st.size - done);
    if (n <= 0) {
      std::string why = n < 0 ? zip_error_strerror(zip_file_get_error(f)) : "unexpected end of record";
      zip_fclose(f);
      throw IOError("checkpoint '" + path + "': cannot read record '" + io::clip(name) + "': " + why + " (truncated file?)");
    }
    done += zip_uint64_t(n);
  }
  // Reading once more past the end makes libzip verify the CRC.
  uint8_t extra;
  zip_int64_t n = zip_fread(f, &extra, 1);
  std::string why = n < 0 ? zip_error_strerror(zip_file_get_error(f)) : "";
  zip_fclose(f);
  if (n != 0)
    throw IOError("checkpoint '" + path + "': record '" + io::clip(name) + "' is corrupt" + (why.empty() ? "" : ": " + why));
  return data;
}

StateDict load_zip(const std::string& path, const std::vector<uint8_t>& file) {
  io::LoadBudget budget(file.size());
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
  // Two records of one name: a lookup by name finds one of them, and which
  // one a reader meant is ambiguous.
  std::set<std::string> names;
  for (zip_int64_t i = 0; i < entries; ++i)
    if (const char* n = zip_get_name(z.get(), zip_uint64_t(i), 0); n && !names.insert(n).second)
      throw IOError("checkpoint '" + path + "': the zip archive holds two records named '" + io::clip(n) + "'");
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
    auto bytes = read_entry(z.get(), zip_uint64_t(order), root + "byteorder", path, budget);
    if (std::string(bytes.begin(), bytes.end()) != "little")
      throw IOError("checkpoint '" + path + "' was written big-endian; only little-endian files are supported");
  }

  const auto pkl = read_entry(z.get(), zip_uint64_t(pkl_index), root + "data.pkl", path, budget);
  const pickle::LoadResult result = pickle::load(pkl.data(), pkl.size(), path + ":" + root + "data.pkl", &budget);

  // Only the storages of the tensors we convert are read, each once.
  auto fetch = [&](const pickle::StorageRef& ref) {
    const std::string name = root + "data/" + ref.key;
    const zip_int64_t index = zip_name_locate(z.get(), name.c_str(), 0);
    if (index < 0) throw IOError("checkpoint '" + path + "': storage record '" + io::clip(name) + "' is missing");
    StorageBytes raw;
    raw.owned = read_entry(z.get(), zip_uint64_t(index), name, path, budget);
    raw.data = raw.owned.data();
    raw.size = raw.owned.size();
    return raw;
  };
  return build_state_dict(*result.value, fetch, path, budget);
}

// ---- legacy layout ----

StateDict load_legacy(const std::string& path, const std::vector<uint8_t>& file) {
  io::LoadBudget budget(file.size());
  size_t pos = 0;
  auto next = [&](const char* what) {
    try {
      auto r = pickle::load(file.data() + pos, file.size() - pos, path, &budget);
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

  // The raw blocks carry no type, so every storage anything refers to is needed to step over them.
  std::map<std::string, std::shared_ptr<pickle::StorageRef>> refs;
  walk(*object.value, [&](const Value& v) {
    if (v.kind == Value::Kind::Tensor) refs.emplace(v.tensor->storage->key, v.tensor->storage);
    else if (v.kind == Value::Kind::Storage) refs.emplace(v.storage->key, v.storage);
  }, path);
  std::map<std::string, std::pair<size_t, size_t>> blocks;  // key: offset and length in the file
  for (const auto& key_value : keys.value->items) {
    if (key_value->kind != Value::Kind::String)
      throw IOError("checkpoint '" + path + "': storage key is a " + pickle::describe(*key_value));
    const std::string& key = key_value->text;
    auto ref = refs.find(key);
    // The blocks carry no type, so an unreferenced one cannot even be skipped.
    if (ref == refs.end())
      throw IOError("checkpoint '" + path + "': storage '" + io::clip(key) + "' is listed but no tensor uses it");
    const size_t elem = host_dtype_size(ref->second->dtype);
    if (file.size() - pos < 8)
      throw IOError("checkpoint '" + path + "': storage '" + io::clip(key) + "' is cut off (truncated file?)");
    uint64_t numel = 0;
    for (int i = 7; i >= 0; --i) numel = numel << 8 | file[pos + size_t(i)];
    pos += 8;
    if (numel > (file.size() - pos) / elem)
      throw IOError("checkpoint '" + path + "': storage '" + io::clip(key) + "' needs " + std::to_string(numel) +
                    " elements of " + ref->second->dtype + " but only " + std::to_string(file.size() - pos) +
                    " bytes remain (truncated file?)");
    blocks[key] = {pos, size_t(numel * elem)};
    pos += numel * elem;
  }
  auto fetch = [&](const pickle::StorageRef& ref) {
    auto it = blocks.find(ref.key);
    if (it == blocks.end())
      throw IOError("checkpoint '" + path + "': storage '" + io::clip(ref.key) + "' is missing from the file");
    StorageBytes raw;
    raw.data = file.data() + it->second.first;
    raw.size = it->second.second;
    return raw;
  };
  return build_state_dict(*object.value, fetch, path, budget);
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
  return load_pth_bytes(io::read_whole_file_bytes(path, "checkpoint"), path);
}

}  // namespace tl
