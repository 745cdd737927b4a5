#include "core/io/pickle.h"

#include <cstring>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "core/io/host_tensor.h"

namespace tl::pickle {

Value::~Value() {
  std::vector<ValuePtr> pending;
  auto take_children = [&pending](Value& v) {
    for (auto& item : v.items) pending.push_back(std::move(item));
    for (auto& [k, val] : v.entries) {
      pending.push_back(std::move(k));
      pending.push_back(std::move(val));
    }
    v.items.clear();
    v.entries.clear();
  };
  take_children(*this);
  while (!pending.empty()) {
    ValuePtr v = std::move(pending.back());
    pending.pop_back();
    // Only the last owner empties it; shared values die with their last owner.
    if (v && v.use_count() == 1) take_children(*v);
  }
}

Arena::~Arena() {
  for (auto& weak : containers)
    if (ValuePtr v = weak.lock()) {
      // Move out first: clearing may destroy values that are still in the list.
      auto items = std::move(v->items);
      auto entries = std::move(v->entries);
      v->items.clear();
      v->entries.clear();
    }
}

const Value* Value::get(const std::string& key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k && k->kind == Kind::String && k->text == key) return v.get();
  return nullptr;
}

std::string describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.boolean ? "True" : "False";
    case Value::Kind::Int: return v.is_big_int() ? "long integer" : "int " + std::to_string(v.integer);
    case Value::Kind::Float: return "float " + std::to_string(v.number);
    case Value::Kind::String: return "string '" + v.text.substr(0, 40) + "'";
    case Value::Kind::Bytes: return "bytes of length " + std::to_string(v.text.size());
    case Value::Kind::Tuple: return "tuple of " + std::to_string(v.items.size());
    case Value::Kind::List: return "list of " + std::to_string(v.items.size());
    case Value::Kind::Dict: return "dict with " + std::to_string(v.entries.size()) + " entries";
    case Value::Kind::Global: return "global " + io::clip(v.text, 200);
    case Value::Kind::Storage: return "storage '" + io::clip(v.storage->key) + "'";
    case Value::Kind::Tensor: return "tensor " + host_shape_str(v.tensor->size);
  }
  return "?";
}

namespace {

// Storage classes torch pickles by name, with the element type they hold.
const std::map<std::string, std::string>& storage_types() {
  static const std::map<std::string, std::string> types = {
      {"torch.FloatStorage", "F32"},  {"torch.DoubleStorage", "F64"}, {"torch.HalfStorage", "F16"},
      {"torch.BFloat16Storage", "BF16"}, {"torch.LongStorage", "I64"}, {"torch.IntStorage", "I32"},
      {"torch.ShortStorage", "I16"},  {"torch.CharStorage", "I8"},    {"torch.ByteStorage", "U8"},
      {"torch.BoolStorage", "BOOL"},  {"torch.UntypedStorage", "U8"},
  };
  return types;
}

// torch.dtype objects, which _rebuild_tensor_v3 receives as an argument.
const std::map<std::string, std::string>& dtype_globals() {
  static const std::map<std::string, std::string> types = {
      {"torch.float32", "F32"}, {"torch.float", "F32"},   {"torch.float64", "F64"}, {"torch.double", "F64"},
      {"torch.float16", "F16"}, {"torch.half", "F16"},    {"torch.bfloat16", "BF16"}, {"torch.int64", "I64"},
      {"torch.long", "I64"},    {"torch.int32", "I32"},   {"torch.int", "I32"},      {"torch.int16", "I16"},
      {"torch.short", "I16"},   {"torch.int8", "I8"},     {"torch.uint8", "U8"},     {"torch.bool", "BOOL"},
  };
  return types;
}

bool allowed_function(const std::string& name) {
  return name == "collections.OrderedDict" || name == "torch._utils._rebuild_tensor" ||
         name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor_v3" ||
         name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state";
}

// What one opcode costs at least (a stack slot, a list slot, a mark) and what
// each object costs on top (the Value, its control block, its arena entry):
// charged against the load budget, so a pickle that builds millions of empty
// lists is refused long before it takes gigabytes.
constexpr uint64_t kOpCost = 16;
constexpr uint64_t kObjectCost = sizeof(Value) + 64;
constexpr uint64_t kMemoCost = 64;

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, const std::string& name, io::LoadBudget& budget)
      : p_(data), size_(size), name_(name), budget_(budget) {}

  LoadResult run() {
    const io::LoadLimits& limits = io::load_limits();
    uint64_t ops = 0;
    while (true) {
      op_pos_ = pos_;
      const uint8_t op = byte();
      if (++ops > limits.max_pickle_ops)
        fail("more than " + std::to_string(limits.max_pickle_ops) + " opcodes (a checkpoint's pickle needs far fewer)");
      charge(kOpCost);
      if (op == 0x2e) {  // STOP
        if (stack_.size() != 1 || !marks_.empty())
          fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
        return {pop(), pos_, arena_};
      }
      if (stack_op(op) || literal(op) || container(op) || object(op)) continue;
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op);
      fail(std::string("unsupported pickle opcode ") + hex +
           (op >= 0x20 && op < 0x7f ? std::string(" ('") + char(op) + "')" : std::string()));
    }
  }

 private:
  // Each opcode family below runs one opcode and returns true, or returns
  // false when `op` is not one of its own.

  // The protocol header, frames, marks and plain stack moves.
  bool stack_op(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t version = byte();
        if (version > 5) fail("unsupported pickle protocol " + std::to_string(version));
        break;
      }
      case 0x95: bytes(8); break;  // FRAME: a length hint; data is contiguous anyway
      case 0x28:  // MARK
        if (marks_.size() >= size_t(io::load_limits().max_nesting))
          fail("MARKs nested deeper than " + std::to_string(io::load_limits().max_nesting));
        marks_.push_back(stack_.size());
        break;
      case 0x30: pop(); break;                            // POP
      case 0x31: pop_mark(); break;                       // POP_MARK
      case 0x32: push(top()); break;                      // DUP
      default: return false;
    }
    return true;
  }

  // None, booleans, integers, floats, strings and bytes.
  bool literal(uint8_t op) {
    switch (op) {
      case 0x4e: push(make(Value::Kind::None)); break;    // NONE
      case 0x88: push(make_bool(true)); break;            // NEWTRUE
      case 0x89: push(make_bool(false)); break;           // NEWFALSE
      case 0x4a: push(make_int(int32_t(le(4)))); break;   // BININT
      case 0x4b: push(make_int(byte())); break;           // BININT1
      case 0x4d: push(make_int(int64_t(le(2)))); break;   // BININT2
      case 0x8a: push(make_long(byte())); break;          // LONG1
      case 0x8b: push(make_long(le(4))); break;           // LONG4
      case 0x47: {                                        // BINFLOAT, big-endian
        uint64_t bits = 0;
        for (uint8_t b : bytes(8)) bits = bits << 8 | b;
        auto v = make(Value::Kind::Float);
        std::memcpy(&v->number, &bits, 8);
        push(v);
        break;
      }
      case 0x58: push(make_text(Value::Kind::String, le(4))); break;  // BINUNICODE
      case 0x8c: push(make_text(Value::Kind::String, byte())); break; // SHORT_BINUNICODE
      case 0x8d: push(make_text(Value::Kind::String, le(8))); break;  // BINUNICODE8
      case 0x54: push(make_text(Value::Kind::String, le(4))); break;  // BINSTRING (py2 str)
      case 0x55: push(make_text(Value::Kind::String, byte())); break; // SHORT_BINSTRING
      case 0x42: push(make_text(Value::Kind::Bytes, le(4))); break;   // BINBYTES
      case 0x43: push(make_text(Value::Kind::Bytes, byte())); break;  // SHORT_BINBYTES
      case 0x8e: push(make_text(Value::Kind::Bytes, le(8))); break;   // BINBYTES8
      default: return false;
    }
    return true;
  }

  // Tuples, lists and dicts.
  bool container(uint8_t op) {
    switch (op) {
      case 0x29: push(make(Value::Kind::Tuple)); break;               // EMPTY_TUPLE
      case 0x74: push(sequence(Value::Kind::Tuple, pop_mark())); break;  // TUPLE
      case 0x85: push(tuple_of(1)); break;                               // TUPLE1
      case 0x86: push(tuple_of(2)); break;                               // TUPLE2
      case 0x87: push(tuple_of(3)); break;                               // TUPLE3
      case 0x5d: push(make(Value::Kind::List)); break;                   // EMPTY_LIST
      case 0x6c: push(sequence(Value::Kind::List, pop_mark())); break;   // LIST
      case 0x61: {                                                       // APPEND
        ValuePtr item = pop();
        list_target()->items.push_back(std::move(item));
        break;
      }
      case 0x65: {  // APPENDS
        auto items = pop_mark();
        auto& list = list_target()->items;
        for (auto& item : items) list.push_back(std::move(item));
        break;
      }
      case 0x7d: push(make(Value::Kind::Dict)); break;  // EMPTY_DICT
      case 0x64: {                                      // DICT
        auto items = pop_mark();
        auto dict = make(Value::Kind::Dict);
        set_items(*dict, items);
        push(dict);
        break;
      }
      case 0x73: {  // SETITEM
        ValuePtr value = pop();
        ValuePtr key = pop();
        dict_target()->entries.emplace_back(std::move(key), std::move(value));
        break;
      }
      case 0x75: {  // SETITEMS
        auto items = pop_mark();
        set_items(*dict_target(), items);
        break;
      }
      default: return false;
    }
    return true;
  }

  // The memo, whitelisted globals, calls and persistent ids (the tensors' storages).
  bool object(uint8_t op) {
    switch (op) {
      case 0x71: charge(kMemoCost); memo_[byte()] = top(); break;          // BINPUT
      case 0x72: charge(kMemoCost); memo_[le(4)] = top(); break;           // LONG_BINPUT
      case 0x94: charge(kMemoCost); memo_[memo_.size()] = top(); break;    // MEMOIZE
      case 0x68: push(memo(byte())); break;         // BINGET
      case 0x6a: push(memo(le(4))); break;          // LONG_BINGET
      case 0x63: {                                  // GLOBAL "module\nname\n"
        std::string module = line();
        std::string attr = line();
        push(resolve_global(module, attr));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        ValuePtr attr = pop();
        ValuePtr module = pop();
        if (module->kind != Value::Kind::String || attr->kind != Value::Kind::String)
          fail("STACK_GLOBAL needs two strings, got " + describe(*module) + " and " + describe(*attr));
        push(resolve_global(module->text, attr->text));
        break;
      }
      case 0x52: {  // REDUCE
        ValuePtr args = pop();
        ValuePtr callable = pop();
        push(call(*callable, *args));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args); same whitelist
        ValuePtr args = pop();
        ValuePtr cls = pop();
        push(call(*cls, *args));
        break;
      }
      case 0x62: {  // BUILD: sets attributes (OrderedDict._metadata, ...); irrelevant for weights
        pop();
        top();
        break;
      }
      case 0x51: {  // BINPERSID
        ValuePtr pid = pop();
        push(persistent(*pid));
        break;
      }
      default: return false;
    }
    return true;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw IOError("pickle in '" + name_ + "': " + why + " (at byte " + std::to_string(op_pos_) + ")");
  }

  void charge(uint64_t bytes) {
    if (!budget_.try_take(bytes))
      fail("its objects would need more than the " + std::to_string(budget_.budget()) +
           " bytes allowed for a file of " + std::to_string(budget_.file_bytes()) +
           " bytes (a pickle that builds far more than a checkpoint holds)");
  }

  uint8_t byte() {
    if (pos_ >= size_) fail("unexpected end of data (truncated file?)");
    return p_[pos_++];
  }
  std::vector<uint8_t> bytes(uint64_t n) {
    if (n > size_ - pos_) fail("unexpected end of data: needs " + std::to_string(n) + " more bytes, " +
                               std::to_string(size_ - pos_) + " left (truncated file?)");
    std::vector<uint8_t> out(p_ + pos_, p_ + pos_ + n);
    pos_ += n;
    return out;
  }
  uint64_t le(int n) {
    uint64_t v = 0;
    auto b = bytes(uint64_t(n));
    for (int i = n - 1; i >= 0; --i) v = v << 8 | b[size_t(i)];
    return v;
  }
  std::string line() {
    std::string out;
    while (true) {
      const uint8_t c = byte();
      if (c == '\n') return out;
      if (out.size() > 200) fail("GLOBAL name longer than 200 characters");
      out.push_back(char(c));
    }
  }

  ValuePtr make(Value::Kind k) {
    charge(kObjectCost);
    auto v = std::make_shared<Value>(k);
    if (k == Value::Kind::Tuple || k == Value::Kind::List || k == Value::Kind::Dict)
      arena_->containers.push_back(v);
    return v;
  }
  ValuePtr make_bool(bool b) {
    auto v = make(Value::Kind::Bool);
    v->boolean = b;
    return v;
  }
  ValuePtr make_int(int64_t i) {
    auto v = make(Value::Kind::Int);
    v->integer = i;
    return v;
  }
  ValuePtr make_long(uint64_t n) {
    if (n > 1024) fail("integer of " + std::to_string(n) + " bytes");
    auto b = bytes(n);
    auto v = make(Value::Kind::Int);
    if (n <= 8) {
      uint64_t u = 0;
      for (size_t i = n; i-- > 0;) u = u << 8 | b[i];
      if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~uint64_t(0) << (8 * n);  // sign-extend
      v->integer = int64_t(u);
    } else {
      v->text.assign(b.begin(), b.end());
    }
    return v;
  }
  ValuePtr make_text(Value::Kind k, uint64_t n) {
    if (n <= size_ - pos_) charge(n);  // else bytes() reports the truncation
    auto b = bytes(n);
    auto v = make(k);
    v->text.assign(b.begin(), b.end());
    return v;
  }

  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  ValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  ValuePtr top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t start = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(std::make_move_iterator(stack_.begin() + std::ptrdiff_t(start)),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(start);
    return items;
  }
  ValuePtr sequence(Value::Kind k, std::vector<ValuePtr> items) {
    auto v = make(k);
    v->items = std::move(items);
    return v;
  }
  ValuePtr tuple_of(int n) {
    std::vector<ValuePtr> items(static_cast<size_t>(n));
    for (int i = n - 1; i >= 0; --i) items[size_t(i)] = pop();
    return sequence(Value::Kind::Tuple, std::move(items));
  }
  Value* list_target() {
    ValuePtr t = top();
    if (t->kind != Value::Kind::List) fail("APPEND to a " + describe(*t));
    return t.get();
  }
  Value* dict_target() {
    ValuePtr t = top();
    if (t->kind != Value::Kind::Dict) fail("SETITEM on a " + describe(*t));
    return t.get();
  }
  void set_items(Value& dict, std::vector<ValuePtr>& items) {
    if (items.size() % 2) fail("odd number of values for SETITEMS");
    for (size_t i = 0; i < items.size(); i += 2) dict.entries.emplace_back(items[i], items[i + 1]);
  }
  ValuePtr memo(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " was never stored");
    return it->second;
  }

  ValuePtr resolve_global(const std::string& module, const std::string& attr) {
    const std::string full = module + "." + attr;
    if (!allowed_function(full) && !storage_types().count(full) && !dtype_globals().count(full))
      throw IOError("refusing pickle global '" + io::clip(full, 200) + "' in '" + name_ +
                    "': a checkpoint may only hold tensors and plain containers (tinylens never runs code "
                    "from a pickle; if this is a whole pickled model, save its state_dict() instead)");
    auto v = make(Value::Kind::Global);
    v->text = full;
    return v;
  }

  int64_t as_int(const Value& v, const char* what) {
    if (v.kind != Value::Kind::Int || v.is_big_int()) fail(std::string(what) + " must be an int, got " + describe(v));
    return v.integer;
  }
  Shape as_shape(const Value& v, const char* what) {
    if (v.kind != Value::Kind::Tuple && v.kind != Value::Kind::List)
      fail(std::string(what) + " must be a tuple, got " + describe(v));
    const int max_rank = io::load_limits().max_tensor_rank;
    if (v.items.size() > size_t(max_rank))
      fail(std::string(what) + " has " + std::to_string(v.items.size()) + " dimensions, more than the " +
           std::to_string(max_rank) + " a tensor may have");
    Shape out;
    for (const auto& item : v.items) out.push_back(as_int(*item, what));
    return out;
  }

  ValuePtr call(const Value& callable, const Value& args) {
    if (callable.kind != Value::Kind::Global || !allowed_function(callable.text))
      fail("cannot call " + describe(callable));
    if (args.kind != Value::Kind::Tuple) fail(callable.text + " called with " + describe(args) + ", not a tuple");
    const auto& a = args.items;
    const std::string& f = callable.text;
    if (f == "collections.OrderedDict") {
      auto dict = make(Value::Kind::Dict);
      if (a.size() == 1 && a[0]->kind == Value::Kind::List) {
        for (const auto& pair : a[0]->items) {
          if ((pair->kind != Value::Kind::Tuple && pair->kind != Value::Kind::List) || pair->items.size() != 2)
            fail("OrderedDict item is a " + describe(*pair) + ", not a pair");
          dict->entries.emplace_back(pair->items[0], pair->items[1]);
        }
      } else if (!a.empty()) {
        fail("OrderedDict called with " + describe(args));
      }
      return dict;
    }
    if (f == "torch._utils._rebuild_parameter" || f == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != Value::Kind::Tensor) fail(f + " needs a tensor first, got " + describe(args));
      return a[0];
    }
    // _rebuild_tensor(storage, offset, size, stride[, requires_grad, hooks[, dtype (v3)], metadata])
    const size_t needed = f == "torch._utils._rebuild_tensor" ? 4 : f == "torch._utils._rebuild_tensor_v2" ? 6 : 7;
    if (a.size() < needed) fail(f + " needs " + std::to_string(needed) + " arguments, got " + std::to_string(a.size()));
    if (a[0]->kind != Value::Kind::Storage) fail(f + " needs a storage first, got " + describe(*a[0]));
    auto t = std::make_shared<TensorRef>();
    t->storage = a[0]->storage;
    t->dtype = t->storage->dtype;
    t->offset = as_int(*a[1], "storage offset");
    t->size = as_shape(*a[2], "tensor size");
    t->stride = as_shape(*a[3], "tensor stride");
    if (f == "torch._utils._rebuild_tensor_v3") {
      const Value& dt = *a[6];
      auto it = dt.kind == Value::Kind::Global ? dtype_globals().find(dt.text) : dtype_globals().end();
      if (it == dtype_globals().end()) fail("_rebuild_tensor_v3 dtype is " + describe(dt));
      t->dtype = it->second;
    }
    auto v = make(Value::Kind::Tensor);
    v->tensor = std::move(t);
    return v;
  }

  // torch's persistent id for a storage:
  // ('storage', storage_type, key, location, numel[, view_metadata (legacy)]).
  ValuePtr persistent(const Value& pid) {
    const auto& a = pid.items;
    if (pid.kind != Value::Kind::Tuple || a.size() < 5 || a[0]->kind != Value::Kind::String ||
        a[0]->text != "storage")
      fail("persistent id " + describe(pid) + " is not a torch storage reference");
    if (a[1]->kind != Value::Kind::Global || !storage_types().count(a[1]->text))
      fail("storage type " + describe(*a[1]) + " is not a known torch storage");
    if (a[2]->kind != Value::Kind::String || a[3]->kind != Value::Kind::String)
      fail("storage key and location must be strings");
    auto s = std::make_shared<StorageRef>();
    s->dtype = storage_types().at(a[1]->text);
    s->key = a[2]->text;
    s->location = a[3]->text;
    s->numel = as_int(*a[4], "storage size");
    if (a.size() > 5 && a[5]->kind == Value::Kind::Tuple) {
      // Old storage views: (view_key, offset, view_size) into the root storage.
      if (a[5]->items.size() != 3) fail("storage view metadata is " + describe(*a[5]));
      s->view_offset = as_int(*a[5]->items[1], "storage view offset");
      s->numel = as_int(*a[5]->items[2], "storage view size");
    }
    if (s->numel < 0 || s->view_offset < 0) fail("negative storage size for '" + io::clip(s->key) + "'");
    auto v = make(Value::Kind::Storage);
    v->storage = std::move(s);
    return v;
  }

  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0, op_pos_ = 0;
  std::string name_;
  io::LoadBudget& budget_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::shared_ptr<Arena> arena_ = std::make_shared<Arena>();
};

}  // namespace

LoadResult load(const uint8_t* data, size_t size, const std::string& name, io::LoadBudget* budget) {
  if (budget) return Machine(data, size, name, *budget).run();
  io::LoadBudget own(size);
  return Machine(data, size, name, own).run();
}

}  // namespace tl::pickle
