// Shape and indexing ops. Small integer values that only describe shapes
// (Shape -> Gather -> Concat -> Reshape) stay on the host, so reshapes and
// slices see plain ints; the data itself moves through lazy views.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/io/onnx/registry.h"
#include "core/io/onnx_shapes_only.h"

namespace tl::onnx_detail {

namespace {

Value constant_value(const Ctx& c) {
  const auto& n = c.node;
  for (const auto& a : n.attribute()) {
    if (a.name() == "value") return value_from_proto(a.t(), "", "Constant '" + n.name() + "'");
    if (a.name() == "value_float") return from_host({}, TP::FLOAT, {double(a.f())});
    if (a.name() == "value_int") return from_host({}, TP::INT64, {double(a.i())});
    if (a.name() == "value_floats") return from_host({int64_t(a.floats_size())}, TP::FLOAT, std::vector<double>(a.floats().begin(), a.floats().end()));
    if (a.name() == "value_ints") return from_host({int64_t(a.ints_size())}, TP::INT64, std::vector<double>(a.ints().begin(), a.ints().end()));
  }
  unsupported(n, c.opset, "Constant without a numeric value (sparse_value or strings)");
}

Value op_identity(const Ctx& c) {
  return c.v(0);
}

Value op_shape(const Ctx& c) {
  const auto& n = c.node;
  const Shape& s = c.shape(0);
  int64_t r = int64_t(s.size());
  int64_t start = attr_i(n, "start", 0), end = attr_i(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  return from_host({end - start}, TP::INT64, std::vector<double>(s.begin() + start, s.begin() + end));
}

Value op_size(const Ctx& c) {
  return from_host({}, TP::INT64, {double(numel(c.shape(0)))});
}

Shape reshape_target(const Ctx& c, const Shape& in, Ints target, bool allowzero) {
  int64_t known = 1, infer = -1, total = numel(in);
  Shape s(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) bad(c.node, "0 in the new shape copies a dimension the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) bad(c.node, "two -1 in the new shape " + shape_str(target));
      infer = int64_t(i);
      continue;
    }
    if (d < 0) bad(c.node, "negative size " + std::to_string(d) + " in the new shape " + shape_str(target));
    if (__builtin_mul_overflow(known, d, &known) || known > c.max_elements)
      bad(c.node, "cannot reshape " + shape_str(in) + " to " + shape_str(target) + ": too many elements");
    s[i] = d;
  }
  if (infer >= 0) {
    if (known == 0 || total % known)
      bad(c.node, "cannot reshape " + shape_str(in) + " to " + shape_str(target) + " (the -1 has no whole size)");
    s[size_t(infer)] = total / known;
  } else if (known != total) {
    bad(c.node, "cannot reshape " + shape_str(in) + " (" + std::to_string(total) + " elements) to " + shape_str(s));
  }
  return s;
}

Value reshaped(const Ctx& c, const Shape& s) {
  Value& x = c.v(0);
  if (x.host) return from_host(s, x.elem, x.data);
  return from_tensor(reshape_to(c.t(0), s), x.elem);
}

Value op_reshape(const Ctx& c) {
  const auto& n = c.node;
  Ints target = c.opset < 5 ? attr_ints(n, "shape") : c.ints(1);
  return reshaped(c, reshape_target(c, c.shape(0), target, attr_i(n, "allowzero", 0) != 0));
}

Value op_flatten(const Ctx& c) {
  const auto& n = c.node;
  const Shape& s = c.shape(0);
  // Flatten's axis may also be the rank itself (everything in the outer part).
  int64_t r = int64_t(s.size()), axis = attr_i(n, "axis", 1);
  if (axis < -r || axis > r)
    bad(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r) + " (" + shape_str(s) + ")");
  if (axis < 0) axis += r;
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[size_t(i)];
  return reshaped(c, {outer, numel(s) / std::max<int64_t>(outer, 1)});
}

Value op_squeeze(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = c.node.op_type();
  Ints axes = c.opset >= 13 ? (c.has(1) ? c.ints(1) : Ints{}) : attr_ints(n, "axes");
  Shape s = c.shape(0);
  if (op == "Squeeze") {
    std::set<int64_t> drop;
    for (auto a : axes) drop.insert(norm_axis(a, int64_t(s.size()), n));
    Shape out;
    for (size_t i = 0; i < s.size(); ++i) {
      bool d = axes.empty() ? s[i] == 1 : drop.count(int64_t(i)) > 0;
      if (d && s[i] != 1) bad(n, "cannot squeeze axis " + std::to_string(i) + " of size " + std::to_string(s[i]));
      if (!d) out.push_back(s[i]);
    }
    return reshaped(c, out);
  }
  int64_t r = int64_t(s.size() + axes.size());
  std::set<int64_t> add;
  for (auto a : axes)
    if (!add.insert(norm_axis(a, r, n)).second) bad(n, "axis " + std::to_string(a) + " repeated in " + shape_str(axes));
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(add.count(i) ? 1 : s[k++]);
  return reshaped(c, out);
}

Value op_concat(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  int64_t r = c.rank(0);
  int64_t axis = norm_axis(attr_i(n, "axis", 0), r, n);
  // Every input has the first's rank and matches it outside the axis.
  // (An empty input of another rank, PyTorch's legacy "empty tensor", is left out.)
  auto skip = [&](size_t i) { return !c.has(i) || (c.shape(i).size() != size_t(r) && numel(c.shape(i)) == 0); };
  Shape total = c.shape(0);
  total[size_t(axis)] = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (skip(i)) continue;
    const Shape& si = c.shape(i);
    bool ok = si.size() == size_t(r);
    for (int64_t a = 0; ok && a < r; ++a) ok = a == axis || si[size_t(a)] == total[size_t(a)];
    if (!ok)
      bad(n, "input " + std::to_string(i) + " has shape " + shape_str(si) + ", which does not match input 0 " +
                 shape_str(c.shape(0)) + " outside axis " + std::to_string(axis));
    if (__builtin_add_overflow(total[size_t(axis)], si[size_t(axis)], &total[size_t(axis)]))
      bad(n, "the concatenation's size along axis " + std::to_string(axis) + " overflows");
  }
  c.budget(total, "the concatenation");
  bool host = c.all_host();
  if (host) {
    const Shape& out = total;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= out[size_t(i)];
    for (int64_t i = axis + 1; i < r; ++i) inner *= out[size_t(i)];
    std::vector<double> d;
    for (int64_t o = 0; o < outer; ++o)
      for (size_t i = 0; i < c.in.size(); ++i) {
        if (skip(i)) continue;
        int64_t chunk = c.shape(i)[size_t(axis)] * inner;
        auto& src = c.v(i).data;
        d.insert(d.end(), src.begin() + o * chunk, src.begin() + (o + 1) * chunk);
      }
    return from_host(out, c.v(0).elem, d);
  }
  std::vector<Tensor> ts;
  for (size_t i = 0; i < c.in.size(); ++i)
    if (!skip(i) && numel(c.shape(i)) > 0) ts.push_back(c.t(i));
  if (ts.empty()) return from_host(total, c.v(0).elem, {});
  return same(ts.size() == 1 ? ts[0] : Tensor::cat(ts, int(axis)));
}

// The entries `idx` (already non-negative) of x along `axis`.
Tensor take(const Tensor& x, int axis, const Ints& idx, int64_t max_elements) {
  int64_t r = x.ndim(), dim = x.dim(axis);
  // Callers check their indices with the node's name; this is the last guard.
  for (auto i : idx)
    if (i < 0 || i >= dim)
      throw ShapeError("index " + std::to_string(i) + " out of range for an axis of size " + std::to_string(dim));
  if (idx.size() > 32 && dim > 0 && int64_t(idx.size()) > max_elements / dim)
    throw ShapeError("gathering " + std::to_string(idx.size()) + " entries of an axis of " + std::to_string(dim) +
                     " needs too large a selection matrix");
  if (idx.size() <= 32) {
    std::vector<Tensor> parts;
    for (auto i : idx) parts.push_back(x.slice(axis, i, i + 1));
    return parts.size() == 1 ? parts[0] : Tensor::cat(parts, axis);
  }
  // Many indices: one one-hot matmul instead of hundreds of slices.
  std::vector<float> onehot(size_t(dim) * idx.size(), 0.f);
  for (size_t k = 0; k < idx.size(); ++k) onehot[size_t(idx[k]) * idx.size() + k] = 1.f;
  Tensor oh = Tensor::from_data(onehot, {dim, int64_t(idx.size())}, x.device());
  std::vector<int> perm;
  for (int i = 0; i < r; ++i)
    if (i != axis) perm.push_back(i);
  perm.push_back(axis);
  Tensor moved = x.cast(float_type(x.dtype())).permute(perm).matmul(oh);  // axis last, now of size K
  std::vector<int> back(static_cast<size_t>(r));
  for (int i = 0, j = 0; i < r; ++i) back[size_t(i)] = i == axis ? int(r - 1) : j++;
  Tensor y = moved.permute(back);
  return is_float(x.dtype()) ? y : (y + y.sign() * 0.25).cast(x.dtype());
}

Value gather(const Ctx& c) {
  Value& data = c.v(0);
  int64_t r = int64_t(data.shape.size());
  int64_t axis = norm_axis(attr_i(c.node, "axis", 0), r, c.node);
  Ints idx = c.ints(1);
  Shape ishape = c.shape(1);
  int64_t dim = data.shape[size_t(axis)];
  {
    Shape out(data.shape.begin(), data.shape.begin() + axis);
    out.insert(out.end(), ishape.begin(), ishape.end());
    out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
    c.budget(out, "the output");
  }
  for (auto& i : idx) {
    if (i < -dim || i >= dim) bad(c.node, "index " + std::to_string(i) + " out of range for axis of size " + std::to_string(dim));
    if (i < 0) i += dim;
  }
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), ishape.begin(), ishape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (data.host && data.data.size() <= 4096) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= data.shape[size_t(i)];
    for (int64_t i = axis + 1; i < r; ++i) inner *= data.shape[size_t(i)];
    std::vector<double> o;
    for (int64_t a = 0; a < outer; ++a)
      for (auto i : idx)
        for (int64_t b = 0; b < inner; ++b) o.push_back(data.data[size_t((a * dim + i) * inner + b)]);
    return from_host(out, data.elem, std::move(o));
  }
  return from_tensor(take(c.t(0), int(axis), idx, c.max_elements).reshape(out), data.elem);
}

Value slice(const Ctx& c) {
  Ints starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = attr_ints(c.node, "starts");
    ends = attr_ints(c.node, "ends");
    axes = attr_ints(c.node, "axes");
  } else {
    starts = c.ints(1);
    ends = c.ints(2);
    if (c.has(3)) axes = c.ints(3);
    if (c.has(4)) steps = c.ints(4);
  }
  int64_t r = c.rank(0);
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    bad(c.node, "starts, ends, axes and steps differ in length");
  Value& xv = c.v(0);
  Shape out = xv.shape;
  struct Range { int64_t start, count, step; };
  std::vector<Range> ranges(static_cast<size_t>(r));
  for (int64_t a = 0; a < r; ++a) ranges[size_t(a)] = {0, out[size_t(a)], 1};
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = norm_axis(axes[k], r, c.node), dim = xv.shape[size_t(a)], st = steps[k];
    if (st == 0) bad(c.node, "step 0");
    if (st == INT64_MIN) bad(c.node, "step " + std::to_string(st) + " cannot be negated");
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += dim;
    if (e < 0 && e > INT64_MIN / 2) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // (e - s - 1) / st + 1 rounds up without adding st, which may be huge.
    int64_t count = st > 0 ? (e > s ? (e - s - 1) / st + 1 : 0) : (s > e ? (s - e - 1) / -st + 1 : 0);
    ranges[size_t(a)] = {s, count, st};
    out[size_t(a)] = count;
  }
  if (numel(out) == 0) return from_host(out, xv.elem, {});
  if (xv.host && xv.data.size() <= 4096) {
    std::vector<double> o;
    Ints idx(size_t(r), 0);
    do {
      int64_t off = 0;
      for (int64_t a = 0; a < r; ++a)
        off = off * xv.shape[size_t(a)] + ranges[size_t(a)].start + idx[size_t(a)] * ranges[size_t(a)].step;
      o.push_back(xv.data[size_t(off)]);
    } while (next_index(idx, out));
    return from_host(out, xv.elem, std::move(o));
  }
  Tensor x = c.t(0);
  for (int64_t a = 0; a < r; ++a) {
    auto& rg = ranges[size_t(a)];
    if (rg.start == 0 && rg.step == 1 && rg.count == xv.shape[size_t(a)]) continue;
    x = take_range(x, int(a), rg.start, rg.count, rg.step);
  }
  return from_tensor(x, xv.elem);
}

std::vector<Value> split(const Ctx& c) {
  Tensor x = c.t(0);
  int64_t axis = norm_axis(attr_i(c.node, "axis", 0), x.ndim(), c.node);
  Ints parts;
  if (c.opset >= 13 && c.has(1)) parts = c.ints(1);
  else if (c.opset < 13) parts = attr_ints(c.node, "split");
  int64_t n = c.node.output_size(), dim = x.dim(int(axis));
  if (parts.empty()) {
    int64_t k = attr_i_in(c.node, "num_outputs", n, 1, std::max<int64_t>(n, 1));
    int64_t each = (dim + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) parts.push_back(std::max<int64_t>(0, std::min(each, dim - each * i)));
  }
  if (int64_t(parts.size()) > std::max<int64_t>(n, 1))
    bad(c.node, "split into " + std::to_string(parts.size()) + " parts for " + std::to_string(n) + " outputs");
  int64_t sum = 0;
  for (auto p : parts) {
    if (p < 0 || p > dim) bad(c.node, "split size " + std::to_string(p) + " for an axis of " + std::to_string(dim));
    sum += p;
  }
  if (sum != dim) bad(c.node, "split sizes add up to " + std::to_string(sum) + ", the axis has " + std::to_string(dim));
  std::vector<Value> out;
  int64_t at = 0;
  for (auto p : parts) {
    out.push_back(from_tensor(x.slice(int(axis), at, at + p), c.v(0).elem));
    at += p;
  }
  return out;
}

Value op_constant_of_shape(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = c.node.op_type();
  Shape s;
  for (auto d : c.ints(0)) s.push_back(d);
  c.budget(s, "the shape");
  double v = 0;
  int32_t elem = TP::FLOAT;
  if (auto* a = find_attr(n, "value")) {
    Value cv = value_from_proto(a->t(), "", "ConstantOfShape");
    elem = cv.elem;
    if (!cv.data.empty()) v = cv.data[0];
  }
  if (numel(s) <= 4096) return from_host(s, elem, std::vector<double>(size_t(numel(s)), v));
  DType d = tl_dtype(elem, op);
  return from_tensor(Tensor::full(s, v, d == DType::boolean ? DType::boolean : d, c.device), elem);
}

Value op_range(const Ctx& c) {
  const auto& n = c.node;
  double start = c.first(0), limit = c.first(1), delta = c.first(2);
  if (delta == 0) bad(n, "delta 0");
  double steps = std::ceil((limit - start) / delta);
  if (std::isnan(steps)) bad(n, "Range from " + std::to_string(start) + " to " + std::to_string(limit) + " is not finite");
  if (!(steps < double(1 << 28))) bad(n, "Range of " + std::to_string(steps) + " elements");
  int64_t count = steps > 0 ? int64_t(steps) : 0;  // (a huge negative double has no int64_t)
  c.budget({count}, "the range");
  std::vector<double> d(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) d[size_t(i)] = store_as(start + double(i) * delta, c.v(0).elem);
  return from_host({count}, c.v(0).elem, d);
}

Value op_expand(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Ints want = c.ints(1);
  for (auto d : want)
    if (d < 0) bad(n, "negative size " + std::to_string(d) + " in the shape " + shape_str(want));
  Shape s = broadcast(c.shape(0), Shape(want.begin(), want.end()), n);
  c.budget(s, "the expanded output");
  Tensor x = c.t(0);
  Shape padded(s.size() - size_t(x.ndim()), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  return same(x.reshape(padded).expand(s));
}

Value op_tile(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Ints reps = c.ints(1);
  Tensor x = c.t(0);
  if (int64_t(reps.size()) != x.ndim()) bad(n, "repeats has " + std::to_string(reps.size()) + " entries for rank " + std::to_string(x.ndim()));
  for (auto k : reps)
    if (k < 0) bad(n, "negative repeat count " + std::to_string(k));
  Shape inter, big, out;
  {
    Shape want;
    for (int i = 0; i < x.ndim(); ++i) {
      want.push_back(reps[size_t(i)]);
      want.push_back(x.dim(i));
    }
    c.budget(want, "the tiled output");
  }
  for (int i = 0; i < x.ndim(); ++i) {
    inter.push_back(1);
    inter.push_back(x.dim(i));
    big.push_back(reps[size_t(i)]);
    big.push_back(x.dim(i));
    out.push_back(reps[size_t(i)] * x.dim(i));
  }
  return same(x.reshape(inter).expand(big).reshape(out));
}

Value op_transpose(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  int64_t r = c.rank(0);
  Ints perm = attr_ints(n, "perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int> p(perm.begin(), perm.end());
  return same(c.t(0).permute(p));
}

Tensor pad_mode(const onnx::NodeProto& node, Tensor x, int axis, int64_t before, int64_t after, const std::string& mode) {
  int64_t n = x.dim(axis);
  // Edge copies the first/last entry; reflect mirrors without repeating it.
  if (mode == "edge" && n < 1) bad(node, "edge padding of an empty axis " + std::to_string(axis));
  if (mode == "reflect" && (before >= n || after >= n))
    bad(node, "reflect padding of " + std::to_string(before) + " / " + std::to_string(after) + " on axis " +
                  std::to_string(axis) + " of size " + std::to_string(n) + " (each must be smaller than the axis)");
  std::vector<Tensor> parts;
  if (mode == "edge") {
    if (before > 0) parts.push_back(x.slice(axis, 0, 1).expand([&] { Shape s = x.shape(); s[size_t(axis)] = before; return s; }()));
    parts.push_back(x);
    if (after > 0) parts.push_back(x.slice(axis, n - 1, n).expand([&] { Shape s = x.shape(); s[size_t(axis)] = after; return s; }()));
  } else {  // reflect: mirror without repeating the edge
    if (before > 0) parts.push_back(x.slice(axis, 1, before + 1).flip({axis}));
    parts.push_back(x);
    if (after > 0) parts.push_back(x.slice(axis, n - 1 - after, n - 1).flip({axis}));
  }
  return parts.size() == 1 ? x : Tensor::cat(parts, axis);
}

Value op_pad(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Ints pads;
  double value = 0;
  std::string mode = attr_s(n, "mode", "constant");
  if (c.opset < 11) {
    pads = attr_ints(n, c.opset < 2 ? "paddings" : "pads");
    value = attr_f(n, "value", 0);
  } else {
    pads = c.ints(1);
    if (c.has(2)) value = c.first(2);
  }
  Tensor x = c.t(0);
  int64_t r = x.ndim();
  Ints axes;
  if (c.opset >= 18 && c.has(3)) {
    for (auto a : c.ints(3)) axes.push_back(norm_axis(a, r, n));
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  int64_t k = int64_t(axes.size());
  if (int64_t(pads.size()) != 2 * k) bad(n, "pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(k) + " axes");
  std::vector<std::pair<int64_t, int64_t>> p(size_t(r), {0, 0});
  for (int64_t i = 0; i < k; ++i) p[size_t(axes[size_t(i)])] = {pads[size_t(i)], pads[size_t(i + k)]};
  Shape padded = x.shape();
  for (int64_t a = 0; a < r; ++a) {
    auto [b, e] = p[size_t(a)];
    int64_t& d = padded[size_t(a)];
    if (__builtin_add_overflow(d, b, &d) || __builtin_add_overflow(d, e, &d) || d < 0)
      bad(n, "pads " + std::to_string(b) + ", " + std::to_string(e) + " do not fit axis " + std::to_string(a) + " of " +
                 shape_str(x.shape()));
  }
  c.budget(padded, "the padded output");
  if (mode == "constant") return same(x.pad(p, value));
  if (mode != "edge" && mode != "reflect") unsupported(n, c.opset, "mode " + mode);
  for (int64_t a = 0; a < r; ++a) {
    auto [b, e] = p[size_t(a)];
    if (b < 0 || e < 0) unsupported(n, c.opset, "negative pads with mode " + mode);
    if (b || e) x = pad_mode(n, x, int(a), b, e, mode);
  }
  return same(x);
}

Value op_depth_to_space(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = c.node.op_type();
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  if (x.ndim() != 4) bad(n, "needs a 4-D input");
  int64_t b = attr_i(n, "blocksize", 0), N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  if (b <= 0 || b > kMaxWindowValue) bad(n, "blocksize " + std::to_string(b) + " is missing or out of range");
  if (op == "DepthToSpace") {
    if (attr_s(n, "mode", "DCR") == "DCR")
      return same(x.reshape({N, b, b, C / (b * b), H, W}).permute({0, 3, 4, 1, 5, 2}).reshape({N, C / (b * b), H * b, W * b}));
    return same(x.reshape({N, C / (b * b), b, b, H, W}).permute({0, 1, 4, 2, 5, 3}).reshape({N, C / (b * b), H * b, W * b}));
  }
  return same(x.reshape({N, C, H / b, b, W / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({N, C * b * b, H / b, W / b}));
}

Value gather_elements(const Ctx& c) {
  Tensor data = c.t(0), idx = c.t(1).cast(DType::f32);
  int64_t r = data.ndim();
  int axis = int(norm_axis(attr_i(c.node, "axis", 0), r, c.node));
  if (idx.ndim() != r) bad(c.node, "indices rank differs from data rank");
  int64_t D = data.dim(axis);
  c.budget({idx.numel(), D}, "the selection (indices x axis)");
  idx = Tensor::where(idx.lt(Tensor::scalar(0, DType::f32, idx.device())), idx + double(D), idx);
  for (int a = 0; a < r; ++a)
    if (a != axis && data.dim(a) != idx.dim(a)) data = data.slice(a, 0, idx.dim(a));
  std::vector<int> perm, back(static_cast<size_t>(r));
  for (int a = 0; a < r; ++a)
    if (a != axis) perm.push_back(a);
  perm.push_back(axis);
  for (int a = 0, j = 0; a < r; ++a) back[size_t(a)] = a == axis ? int(r - 1) : j++;
  Tensor dp = data.cast(float_type(data.dtype())).permute(perm).unsqueeze(int(r) - 1);  // (..., 1, D)
  Tensor ip = idx.permute(perm).unsqueeze(int(r));                            // (..., K, 1)
  Tensor ar = Tensor::arange(0, double(D), 1, DType::f32, data.device());     // (D)
  Tensor y = (dp * ip.eq(ar).cast(DType::f32)).sum({int(r)}).permute(back);
  int32_t elem = c.v(0).elem;
  return from_tensor(is_int_elem(elem) ? (y + y.sign() * 0.25).cast(DType::i32) : y, elem);
}

Value gather_nd(const Ctx& c) {
  Value& dv = c.v(0);
  const Shape& D = c.ranked(0, 1);
  Shape I = c.ranked(1, 1);
  Ints idx = c.ints(1);
  int64_t b = attr_i_in(c.node, "batch_dims", 0, 0, int64_t(std::min(D.size(), I.size())) - 1), L = I.back();
  if (L < 1 || b + L > int64_t(D.size()))
    bad(c.node, "index tuples of length " + std::to_string(L) + " after " + std::to_string(b) + " batch dims for data of rank " +
                    std::to_string(D.size()));
  for (int64_t i = 0; i < b; ++i)
    if (I[size_t(i)] != D[size_t(i)]) bad(c.node, "batch dims of indices " + shape_str(I) + " and data " + shape_str(D) + " differ");
  int64_t batch = 1, rows_per_batch = 1, inner = 1;
  for (int64_t i = 0; i < b; ++i) batch *= D[size_t(i)];
  for (int64_t i = b; i < b + L; ++i) rows_per_batch *= D[size_t(i)];
  for (size_t i = size_t(b + L); i < D.size(); ++i) inner *= D[i];
  int64_t tuples = numel(I) / std::max<int64_t>(L, 1), per_batch = tuples / std::max<int64_t>(batch, 1);
  Ints rows;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t row = 0;
    for (int64_t l = 0; l < L; ++l) {
      int64_t v = idx[size_t(t * L + l)], dim = D[size_t(b + l)];
      if (v < 0) v += dim;
      if (v < 0 || v >= dim) bad(c.node, "index out of range");
      row = row * dim + v;
    }
    rows.push_back((t / std::max<int64_t>(per_batch, 1)) * rows_per_batch + row);
  }
  Shape out(D.begin(), D.begin() + b);
  out.insert(out.end(), I.begin() + b, I.end() - 1);
  out.insert(out.end(), D.begin() + b + L, D.end());
  Tensor flat = c.t(0).reshape({batch * rows_per_batch, inner});
  return from_tensor(take(flat, 0, rows, c.max_elements).reshape(out), dv.elem);
}

Value trilu(const Ctx& c) {
  Tensor x = c.t(0);
  int64_t k = c.has(1) ? c.first_int(1) : 0;
  int64_t N = x.dim(-2), M = x.dim(-1);
  Tensor rows = Tensor::arange(0, double(N), 1, DType::f32, x.device()).reshape({N, 1});
  Tensor cols = Tensor::arange(0, double(M), 1, DType::f32, x.device()).reshape({1, M});
  Tensor diff = cols - rows, kk = Tensor::scalar(double(k), DType::f32, x.device());
  Tensor keep = attr_i(c.node, "upper", 1) ? diff.ge(kk) : diff.le(kk);
  Tensor y = Tensor::where(keep, x, Tensor::scalar(0, x.dtype(), x.device()));
  return from_tensor(y.cast(x.dtype()), c.v(0).elem);
}

Value one_hot(const Ctx& c) {
  Tensor idx = c.t(0).cast(DType::f32);
  int64_t depth = c.first_int(1);
  auto vals = c.h(2);
  if (vals.size() != 2) bad(c.node, "values must hold [off, on]");
  if (depth < 1) bad(c.node, "depth " + std::to_string(depth) + " must be positive");
  {
    Shape out = idx.shape();
    out.push_back(depth);
    c.budget(out, "the one-hot output");
  }
  int64_t r = idx.ndim() + 1;
  int axis = int(norm_axis(attr_i(c.node, "axis", -1), r, c.node));
  idx = Tensor::where(idx.lt(Tensor::scalar(0, DType::f32, idx.device())), idx + double(depth), idx);
  Shape s(size_t(r), 1);
  s[size_t(axis)] = depth;
  Tensor ar = Tensor::arange(0, double(depth), 1, DType::f32, idx.device()).reshape(s);
  Tensor hit = idx.unsqueeze(axis).eq(ar);
  int32_t elem = c.v(2).elem;
  DType d = tl_dtype(elem, "OneHot");
  Tensor y = Tensor::where(hit, Tensor::scalar(vals.at(1), DType::f32, idx.device()),
                           Tensor::scalar(vals.at(0), DType::f32, idx.device()));
  return from_tensor(d == DType::f32 ? y : y.cast(d), elem);
}

Value eye_like(const Ctx& c) {
  const Shape& s = c.shape(0);
  if (s.size() != 2) bad(c.node, "EyeLike needs a 2-D input");
  int64_t k = attr_i(c.node, "k", 0);
  int32_t elem = int32_t(attr_i(c.node, "dtype", c.v(0).elem));
  std::vector<double> d(size_t(numel(s)), 0.0);
  // |k| beyond the matrix leaves it all zero (and i + k cannot overflow).
  if (k > -s[0] && k < s[1])
    for (int64_t i = 0; i < s[0]; ++i)
      if (i + k >= 0 && i + k < s[1]) d[size_t(i * s[1] + i + k)] = 1;
  tl_dtype(elem, "EyeLike");
  return from_host(s, elem, d);
}

Value center_crop_pad(const Ctx& c) {
  Tensor x = c.t(0);
  Ints target = c.ints(1), axes = attr_ints(c.node, "axes");
  if (axes.empty())
    for (int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
  if (axes.size() != target.size()) bad(c.node, "shape and axes differ in length");
  for (size_t k = 0; k < axes.size(); ++k) {
    int a = int(norm_axis(axes[k], x.ndim(), c.node));
    int64_t d = x.dim(a), t = target[k];
    if (t < 0) bad(c.node, "negative target size " + std::to_string(t));
    if (d > t) {
      int64_t start = (d - t) / 2;
      x = x.slice(a, start, start + t);
    } else if (d < t) {
      std::vector<std::pair<int64_t, int64_t>> p(size_t(x.ndim()), {0, 0});
      p[size_t(a)] = {(t - d) / 2, t - d - (t - d) / 2};
      x = x.pad(p, 0);
    }
  }
  return from_tensor(x, c.v(0).elem);
}

// TopK on the host: per row along the axis, a partial sort of the positions
// by value (ties: the lower position first, as ONNX asks). Holds the input
// once, as doubles, whatever k is.
std::vector<Value> top_k_on_host(const Ctx& c, const Shape& shape, int axis, int64_t k, bool largest) {
  Shape out_shape = shape;
  out_shape[size_t(axis)] = k;
  const int32_t elem = c.v(0).elem;
  if (ShapesOnly::active()) {  // the shapes are known without the values
    Tensor v = stand_in(out_shape, DType::f32, c.device), ix = stand_in(out_shape, DType::i32, c.device);
    return {from_tensor(is_int_elem(elem) ? v.cast(DType::i32) : v, elem), from_tensor(ix, TP::INT64)};
  }
  const std::vector<double> x = c.h(0);
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[size_t(axis)], outer = n ? int64_t(x.size()) / (n * inner) : 0;
  std::vector<double> values(size_t(outer * k * inner)), indices(values.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return x[size_t((o * n + j) * inner + i)]; };
      for (int64_t j = 0; j < n; ++j) order[size_t(j)] = j;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        const double va = at(a), vb = at(b);
        return va != vb ? (largest ? va > vb : va < vb) : a < b;
      });
      for (int64_t j = 0; j < k; ++j) {
        values[size_t((o * k + j) * inner + i)] = at(order[size_t(j)]);
        indices[size_t((o * k + j) * inner + i)] = double(order[size_t(j)]);
      }
    }
  return {from_host(out_shape, elem, std::move(values)), from_host(out_shape, TP::INT64, std::move(indices))};
}

// TopK by k rounds of (max, argmax, mask the winner) on the device: for the
// small k and inputs of detection heads and tests. The rounds of a group keep
// their inputs (up to 16 copies of x) until the group is computed: a larger
// k or input goes to the host instead.
std::vector<Value> top_k(const Ctx& c) {
  Tensor x = c.t(0).cast(float_type(c.t(0).dtype()));
  int64_t k = c.opset < 10 ? attr_i(c.node, "k", 1) : c.first_int(1);
  int axis = int(norm_axis(attr_i(c.node, "axis", -1), x.ndim(), c.node));
  if (k < 1 || k > x.dim(axis))
    bad(c.node, "k = " + std::to_string(k) + " for an axis of " + std::to_string(x.dim(axis)) + " entries");
  bool largest = attr_i(c.node, "largest", 1) != 0;
  if (k > 16 || x.numel() * std::min<int64_t>(k, 16) > (int64_t(1) << 22))
    return top_k_on_host(c, x.shape(), axis, k, largest);
  if (!largest) x = -x;
  Shape s(size_t(x.ndim()), 1);
  s[size_t(axis)] = x.dim(axis);
  Tensor ar = Tensor::arange(0, double(x.dim(axis)), 1, DType::f32, x.device()).reshape(s);
  std::vector<Tensor> vals, idxs;
  Tensor work = x;
  for (int64_t i = 0; i < k; ++i) {
    Tensor m = work.max({axis}, true);
    Tensor at = work.argmax(axis, true).cast(DType::f32);
    vals.push_back(m);
    idxs.push_back(at);
    work = Tensor::where(ar.eq(at), Tensor::scalar(-3.0e38, DType::f32, x.device()), work);
    if (i % 16 == 15) {
      // Round after round would be one long lazy chain. The rounds' maxima
      // are computed with it: left lazy, each would keep its round's whole
      // `work` alive (k/16 copies of the input).
      std::vector<Tensor> now(vals.end() - 16, vals.end());
      now.insert(now.end(), idxs.end() - 16, idxs.end());
      now.push_back(work);
      bound_chains(now);
      std::copy(now.begin(), now.begin() + 16, vals.end() - 16);
      std::copy(now.begin() + 16, now.begin() + 32, idxs.end() - 16);
      work = now.back();
    }
  }
  Tensor v = k == 1 ? vals[0] : Tensor::cat(vals, axis), ix = k == 1 ? idxs[0] : Tensor::cat(idxs, axis);
  if (!largest) v = -v;
  int32_t elem = c.v(0).elem;
  return {from_tensor(is_int_elem(elem) ? v.cast(DType::i32) : v, elem), from_tensor(ix.cast(DType::i32), TP::INT64)};
}

Value non_zero(const Ctx& c) {
  auto d = c.h(0);
  const Shape& s = c.shape(0);
  // Flat positions first (8 bytes a hit), then their coordinates.
  std::vector<int64_t> hits;
  for (size_t k = 0; k < d.size(); ++k)
    if (d[k] != 0) hits.push_back(int64_t(k));
  int64_t n = int64_t(hits.size()), r = int64_t(s.size());
  c.budget({r, n}, "the indices");
  std::vector<double> out(size_t(r * n));
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = hits[size_t(j)];
    for (int64_t i = r - 1; i >= 0; --i) {
      const int64_t dim = s[size_t(i)];
      out[size_t(i * n + j)] = double(dim ? rest % dim : 0);
      rest = dim ? rest / dim : 0;
    }
  }
  return from_host({r, n}, TP::INT64, out);
}

Value compress(const Ctx& c) {
  auto cond = c.h(1);
  Tensor x = c.t(0);
  auto* a = find_attr(c.node, "axis");
  int axis = 0;
  if (a) axis = int(norm_axis(a->i(), x.ndim(), c.node));
  else x = x.reshape({x.numel()});
  Ints keep;
  for (size_t i = 0; i < cond.size() && int64_t(i) < x.dim(axis); ++i)
    if (cond[i] != 0) keep.push_back(int64_t(i));
  if (keep.empty()) unsupported(c.node, c.opset, "empty result");
  return from_tensor(take(x, axis, keep, c.max_elements), c.v(0).elem);
}

Value reverse_sequence(const Ctx& c) {
  Tensor x = c.t(0);
  Ints lens = c.ints(1);
  int bax = int(norm_axis(attr_i(c.node, "batch_axis", 1), x.ndim(), c.node));
  int tax = int(norm_axis(attr_i(c.node, "time_axis", 0), x.ndim(), c.node));
  if (bax == tax) bad(c.node, "batch_axis and time_axis are both " + std::to_string(bax));
  int64_t T = x.dim(tax);
  std::vector<Tensor> parts;
  if (int64_t(lens.size()) != x.dim(bax)) bad(c.node, "sequence_lens needs one length per batch entry");
  for (int64_t b = 0; b < x.dim(bax); ++b) {
    Tensor xb = x.slice(bax, b, b + 1);
    int64_t len = std::clamp<int64_t>(lens.at(size_t(b)), 0, T);
    Ints order;
    for (int64_t t = len - 1; t >= 0; --t) order.push_back(t);
    for (int64_t t = len; t < T; ++t) order.push_back(t);
    parts.push_back(take(xb, tax, order, c.max_elements));
  }
  return from_tensor(parts.size() == 1 ? parts[0] : Tensor::cat(parts, bax), c.v(0).elem);
}

}  // namespace

std::vector<OpDef> shape_ops() {
  using namespace types;
  const auto D = Placement::Device, H = Placement::Host;
  return {
      {"Constant", 1, kAll, H, constant_value}, {"Identity", 1, kAll, D, op_identity},
      {"Shape", 1, kAll, H, op_shape}, {"Size", 1, kAll, H, op_size},
      {"ConstantOfShape", 9, kInt, H, op_constant_of_shape}, {"Range", 11, kNumeric, H, op_range},
      {"EyeLike", 9, kAll, H, eye_like}, {"NonZero", 9, kAll, H, non_zero},
      {"Reshape", 1, kAll, D, op_reshape}, {"Flatten", 1, kAll, D, op_flatten},
      {"Squeeze", 1, kAll, D, op_squeeze}, {"Unsqueeze", 1, kAll, D, op_squeeze},
      {"Concat", 1, kAll, D, op_concat}, {"Split", 1, kAll, D, split},
      {"Gather", 1, kAll, D, gather}, {"GatherElements", 11, kAll, D, gather_elements},
      {"GatherND", 11, kAll, D, gather_nd}, {"Slice", 1, kAll, D, slice},
      {"Expand", 8, kAll, D, op_expand}, {"Tile", 1, kAll, D, op_tile},
      {"Transpose", 1, kAll, D, op_transpose}, {"Pad", 1, kAll, D, op_pad},
      {"DepthToSpace", 1, kAll, D, op_depth_to_space}, {"SpaceToDepth", 1, kAll, D, op_depth_to_space},
      {"Trilu", 14, kAll, D, trilu}, {"OneHot", 9, kNumeric, D, one_hot},
      {"CenterCropPad", 18, kAll, D, center_crop_pad}, {"TopK", 1, kNumeric, D, top_k},
      {"Compress", 9, kAll, D, compress}, {"ReverseSequence", 10, kAll, D, reverse_sequence},
  };
}

}  // namespace tl::onnx_detail
