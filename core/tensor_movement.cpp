// Tensor movement: views and copies that rearrange elements (reshape,
// permute, expand, pad, slice, flip, cat, stack, squeeze, flatten).
#include "core/tensor.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/tensor_internal.h"
#include "core/tree_reduce.h"

namespace tl {

using namespace detail;

// ------------------------------------------------------------ movement -----

Tensor Tensor::reshape(const Shape& new_shape) const {
  Shape s = new_shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: more than one -1 in " + shape_str(new_shape));
      infer = int(i);
    } else if (s[i] < 0) {
      throw ShapeError("reshape: negative size in " + shape_str(new_shape));
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      throw ShapeError("reshape: the sizes of " + shape_str(new_shape) + " multiply past 64 bits");
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      throw ShapeError("reshape: cannot reshape " + shape_str(shape()) + " into " + shape_str(new_shape));
    s[infer] = numel() / known;
  }
  if (tl::numel(s) != numel())
    throw ShapeError("reshape: cannot reshape " + shape_str(shape()) + " (" + std::to_string(numel()) +
                     " elements) into " + shape_str(new_shape));
  if (s == shape()) return *this;
  // a reshape of an unrealized reshape reads the original directly
  const NodeRef& from = node_->op == Op::Reshape && !node_->realized() ? node_->src[0] : node_;
  if (from->shape == s) return Tensor(from);
  return Tensor(make(Op::Reshape, {from}, s, dtype(), std::vector<int64_t>(s.begin(), s.end())));
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  if (int(order.size()) != ndim())
    throw ShapeError("permute: order of length " + std::to_string(order.size()) + " for shape " + shape_str(shape()));
  std::vector<int64_t> arg;
  std::vector<bool> seen(ndim(), false);
  Shape s;
  for (int a : order) {
    int n = norm_axis(a, ndim(), shape(), "permute");
    if (seen[n]) throw ShapeError("permute: axis " + std::to_string(a) + " repeated for shape " + shape_str(shape()));
    seen[n] = true;
    arg.push_back(n);
    s.push_back(shape()[n]);
  }
  bool identity = true;
  for (size_t i = 0; i < arg.size(); ++i) identity &= arg[i] == int64_t(i);
  if (identity) return *this;
  return Tensor(make(Op::Permute, {node_}, s, dtype(), arg));
}

Tensor Tensor::transpose(int a, int b) const {
  std::vector<int> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[norm_axis(a, ndim(), shape(), "transpose")], order[norm_axis(b, ndim(), shape(), "transpose")]);
  return permute(order);
}

Tensor Tensor::expand(const Shape& target) const {
  if (target.size() < shape().size())
    throw ShapeError("expand: cannot expand " + shape_str(shape()) + " to fewer axes " + shape_str(target));
  Tensor t = *this;
  if (target.size() > shape().size()) {
    Shape s(target.size() - shape().size(), 1);
    s.insert(s.end(), shape().begin(), shape().end());
    t = reshape(s);
  }
  Shape s = t.shape();
  for (size_t i = 0; i < s.size(); ++i) {
    if (target[i] == -1 || target[i] == s[i]) continue;
    if (s[i] != 1 || target[i] < 0) throw ShapeError("expand: cannot expand " + shape_str(shape()) + " to " + shape_str(target));
    s[i] = target[i];
  }
  if (s == t.shape()) return t;
  return Tensor(make(Op::Expand, {t.node_}, s, dtype(), std::vector<int64_t>(s.begin(), s.end())));
}

Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& padding, double value) const {
  if (int(padding.size()) != ndim())
    throw ShapeError("pad: " + std::to_string(padding.size()) + " (before, after) pairs for shape " + shape_str(shape()));
  Tensor t = *this;
  // negative padding crops
  std::vector<int64_t> crop, grow;
  bool any_crop = false, any_grow = false;
  Shape s = shape();
  for (int i = 0; i < ndim(); ++i) {
    auto [b, a] = padding[i];
    if (b == INT64_MIN || a == INT64_MIN)
      throw ShapeError("pad: padding (" + std::to_string(b) + ", " + std::to_string(a) + ") of axis " + std::to_string(i) +
                       " of " + shape_str(shape()) + " cannot be negated");
    int64_t cb = b < 0 ? -b : 0, ca = a < 0 ? -a : 0;
    if (add_sizes(cb, ca, "pad: cropping axis " + std::to_string(i)) > s[i])
      throw ShapeError("pad: cropping more than axis " + std::to_string(i) + " of " + shape_str(shape()));
    crop.push_back(cb);
    crop.push_back(s[i] - ca);
    grow.push_back(std::max<int64_t>(b, 0));
    grow.push_back(std::max<int64_t>(a, 0));
    any_crop |= cb || ca;
    any_grow |= b > 0 || a > 0;
  }
  if (any_crop) {
    Shape cs;
    for (int i = 0; i < ndim(); ++i) cs.push_back(crop[2 * i + 1] - crop[2 * i]);
    t = Tensor(make(Op::Shrink, {t.node_}, cs, dtype(), crop));
  }
  if (!any_grow) return t;
  Shape ps = t.shape();
  for (int i = 0; i < ndim(); ++i) {
    const std::string what = "pad: axis " + std::to_string(i) + " of " + shape_str(shape()) + " padded by (" +
                             std::to_string(grow[2 * i]) + ", " + std::to_string(grow[2 * i + 1]) + ")";
    ps[i] = add_sizes(add_sizes(ps[i], grow[2 * i], what), grow[2 * i + 1], what);
  }
  return Tensor(make(Op::Pad, {t.node_}, ps, dtype(), grow, value_of_type(value, dtype())));
}

Tensor Tensor::slice(int axis, int64_t start, int64_t stop, int64_t step) const {
  int a = norm_axis(axis, ndim(), shape(), "slice");
  int64_t n = shape()[a];
  if (step == 0) throw ShapeError("slice: step must not be 0");
  if (step == INT64_MIN) throw ShapeError("slice: step " + std::to_string(step) + " cannot be negated");
  auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
  if (step > 0) {
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = clampi(start, 0, n);
    stop = clampi(stop, 0, n);
  } else {
    if (start < 0) start += n;
    if (stop < 0 && stop != INT64_MIN) stop += n;
    start = clampi(start, -1, n - 1);
    stop = stop == INT64_MIN ? -1 : clampi(stop, -1, n - 1);
  }
  if (step > 0 && (start > n || stop < 0))
    throw ShapeError("slice: range out of bounds for axis " + std::to_string(axis) + " of " + shape_str(shape()));
  Tensor t = *this;
  if (step < 0) {  // reverse, then slice forward
    t = flip({a});
    int64_t s2 = n - 1 - start, e2 = n - 1 - stop;
    return t.slice(a, s2, std::max(s2, e2), -step);
  }
  // (stop - start - 1) / step + 1 rounds up without adding step, which may be huge.
  int64_t len = stop > start ? (stop - start - 1) / step + 1 : 0;
  std::vector<int64_t> arg;
  Shape s = shape();
  for (int i = 0; i < ndim(); ++i) {
    arg.push_back(0);
    arg.push_back(s[i]);
  }
  arg[2 * a] = start;
  arg[2 * a + 1] = start + (len == 0 ? 0 : (len - 1) * step + 1);
  s[a] = arg[2 * a + 1] - arg[2 * a];
  if (s != shape()) t = Tensor(make(Op::Shrink, {t.node_}, s, dtype(), arg));
  if (step == 1 || len <= 1) return t;
  // every step-th element: pad to len*step, view as (len, step), keep column 0
  Shape padded = t.shape();
  std::vector<std::pair<int64_t, int64_t>> pads(ndim(), {0, 0});
  pads[a].second = len * step - padded[a];
  t = t.pad(pads);
  Shape split = t.shape();
  split[a] = len;
  split.insert(split.begin() + a + 1, step);
  t = t.reshape(split);
  return t.slice(a + 1, 0, 1).squeeze(a + 1);
}

Tensor Tensor::flip(const std::vector<int>& axes) const {
  auto ax = norm_axes(axes, shape(), "flip");
  std::vector<int64_t> arg;
  for (int a : ax)
    if (shape()[a] > 1) arg.push_back(a);
  if (arg.empty()) return *this;
  return Tensor(make(Op::Flip, {node_}, shape(), dtype(), arg));
}

// Whether n is an unrealized concatenation: Tensor::cat's tree of Adds over
// zero Pads. Walked with a stack of its own, and only so far: a graph may
// chain Adds deeper than the call stack goes.
static bool lazy_concatenation(const Node& n) {
  constexpr size_t kMostNodes = 4096;
  std::vector<const Node*> todo{&n};
  for (size_t seen = 0; !todo.empty(); ++seen) {
    const Node* a = todo.back();
    todo.pop_back();
    if (seen == kMostNodes || a->realized() || a->op != Op::Add || a->src.size() != 2) return false;
    for (const NodeRef& s : a->src)
      if (!(s->op == Op::Pad && s->value == 0 && !s->realized())) todo.push_back(s.get());
  }
  return true;
}

Tensor Tensor::cat(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) throw ShapeError("cat: no tensors given");
  int a = norm_axis(axis, ts[0].ndim(), ts[0].shape(), "cat");
  int64_t total = 0;
  for (auto& t : ts) {
    bool ok = t.ndim() == ts[0].ndim();
    for (int i = 0; ok && i < t.ndim(); ++i) ok = i == a || t.shape()[i] == ts[0].shape()[i];
    if (!ok)
      throw ShapeError("cat: shapes " + shape_str(ts[0].shape()) + " and " + shape_str(t.shape()) +
                       " differ outside axis " + std::to_string(axis));
    total = add_sizes(total, t.shape()[a], "cat: the length of axis " + std::to_string(axis));
  }
  // The padded pieces are summed as a balanced tree: a chain of thousands of
  // additions is slow to schedule and deep enough to overflow the stack.
  TreeReduce parts{[](const Tensor& x, const Tensor& y) { return x + y; }, {}};
  int64_t offset = 0;
  for (Tensor t : ts) {
    // A piece that is itself an unrealized concatenation is stored first:
    // else every element of this one tests the bounds of all of its pieces
    // (DenseNet's chained Concats: the last of a block reads 7 pieces deep at
    // every element, and recomputes a pool among them). On the C device it
    // is then assembled in place, inside this one (core/assemble.h).
    if (lazy_concatenation(*t.node())) t = t.contiguous();
    std::vector<std::pair<int64_t, int64_t>> pads(t.ndim(), {0, 0});
    pads[a] = {offset, total - offset - t.shape()[a]};
    offset += t.shape()[a];
    parts.add(t.pad(pads));
  }
  return parts.result();
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) throw ShapeError("stack: no tensors given");
  std::vector<Tensor> u;
  for (auto& t : ts) {
    if (t.shape() != ts[0].shape())
      throw ShapeError("stack: shapes " + shape_str(ts[0].shape()) + " and " + shape_str(t.shape()) + " differ");
    u.push_back(t.unsqueeze(axis));  // a negative axis counts from the end of the stacked shape, in cat too
  }
  return cat(u, axis);
}

Tensor Tensor::squeeze(int axis) const {
  int a = norm_axis(axis, ndim(), shape(), "squeeze");
  if (shape()[a] != 1) return *this;
  Shape s = shape();
  s.erase(s.begin() + a);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int axis) const {
  int a = axis < 0 ? axis + ndim() + 1 : axis;
  if (a < 0 || a > ndim())
    throw ShapeError("unsqueeze: axis " + std::to_string(axis) + " is out of range for shape " + shape_str(shape()));
  Shape s = shape();
  s.insert(s.begin() + a, 1);
  return reshape(s);
}

Tensor Tensor::flatten(int start, int end) const {
  if (ndim() == 0) return reshape({1});
  int s = norm_axis(start, ndim(), shape(), "flatten"), e = norm_axis(end, ndim(), shape(), "flatten");
  if (s > e) throw ShapeError("flatten: start axis after end axis for shape " + shape_str(shape()));
  Shape out(shape().begin(), shape().begin() + s);
  int64_t n = 1;
  for (int i = s; i <= e; ++i) n *= shape()[i];
  out.push_back(n);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

}  // namespace tl
