// A small, safe reader for the Python pickles inside PyTorch checkpoints.
//
// It is a stack machine over the opcodes torch.save emits (protocols 2-5) and
// it never runs anything: a GLOBAL is only a name, checked against a short
// whitelist (OrderedDict, torch's tensor/parameter rebuild functions, storage
// types, dtypes); every other global (posix.system, builtins.eval, a pickled
// nn.Module class, ...) makes the whole load fail with an IOError naming it.
// REDUCE of a whitelisted rebuild function builds a description of the tensor
// (a TensorRef); the caller fetches the bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/io/limits.h"

namespace tl::pickle {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

// What torch's persistent_id says about a storage. `dtype` uses the
// HostTensor spelling ("F32", "I64", ...; "U8" for untyped byte storages).
struct StorageRef {
  std::string key;       // name of the record (zip) or of the raw block (legacy)
  std::string dtype;
  std::string location;  // "cpu", "cuda:0": informational only
  int64_t numel = 0;     // elements of `dtype` in the storage
  int64_t view_offset = 0;  // legacy storage views: first element of the root
};

// A tensor as _rebuild_tensor(_v2/_v3) describes it: a strided view of a
// storage, in elements of `dtype`.
struct TensorRef {
  std::shared_ptr<StorageRef> storage;
  std::string dtype;
  int64_t offset = 0;
  Shape size, stride;
};

struct Value {
  enum class Kind { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Global, Storage, Tensor };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;  // Int; for longs wider than 64 bits see `text`
  double number = 0;    // Float
  // String / Bytes: the contents. Global: "module.name". Int wider than 64
  // bits: its little-endian two's-complement bytes (integer is then 0).
  std::string text;
  std::vector<ValuePtr> items;                          // Tuple, List
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;   // Dict, insertion order
  std::shared_ptr<StorageRef> storage;                  // Storage
  std::shared_ptr<TensorRef> tensor;                    // Tensor

  Value() = default;
  explicit Value(Kind k) : kind(k) {}
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;
  // Iterative, so a hostile pickle of a million nested lists cannot overflow
  // the stack on destruction.
  ~Value();

  bool is_big_int() const { return kind == Kind::Int && !text.empty(); }
  // Dict lookup by string key; nullptr when absent or not a dict.
  const Value* get(const std::string& key) const;
};

// "dict with 3 entries", "int 7", "global collections.OrderedDict": for errors.
std::string describe(const Value& value);

// Owns every container a load created. A hostile pickle can build reference
// cycles through the memo (a list appended to itself); when the arena goes,
// it empties those containers so the cycles are freed rather than leaked.
struct Arena {
  std::vector<std::weak_ptr<Value>> containers;
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();
};

struct LoadResult {
  ValuePtr value;       // valid, with its contents, while `arena` lives
  size_t consumed = 0;  // bytes up to and including STOP
  std::shared_ptr<Arena> arena;
};

// Parses one pickle that starts at data[0] and ends at its STOP opcode.
// `name` is used in error messages. Throws tl::IOError for truncated input,
// unknown opcodes, stack misuse and refused globals, and for a pickle that
// passes the load limits (io::load_limits()): more opcodes than
// max_pickle_ops, MARKs nested deeper than max_nesting, a tensor of more than
// max_tensor_rank dimensions, or objects whose memory would pass `budget`
// (the budget of the whole file the pickle came from; without one, a budget
// for a file of `size` bytes).
LoadResult load(const uint8_t* data, size_t size, const std::string& name, io::LoadBudget* budget = nullptr);

}  // namespace tl::pickle
