// Sequence ops. A sequence is a list of tensors the graph walk holds on the
// host side (Value::items); its tensors stay what they were (lazy device
// tensors or small host values), so SplitToSequence -> SequenceAt or
// ConcatFromSequence cost no more than Split or Concat. Graph inputs and
// outputs stay tensors: OnnxModel refuses sequence-typed ones.
#include <algorithm>

#include "core/io/onnx/registry.h"

namespace tl::onnx_detail {

namespace {

Value sequence_of(std::vector<Value> items, int32_t elem) {
  Value s;
  s.is_sequence = true;
  s.elem = elem;
  s.items = std::move(items);
  return s;
}

// Input i, which must be a sequence.
const Value& sequence_input(const Ctx& c, size_t i) {
  const Value& s = c.v(i);
  if (!s.is_sequence) bad(c.node, "input " + std::to_string(i) + " is a tensor, a sequence was expected");
  return s;
}

// The position input i names in a sequence of `size` items (negative counts
// from the end); `size` itself is allowed where `inserting`.
size_t position(const Ctx& c, size_t i, size_t size, bool inserting) {
  const int64_t n = int64_t(size), p = c.first_int(i);
  const int64_t hi = inserting ? n : n - 1;
  if (p < -n || p > hi)
    bad(c.node, "position " + std::to_string(p) + " is outside [" + std::to_string(-n) + ", " + std::to_string(hi) +
                    "] for a sequence of " + std::to_string(n) + " tensors");
  return size_t(p < 0 ? p + n : p);
}

// A tensor that goes into a sequence: it must match the sequence's element type.
Value item(const Ctx& c, size_t i, const Value& seq) {
  Value v = c.v(i);
  if (v.is_sequence) bad(c.node, "input " + std::to_string(i) + " is a sequence; sequences hold tensors");
  if (v.elem != seq.elem)
    bad(c.node, std::string("a ") + elem_name(v.elem) + " tensor cannot join a sequence of " + elem_name(seq.elem));
  return v;
}

Value sequence_empty(const Ctx& c) {
  const int32_t elem = int32_t(attr_i(c.node, "dtype", TP::FLOAT));
  tl_dtype(elem, "SequenceEmpty");
  return sequence_of({}, elem);
}

Value sequence_construct(const Ctx& c) {
  if (c.in.empty()) bad(c.node, "SequenceConstruct needs at least one tensor");
  Value seq = sequence_of({}, c.v(0).elem);
  for (size_t i = 0; i < c.in.size(); ++i) seq.items.push_back(item(c, i, seq));
  return seq;
}

Value sequence_at(const Ctx& c) {
  const Value& s = sequence_input(c, 0);
  return s.items[position(c, 1, s.items.size(), false)];
}

Value sequence_insert(const Ctx& c) {
  Value s = sequence_input(c, 0);
  Value v = item(c, 1, s);
  size_t at = c.has(2) ? position(c, 2, s.items.size(), true) : s.items.size();
  s.items.insert(s.items.begin() + int64_t(at), std::move(v));
  return s;
}

Value sequence_erase(const Ctx& c) {
  Value s = sequence_input(c, 0);
  if (s.items.empty()) bad(c.node, "cannot erase from an empty sequence");
  size_t at = c.has(1) ? position(c, 1, s.items.size(), false) : s.items.size() - 1;
  s.items.erase(s.items.begin() + int64_t(at));
  return s;
}

Value sequence_length(const Ctx& c) {
  return from_host({}, TP::INT64, {double(sequence_input(c, 0).items.size())});
}

// Chunks along `axis`: of the sizes `split` lists, of `split` each (the last
// one shorter) for a scalar split, or of 1 without a split (then squeezed
// unless keepdims).
Value split_to_sequence(const Ctx& c) {
  const auto& n = c.node;
  const Shape& s = c.shape(0);
  const int64_t axis = norm_axis(attr_i(n, "axis", 0), int64_t(s.size()), n), len = s[size_t(axis)];
  Ints sizes;
  bool squeeze = false;
  auto bound = [&](int64_t count) {  // each tensor is a lazy slice: their number is bounded
    if (count > kMaxUnrolledTaps)
      unsupported(n, c.opset, "a split into " + std::to_string(count) + " tensors (more than " +
                                  std::to_string(kMaxUnrolledTaps) + ")");
  };
  if (!c.has(1)) {
    bound(len);
    sizes.assign(size_t(len), 1);
    squeeze = attr_i(n, "keepdims", 1) == 0;
  } else if (c.rank(1) == 0) {
    const int64_t k = c.first_int(1);
    if (k <= 0) bad(n, "split " + std::to_string(k) + " is not a positive chunk length");
    bound(len / k + 1);
    for (int64_t at = 0; at < len; at += k) sizes.push_back(std::min(k, len - at));
  } else {
    sizes = c.ints(1);
    int64_t total = 0;
    for (auto k : sizes) {
      if (k < 0 || __builtin_add_overflow(total, k, &total))
        bad(n, "split holds the length " + std::to_string(k) + ", negative or beyond any axis");
    }
    if (total != len) bad(n, "split lengths add up to " + std::to_string(total) + ", axis " + std::to_string(axis) + " has " + std::to_string(len));
  }
  bound(int64_t(sizes.size()));
  const Tensor x = c.t(0);
  Value seq = sequence_of({}, c.v(0).elem);
  int64_t at = 0;
  for (auto k : sizes) {
    Tensor part = x.slice(int(axis), at, at + k);
    at += k;
    if (squeeze) {
      Shape out = part.shape();
      out.erase(out.begin() + axis);
      part = part.reshape(out);
    }
    seq.items.push_back(from_tensor(part, c.v(0).elem));
  }
  return seq;
}

// Concat of the items along `axis`, or a stack along a new axis (new_axis 1).
Value concat_from_sequence(const Ctx& c) {
  const auto& n = c.node;
  Value s = sequence_input(c, 0);
  if (s.items.empty()) bad(n, "cannot concatenate an empty sequence");
  if (int64_t(s.items.size()) > kMaxUnrolledTaps)
    unsupported(n, c.opset, "a concatenation of " + std::to_string(s.items.size()) + " tensors (more than " +
                                std::to_string(kMaxUnrolledTaps) + ")");
  const bool stack = attr_i(n, "new_axis", 0) != 0;
  const int64_t r = int64_t(s.items[0].shape.size());
  const int64_t axis = norm_axis(attr_i(n, "axis", 0), stack ? r + 1 : r, n);
  std::vector<Tensor> parts;
  Shape total;
  for (size_t i = 0; i < s.items.size(); ++i) {
    Value& v = s.items[i];
    if (v.shape.size() != size_t(r)) bad(n, "item " + std::to_string(i) + " has shape " + shape_str(v.shape) + ", item 0 " + shape_str(s.items[0].shape));
    Tensor t = device_tensor(v, c.device);
    if (stack) {
      Shape grown = t.shape();
      grown.insert(grown.begin() + axis, 1);
      t = t.reshape(grown);
    }
    if (total.empty()) total = t.shape();
    else total[size_t(axis)] += t.shape()[size_t(axis)];
    parts.push_back(t);
  }
  c.budget(total, "the concatenation");
  return from_tensor(parts.size() == 1 ? parts[0] : Tensor::cat(parts, int(axis)), s.elem);
}

}  // namespace

std::vector<OpDef> sequence_ops() {
  using namespace types;
  const auto H = Placement::Host;
  std::vector<OpDef> ops = {
      {"SequenceEmpty", 11, kAll, H, sequence_empty},
      {"SequenceConstruct", 11, kAll, H, sequence_construct},
      {"SequenceAt", 11, kAll, H, sequence_at},
      {"SequenceInsert", 11, kAll, H, sequence_insert},
      {"SequenceErase", 11, kAll, H, sequence_erase},
      {"SequenceLength", 11, kAll, H, sequence_length},
      {"SplitToSequence", 11, kAll, H, split_to_sequence},
      {"ConcatFromSequence", 11, kAll, H, concat_from_sequence},
  };
  for (auto& d : ops) d.sequence_io = true;
  return ops;
}

}  // namespace tl::onnx_detail
