// The ONNX op set on tl::Tensor. Each op reads its attributes with the
// defaults of the ONNX spec and the semantics of the opset the model imports
// (Softmax's flattening before 13, Squeeze/Slice/Reduce axes as attributes
// or inputs, ...).
#include "core/io/onnx_ops.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "core/io/onnx.h"
#include "core/io/onnx_shapes_only.h"

namespace tl::onnx_detail {

namespace {

using TP = onnx::TensorProto;
using Ints = std::vector<int64_t>;

// A huge finite number: -inf would have to survive every renderer's literal
// printing; nothing real gets near this.
constexpr double kMaxPoolFill = -3.0e38;

[[noreturn]] void unsupported(const onnx::NodeProto& n, int64_t opset, const std::string& why) {
  std::string dom = n.domain().empty() || n.domain() == "ai.onnx" ? "ai.onnx" : n.domain();
  std::string op = dom + "::" + n.op_type();
  throw OnnxUnsupported("unsupported ONNX op '" + op + "' (opset " + std::to_string(opset) + ")" +
                            (why.empty() ? "" : ": " + why),
                        op);
}

[[noreturn]] void bad(const onnx::NodeProto& n, const std::string& why) {
  throw ShapeError("ONNX node '" + n.name() + "' (" + n.op_type() + "): " + why);
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t attr_i(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  auto* a = find_attr(n, name);
  return a ? a->i() : def;
}
double attr_f(const onnx::NodeProto& n, const std::string& name, double def) {
  auto* a = find_attr(n, name);
  return a ? double(a->f()) : def;
}
std::string attr_s(const onnx::NodeProto& n, const std::string& name, const std::string& def) {
  auto* a = find_attr(n, name);
  return a ? a->s() : def;
}
Ints attr_ints(const onnx::NodeProto& n, const std::string& name, const Ints& def = {}) {
  auto* a = find_attr(n, name);
  if (!a) return def;
  return Ints(a->ints().begin(), a->ints().end());
}

// An axis of a tensor of rank `rank` (negative counts from the end). A rank-0
// tensor has no axis at all: every op that takes an axis needs rank >= 1.
int64_t norm_axis(int64_t axis, int64_t rank, const onnx::NodeProto& n) {
  if (rank <= 0) bad(n, "axis " + std::to_string(axis) + " given for a rank-0 (scalar) input, which has no axes");
  if (axis < -rank || axis >= rank) bad(n, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// A double read from a file as an integer; NaN (which has no integer) is 0.
int64_t clamp_i64(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return int64_t(d);
}

// ---------- checks shared by every handler ----------
// Sizes, attribute values and indices come from the file: each handler asks
// these before it indexes a shape, divides by an attribute or allocates.

using namespace run_limits;

// The integer attribute `name` within [lo, hi].
int64_t attr_i_in(const onnx::NodeProto& n, const std::string& name, int64_t def, int64_t lo, int64_t hi) {
  int64_t v = attr_i(n, name, def);
  if (v < lo || v > hi)
    bad(n, "attribute " + name + " = " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]");
  return v;
}
// Every value of the integer-list attribute `name` within [lo, hi].
Ints attr_ints_in(const onnx::NodeProto& n, const std::string& name, const Ints& def, int64_t lo, int64_t hi) {
  Ints v = attr_ints(n, name, def);
  for (auto x : v)
    if (x < lo || x > hi)
      bad(n, "attribute " + name + " holds " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
  return v;
}
// `values` (named `what`) has exactly `count` entries.
void require_count(const onnx::NodeProto& n, const Ints& values, size_t count, const std::string& what) {
  if (values.size() != count)
    bad(n, what + " has " + std::to_string(values.size()) + " entries, " + std::to_string(count) + " expected");
}

// Elements of `s`, or a ShapeError naming `what` when a dimension is negative,
// the product overflows or it exceeds `max_elements`.
int64_t checked_numel(const onnx::NodeProto& n, const Shape& s, int64_t max_elements, const std::string& what) {
  int64_t count = 1;
  for (auto d : s) {
    if (d < 0) bad(n, what + " " + shape_str(s) + " has a negative dimension");
    if (__builtin_mul_overflow(count, d, &count) || count > max_elements)
      bad(n, what + " " + shape_str(s) + " has more than " + std::to_string(max_elements) +
                 " elements, the most one value of this model may hold");
  }
  return count;
}

struct Ctx {
  const onnx::NodeProto& node;
  std::vector<Value*>& in;
  int64_t opset;
  const std::string& device;
  int64_t max_elements = INT64_MAX;  // most elements one value may hold (run_node's limit)

  bool has(size_t i) const { return i < in.size() && in[i]->present; }
  Value& v(size_t i) const {
    if (!has(i)) bad(node, "input " + std::to_string(i) + " is missing");
    return *in[i];
  }
  Tensor t(size_t i) const { return device_tensor(v(i), device); }
  std::vector<double> h(size_t i) const {
    Value& x = v(i);
    if (x.host) return x.data;
    auto f = x.tensor.dtype() == DType::f32 ? x.tensor.to_vector() : std::vector<float>();
    if (x.tensor.dtype() != DType::f32) {
      auto ints = x.tensor.to_ints();
      return std::vector<double>(ints.begin(), ints.end());
    }
    return std::vector<double>(f.begin(), f.end());
  }
  Ints ints(size_t i) const {
    auto d = h(i);
    Ints out(d.size());
    for (size_t k = 0; k < d.size(); ++k) {
      if (std::isnan(d[k])) bad(node, "input " + std::to_string(i) + " holds NaN where integers are expected");
      out[k] = clamp_i64(d[k]);
    }
    return out;
  }
  // The single number a scalar input (K, depth, axis, ratio...) holds.
  double first(size_t i) const {
    auto d = h(i);
    if (d.empty()) bad(node, "input " + std::to_string(i) + " is empty, a single number was expected");
    return d[0];
  }
  int64_t first_int(size_t i) const {
    double d = first(i);
    if (std::isnan(d)) bad(node, "input " + std::to_string(i) + " is NaN, an integer was expected");
    return clamp_i64(d);
  }
  const Shape& shape(size_t i) const { return v(i).shape; }
  int64_t rank(size_t i) const { return int64_t(v(i).shape.size()); }
  // Input i (which must be present) has a rank within [lo, hi].
  const Shape& ranked(size_t i, int64_t lo, int64_t hi = INT64_MAX) const {
    const Shape& s = shape(i);
    int64_t r = int64_t(s.size());
    if (r < lo || r > hi)
      bad(node, "input " + std::to_string(i) + " has rank " + std::to_string(r) + " (shape " + shape_str(s) +
                    "), " + (lo == hi ? std::to_string(lo) : hi == INT64_MAX ? "at least " + std::to_string(lo)
                                                                              : std::to_string(lo) + " to " + std::to_string(hi)) +
                    " expected");
    return s;
  }
  // Elements of a shape this node is about to build, bounded by the model's limit.
  int64_t budget(const Shape& s, const std::string& what) const { return checked_numel(node, s, max_elements, what); }
  // Multiply-adds of one product (MatMul, Gemm), bounded in proportion to
  // the model's element limit: large weights allow large products.
  void flops(double count, const std::string& what) const {
    const double limit = kFlopsPerElement * double(max_elements);
    if (!(count <= limit))
      bad(node, what + " would take " + std::to_string(count) + " multiply-adds, more than the " + std::to_string(limit) +
                    " one node of this model may take");
  }
  // `count` scalar steps of host work, bounded.
  void work(double count, const std::string& what) const {
    if (!(count <= double(kMaxHostWork)))
      bad(node, what + " would take " + std::to_string(count) + " steps, more than the " + std::to_string(kMaxHostWork) +
                    " a host-side op may take");
  }
  bool all_host() const {
    for (auto* x : in)
      if (x->present && (!x->host || x->data.size() > 4096)) return false;
    return true;
  }
};

Value from_tensor(Tensor t, int32_t elem) {
  Value v;
  v.elem = elem;
  v.shape = t.shape();
  v.tensor = std::move(t);
  return v;
}
Value from_host(Shape shape, int32_t elem, std::vector<double> data) {
  Value v;
  v.elem = elem;
  v.shape = std::move(shape);
  v.host = true;
  v.data = std::move(data);
  return v;
}

bool is_int_elem(int32_t e) { return !is_float_elem(e) && e != TP::BOOL; }

// Rounds a float result the way the element type stores it.
double store_as(double x, int32_t elem) {
  if (elem == TP::BOOL) return x != 0 ? 1 : 0;
  if (is_int_elem(elem)) return std::isfinite(x) ? std::trunc(x) : 0;
  if (elem == TP::FLOAT) return double(float(x));
  return x;
}

Tensor cast_to(const Tensor& t, int32_t elem) {
  DType d = tl_dtype(elem, "Cast");
  if (d == DType::boolean && t.dtype() != DType::boolean)
    return t.ne(Tensor::scalar(0, t.dtype(), t.device()));
  return t.cast(d);
}

// ---------- host helpers (shape arithmetic) ----------
Shape broadcast(const Shape& a, const Shape& b, const onnx::NodeProto& n) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) bad(n, "cannot broadcast " + shape_str(a) + " with " + shape_str(b));
    out[i] = x == 1 ? y : x;
  }
  return out;
}
// Element of `data` (shape s) at the broadcast position `idx` of shape out.
double bcast_at(const std::vector<double>& data, const Shape& s, const Shape& out, const Ints& idx) {
  int64_t off = 0, stride = 1;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    int64_t oi = idx[size_t(i + int64_t(out.size()) - int64_t(s.size()))];
    off += (s[size_t(i)] == 1 ? 0 : oi) * stride;
    stride *= s[size_t(i)];
  }
  return data[size_t(off)];
}
bool next_index(Ints& idx, const Shape& s) {
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) {
    if (++idx[size_t(i)] < s[size_t(i)]) return true;
    idx[size_t(i)] = 0;
  }
  return false;
}
Value host_binary(const Ctx& c, const std::function<double(double, double)>& f, int32_t out_elem) {
  Shape a = c.shape(0), b = c.shape(1), s = broadcast(a, b, c.node);
  c.budget(s, "the broadcast result");
  std::vector<double> out;
  out.reserve(size_t(numel(s)));
  Ints idx(s.size(), 0);
  if (numel(s) > 0) do {
      out.push_back(store_as(f(bcast_at(c.v(0).data, a, s, idx), bcast_at(c.v(1).data, b, s, idx)), out_elem));
    } while (next_index(idx, s));
  return from_host(s, out_elem, std::move(out));
}

// ---------- device helpers ----------
std::vector<int> all_axes(int64_t rank) {
  std::vector<int> v(static_cast<size_t>(rank));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Python-free slice along one axis: clamped start, count and step (may be negative).
Tensor take_range(const Tensor& x, int axis, int64_t start, int64_t count, int64_t step) {
  if (step > 0) return x.slice(axis, start, start + (count - 1) * step + 1, step);
  int64_t last = start + (count - 1) * step;
  Tensor r = x.slice(axis, last, start + 1).flip({axis});
  return -step == 1 ? r : r.slice(axis, 0, (count - 1) * -step + 1, -step);
}

Tensor erf(const Tensor& x) {
  // Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, enough for float32 tests.
  Tensor ax = x.abs();
  Tensor t = 1.0 / (ax * 0.3275911 + 1.0);
  Tensor poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return x.sign() * (1.0 - poly * (-(ax * ax)).exp());
}

Tensor floor_t(const Tensor& x) {
  // Truncation through int32 is exact for |x| < 2^31; larger floats are already integers.
  Tensor tr = x.cast(DType::i32).cast(DType::f32);
  Tensor fl = tr - x.lt(tr).cast(DType::f32);
  return Tensor::where(x.abs().lt(Tensor::scalar(2147483520.0, DType::f32, x.device())), fl, x);
}

// a / b to within float rounding: the core divides by multiplying with the
// reciprocal; one residual step recovers the correctly rounded quotient in
// nearly every case (Quantize's round-half-even is sensitive to the last bit).
Tensor divide(const Tensor& a, const Tensor& b) {
  Tensor af = a.cast(DType::f32), bf = b.cast(DType::f32), r = bf.reciprocal();
  Tensor q = af * r;
  Tensor refined = q + (af - q * bf) * r;
  // Keep the plain quotient where the residual step is meaningless (inf, nan, 0 divisors).
  Tensor z = refined - refined;
  return Tensor::where(z.eq(z), refined, q);
}

Tensor atan_t(const Tensor& x) {
  // |x| <= 1: an odd minimax polynomial (|error| < 1e-5); beyond, pi/2 - atan(1/|x|).
  Tensor ax = x.abs();
  Tensor big = ax.gt(Tensor::scalar(1, DType::f32, x.device()));
  Tensor z = Tensor::where(big, ax.reciprocal(), ax), z2 = z * z;
  Tensor p = z * (0.9998660 + z2 * (-0.3302995 + z2 * (0.1801410 + z2 * (-0.0851330 + z2 * 0.0208351))));
  return x.sign() * Tensor::where(big, M_PI_2 - p, p);
}

Tensor round_even(const Tensor& x) {
  // floor(x + 0.5), stepping back where x was exactly halfway and the result is odd.
  Tensor f = floor_t(x + 0.5);
  Tensor half = (x + 0.5).eq(f);
  Tensor odd = (f - floor_t(f * 0.5) * 2.0).eq(Tensor::scalar(1, DType::f32, x.device()));
  return f - (half.cast(DType::f32) * odd.cast(DType::f32));
}

Tensor reshape_to(const Tensor& x, const Shape& s) { return x.shape() == s ? x : x.reshape(s); }

// Brings a per-channel (C) parameter to (1, C, 1, ...) for an input of shape
// `x`, which must have a channel axis (rank >= 2) of exactly C entries.
Tensor per_channel(const onnx::NodeProto& n, const Tensor& p, const Shape& x, const std::string& what) {
  if (x.size() < 2) bad(n, "the input " + shape_str(x) + " has no channel axis (rank 2 or more needed) for the " + what);
  if (p.numel() != x[1])
    bad(n, "the " + what + " has " + std::to_string(p.numel()) + " values (shape " + shape_str(p.shape()) + ") for " +
               std::to_string(x[1]) + " channels of " + shape_str(x));
  Shape s(x.size(), 1);
  s[1] = p.numel();
  return p.reshape(s);
}

struct PoolGeometry {
  Ints kernel, strides, dilations, pad_begin, pad_end, extra_end, out;
};

// ONNX pads: [x1_begin, x2_begin, ..., x1_end, x2_end]; auto_pad SAME_* / VALID.
PoolGeometry geometry(const Ctx& c, const Shape& in_spatial, const Ints& kernel, bool ceil_mode) {
  const auto& n = c.node;
  size_t d = in_spatial.size();
  PoolGeometry g;
  g.kernel = kernel;
  g.strides = attr_ints_in(n, "strides", Ints(d, 1), 1, kMaxWindowValue);
  g.dilations = attr_ints_in(n, "dilations", Ints(d, 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(n, "pads", Ints(2 * d, 0), 0, kMaxWindowValue);
  if (g.strides.size() != d || g.dilations.size() != d || pads.size() != 2 * d || kernel.size() != d)
    bad(n, "strides/dilations/pads/kernel_shape do not match " + std::to_string(d) + " spatial dims");
  for (auto k : kernel)
    if (k < 1 || k > kMaxWindowValue)
      bad(n, "kernel_shape holds " + std::to_string(k) + ", outside [1, " + std::to_string(kMaxWindowValue) + "]");
  for (auto i : in_spatial)
    if (i > kMaxWindowValue) bad(n, "spatial size " + std::to_string(i) + " is too large");
  std::string autopad = attr_s(n, "auto_pad", "NOTSET");
  g.pad_begin.assign(pads.begin(), pads.begin() + int64_t(d));
  g.pad_end.assign(pads.begin() + int64_t(d), pads.end());
  g.out.resize(d);
  g.extra_end.assign(d, 0);
  for (size_t i = 0; i < d; ++i) {
    int64_t eff = (kernel[i] - 1) * g.dilations[i] + 1, in = in_spatial[i], s = g.strides[i];
    if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>((out - 1) * s + eff - in, 0);
      g.pad_begin[i] = autopad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
    } else if (autopad == "VALID") {
      g.pad_begin[i] = g.pad_end[i] = 0;
    } else if (autopad != "NOTSET") {
      unsupported(n, c.opset, "auto_pad " + autopad);
    }
    int64_t span = in + g.pad_begin[i] + g.pad_end[i] - eff;
    if (span < 0) bad(n, "kernel larger than the padded input");
    int64_t out = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    // A last window that would start inside the end padding is dropped (as PyTorch and ONNX's reference).
    if (ceil_mode && (out - 1) * s >= in + g.pad_begin[i]) --out;
    g.out[i] = out;
    g.extra_end[i] = std::max<int64_t>(0, (out - 1) * s + eff - (in + g.pad_begin[i] + g.pad_end[i]));
  }
  // Windows are unrolled one lazy op per tap.
  Shape padded(d), kshape(kernel.begin(), kernel.end());
  for (size_t i = 0; i < d; ++i) padded[i] = in_spatial[i] + g.pad_begin[i] + g.pad_end[i] + g.extra_end[i];
  c.budget(padded, "the padded input");
  c.budget(g.out, "the output");
  if (checked_numel(n, kshape, c.max_elements, "the kernel") > kMaxUnrolledTaps)
    unsupported(n, c.opset, "a window of " + std::to_string(numel(kshape)) + " taps (kernel_shape " + shape_str(kshape) +
                                "), more than the " + std::to_string(kMaxUnrolledTaps) + " this runtime unrolls");
  return g;
}

// Every kernel tap of x (padded already) as a (N, C, *out) strided view.
template <class F>
void for_each_tap(const Tensor& xp, const PoolGeometry& g, F f) {
  size_t d = g.kernel.size();
  Ints tap(d, 0);
  if (numel(g.kernel) == 0) return;
  do {
    Tensor v = xp;
    for (size_t i = 0; i < d; ++i) {
      int64_t start = tap[i] * g.dilations[i];
      v = v.slice(int(2 + i), start, start + (g.out[i] - 1) * g.strides[i] + 1, g.strides[i]);
    }
    f(v, tap);
  } while (next_index(tap, g.kernel));
}

// A sum (or maximum) of many lazy terms as a balanced tree, built as the
// terms arrive: a chain of thousands of ops is slow to schedule and deep
// enough to overflow the stack of a realize; a tree is log2(n) deep.
struct TreeReduce {
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::vector<std::pair<Tensor, int>> partial;  // (value, level): 2^level terms each
  void add(Tensor t) {
    int level = 0;
    while (!partial.empty() && partial.back().second == level) {
      t = op(partial.back().first, t);
      partial.pop_back();
      ++level;
    }
    partial.push_back({std::move(t), level});
  }
  Tensor result() const {
    Tensor r;
    for (auto it = partial.rbegin(); it != partial.rend(); ++it) r = r.defined() ? op(it->first, r) : it->first;
    return r;
  }
};
TreeReduce sum_tree() { return {[](const Tensor& a, const Tensor& b) { return a + b; }, {}}; }

std::vector<std::pair<int64_t, int64_t>> spatial_pads(const PoolGeometry& g, bool with_extra) {
  std::vector<std::pair<int64_t, int64_t>> p = {{0, 0}, {0, 0}};
  for (size_t i = 0; i < g.kernel.size(); ++i)
    p.push_back({g.pad_begin[i], g.pad_end[i] + (with_extra ? g.extra_end[i] : 0)});
  return p;
}

Tensor pool(const Ctx& c, bool is_max) {
  Tensor x = c.t(0);
  if (x.ndim() < 3) bad(c.node, "pooling needs (N, C, spatial...) input, got " + shape_str(x.shape()));
  Shape spatial(x.shape().begin() + 2, x.shape().end());
  Ints kernel = attr_ints(c.node, "kernel_shape");
  if (kernel.empty()) bad(c.node, "kernel_shape is required");
  bool ceil_mode = attr_i(c.node, "ceil_mode", 0) != 0;
  if (!is_max && find_attr(c.node, "dilations") && c.opset < 19) {
    // dilations on AveragePool arrived in opset 19; earlier models never set them.
  }
  PoolGeometry g = geometry(c, spatial, kernel, ceil_mode);
  if (is_max) {
    if (attr_i(c.node, "storage_order", 0) != 0) unsupported(c.node, c.opset, "storage_order 1");
    Tensor xp = x.pad(spatial_pads(g, true), kMaxPoolFill);
    TreeReduce acc{[](const Tensor& a, const Tensor& b) { return a.maximum(b); }, {}};
    for_each_tap(xp, g, [&](const Tensor& v, const Ints&) { acc.add(v); });
    return acc.result();
  }
  bool include_pad = attr_i(c.node, "count_include_pad", 0) != 0;
  Tensor xp = x.pad(spatial_pads(g, true), 0);
  TreeReduce taps = sum_tree();
  for_each_tap(xp, g, [&](const Tensor& v, const Ints&) { taps.add(v); });
  Tensor acc = taps.result();
  bool any_pad = false;
  for (size_t i = 0; i < g.kernel.size(); ++i) any_pad |= g.pad_begin[i] || g.pad_end[i] || g.extra_end[i];
  if (!any_pad) return acc * (1.0 / double(numel(g.kernel)));
  // The divisor counts the cells each window covers: real ones, plus the
  // explicit padding when count_include_pad, never the ceil_mode overhang.
  Shape ones_shape = {1, 1};
  ones_shape.insert(ones_shape.end(), spatial.begin(), spatial.end());
  Tensor ones = Tensor::ones(ones_shape, DType::f32, x.device());
  Tensor cover = include_pad ? ones.pad(spatial_pads(g, false), 1).pad(
                                   [&] {
                                     std::vector<std::pair<int64_t, int64_t>> p = {{0, 0}, {0, 0}};
                                     for (auto e : g.extra_end) p.push_back({0, e});
                                     return p;
                                   }(),
                                   0)
                             : ones.pad(spatial_pads(g, true), 0);
  TreeReduce counts = sum_tree();
  for_each_tap(cover, g, [&](const Tensor& v, const Ints&) { counts.add(v); });
  Tensor count = counts.result();
  return acc / count;
}

// Convolution of padded X (N, C, ...) with W (O, C/groups, k...) as a sum over
// the taps of one (O/g, C/g) x (C/g, positions) product per group; used for
// the ranks Tensor::conv2d does not cover. `g` gives strides, dilations, the
// kernel and the output size.
Tensor tap_sum_conv(const onnx::NodeProto& node, const Tensor& xp, const Tensor& w, const Tensor& bias, int64_t groups,
                    const PoolGeometry& g) {
  int64_t N = xp.dim(0), O = w.dim(0), Cg = w.dim(1), Og = O / groups, P = numel(g.out);
  // One lazy product per group and tap.
  if (groups * numel(g.kernel) > 16 * kMaxUnrolledTaps)
    throw OnnxUnsupported("unsupported ONNX op 'ai.onnx::" + node.op_type() + "': " + std::to_string(groups) +
                              " groups of " + std::to_string(numel(g.kernel)) + " taps, more than this runtime unrolls",
                          "ai.onnx::" + node.op_type());
  std::vector<Tensor> outs;
  for (int64_t gi = 0; gi < groups; ++gi) {
    Tensor xg = groups == 1 ? xp : xp.slice(1, gi * Cg, (gi + 1) * Cg);
    Tensor wg = groups == 1 ? w : w.slice(0, gi * Og, (gi + 1) * Og);
    Tensor wflat = wg.reshape({Og, Cg, numel(g.kernel)});
    TreeReduce acc = sum_tree();
    int64_t t = 0;
    for_each_tap(xg, g, [&](const Tensor& v, const Ints&) {
      acc.add(wflat.slice(2, t, t + 1).reshape({Og, Cg}).matmul(v.reshape({N, Cg, P})));
      ++t;
    });
    outs.push_back(acc.result());
  }
  Tensor y = groups == 1 ? outs[0] : Tensor::cat(outs, 1);
  Shape s = {N, O};
  s.insert(s.end(), g.out.begin(), g.out.end());
  y = y.reshape(s);
  if (bias.defined()) y = y + per_channel(node, bias, s, "bias");
  return y;
}

// N-d convolution as a sum over kernel taps of (O, C) x (C, positions)
// products; 2-D goes to Tensor::conv2d.
Tensor conv(const Ctx& c) {
  Tensor x = c.t(0), w = c.t(1);
  if (x.ndim() < 3 || w.ndim() != x.ndim())
    bad(c.node, "Conv needs X (N, C, ...) and W of the same rank, got " + shape_str(x.shape()) + " and " + shape_str(w.shape()));
  int64_t groups = attr_i_in(c.node, "group", 1, 1, std::max<int64_t>(x.dim(1), 1));
  if (w.dim(0) % groups) bad(c.node, "group " + std::to_string(groups) + " does not divide the " + std::to_string(w.dim(0)) + " output channels");
  Shape spatial(x.shape().begin() + 2, x.shape().end());
  Ints kernel = attr_ints(c.node, "kernel_shape", Ints(w.shape().begin() + 2, w.shape().end()));
  if (kernel != Ints(w.shape().begin() + 2, w.shape().end()))
    bad(c.node, "kernel_shape " + shape_str(kernel) + " differs from the weights' " + shape_str(w.shape()));
  PoolGeometry g = geometry(c, spatial, kernel, false);
  Tensor xp = x.pad(spatial_pads(g, false), 0);
  Tensor bias = c.has(2) ? c.t(2) : Tensor();
  if (x.dim(1) != w.dim(1) * groups)
    bad(c.node, "X has " + std::to_string(x.dim(1)) + " channels, W expects " + std::to_string(w.dim(1) * groups));
  if (groups > 1 && groups == x.dim(1) && w.dim(1) == 1 && w.dim(0) == groups) {
    // Depthwise: a multiply-add per tap over strided views, which fuses into
    // one elementwise kernel (the grouped conv2d path reduces per channel).
    // The padded input is materialised once, as the native EfficientNet does:
    // taps of a lazy pad would each recompute the producer (the previous
    // layer's batch norm and activation) behind a bounds mask.
    xp = xp.contiguous();
    Tensor wt = w.reshape({groups, numel(g.kernel)});
    Shape ws(size_t(x.ndim()), 1);
    ws[1] = groups;
    TreeReduce taps = sum_tree();
    int64_t t = 0;
    for_each_tap(xp, g, [&](const Tensor& v, const Ints&) {
      taps.add(v * wt.slice(1, t, t + 1).reshape(ws));
      ++t;
    });
    Tensor acc = taps.result();
    if (bias.defined()) acc = acc + per_channel(c.node, bias, acc.shape(), "bias");
    return acc;
  }
  if (x.ndim() == 4) {
    Conv2dOptions o;
    o.stride_h = g.strides[0];
    o.stride_w = g.strides[1];
    o.dilation_h = g.dilations[0];
    o.dilation_w = g.dilations[1];
    o.groups = groups;
    return xp.conv2d(w, bias, o);
  }
  return tap_sum_conv(c.node, xp, w, bias, groups, g);
}

Tensor softmax_like(const Ctx& c, int kind) {  // 0 softmax, 1 log-softmax, 2 hardmax
  Tensor x = c.t(0);
  int64_t r = x.ndim();
  auto apply = [&](const Tensor& t, int axis) {
    if (kind == 0) return t.softmax(axis);
    if (kind == 1) return t.log_softmax(axis);
    Tensor m = t.argmax(axis, true);
    Shape s(size_t(t.ndim()), 1);
    s[size_t(axis)] = t.dim(axis);
    Tensor idx = Tensor::arange(0, double(t.dim(axis)), 1, DType::i32, t.device()).reshape(s);
    return idx.eq(m).cast(DType::f32);
  };
  if (c.opset < 13) {
    int64_t axis = norm_axis(attr_i(c.node, "axis", 1), r, c.node);
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.dim(int(i));
    return apply(x.reshape({outer, x.numel() / std::max<int64_t>(outer, 1)}), 1).reshape(x.shape());
  }
  return apply(x, int(norm_axis(attr_i(c.node, "axis", -1), r, c.node)));
}

// Reduce* axes: attribute before the opset that moved them to an input.
std::vector<int> reduce_axes(const Ctx& c, int64_t input_from, bool* noop) {
  Ints axes;
  *noop = false;
  if (c.opset >= input_from) {
    if (c.has(1)) axes = c.ints(1);
    if (axes.empty() && attr_i(c.node, "noop_with_empty_axes", 0)) *noop = true;
  } else {
    axes = attr_ints(c.node, "axes");
  }
  std::vector<int> out;
  for (auto a : axes) out.push_back(int(norm_axis(a, c.rank(0), c.node)));
  if (out.empty()) out = all_axes(c.rank(0));
  return out;
}

Value reduce(const Ctx& c, const std::string& op) {
  bool noop = false;
  int64_t from = op == "ReduceSum" ? 13 : 18;
  std::vector<int> axes = reduce_axes(c, from, &noop);
  Tensor x = c.t(0);
  if (noop) return from_tensor(x, c.v(0).elem);
  bool keep = attr_i(c.node, "keepdims", 1) != 0;
  int32_t elem = c.v(0).elem;
  Tensor y;
  if (op == "ReduceSum") y = x.sum(axes, keep);
  else if (op == "ReduceMean") y = x.mean(axes, keep);
  else if (op == "ReduceMax") y = x.max(axes, keep);
  else if (op == "ReduceMin") y = x.min(axes, keep);
  else if (op == "ReduceSumSquare") y = (x * x).sum(axes, keep);
  else if (op == "ReduceL1") y = x.abs().sum(axes, keep);
  else if (op == "ReduceL2") y = (x.cast(DType::f32) * x.cast(DType::f32)).sum(axes, keep).sqrt();
  else if (op == "ReduceLogSum") y = x.cast(DType::f32).sum(axes, keep).log();
  else if (op == "ReduceLogSumExp") {
    Tensor xf = x.cast(DType::f32);
    Tensor m = xf.max(axes, true);
    y = (xf - m).exp().sum(axes, true).log() + m;
    if (!keep) {
      std::vector<int> sorted = axes;
      std::sort(sorted.rbegin(), sorted.rend());
      for (int a : sorted) y = y.squeeze(a);
    }
  } else if (op == "ReduceProd") {
    // Sign and magnitude separately: exp(sum(log|x|)) times the parity of negatives.
    Tensor xf = x.cast(DType::f32);
    Tensor mag = xf.abs().log().sum(axes, keep).exp();
    Tensor negs = xf.lt(Tensor::scalar(0, DType::f32, x.device())).cast(DType::f32).sum(axes, keep);
    Tensor odd = (negs - (negs * 0.5).cast(DType::i32).cast(DType::f32) * 2.0);
    Tensor zero = xf.eq(Tensor::scalar(0, DType::f32, x.device())).cast(DType::f32).max(axes, keep);
    y = mag * (1.0 - odd * 2.0) * (1.0 - zero);
  } else unsupported(c.node, c.opset, "");
  if (is_int_elem(elem) && y.dtype() == DType::f32 && op != "ReduceMean") y = y.cast(DType::i32);
  return from_tensor(is_int_elem(elem) && op == "ReduceMean" ? y.cast(DType::i32) : y, elem);
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
  Tensor moved = x.cast(DType::f32).permute(perm).matmul(oh);  // axis last, now of size K
  std::vector<int> back(static_cast<size_t>(r));
  for (int i = 0, j = 0; i < r; ++i) back[size_t(i)] = i == axis ? int(r - 1) : j++;
  Tensor y = moved.permute(back);
  return x.dtype() != DType::f32 ? (y + y.sign() * 0.25).cast(x.dtype()) : y;
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

Tensor unary_f(const Ctx& c, const std::string& op) {
  Tensor x = c.t(0);
  const auto& n = c.node;
  if (op == "Relu") return x.relu();
  if (op == "Sigmoid") return x.sigmoid();
  if (op == "Tanh") return x.tanh();
  if (op == "Exp") return x.exp();
  if (op == "Log") return x.log();
  if (op == "Sqrt") return x.sqrt();
  if (op == "Neg") return x.neg();
  if (op == "Abs") return x.abs();
  if (op == "Reciprocal") return x.reciprocal();
  if (op == "Sin") return x.sin();
  if (op == "Cos") return x.cos();
  if (op == "Tan") return x.sin() / x.cos();
  if (op == "Sign") return x.sign();
  if (op == "Erf") return erf(x);
  if (op == "Floor") return floor_t(x);
  if (op == "Ceil") return -floor_t(-x);
  if (op == "LeakyRelu") return x.leaky_relu(attr_f(n, "alpha", 0.01));
  if (op == "Elu") {
    double a = attr_f(n, "alpha", 1.0);
    return Tensor::where(x.gt(Tensor::scalar(0, DType::f32, x.device())), x, (x.exp() - 1.0) * a);
  }
  if (op == "Celu") {
    double a = attr_f(n, "alpha", 1.0);
    return x.relu() + ((x / a).exp() - 1.0).minimum(0.0) * a;
  }
  if (op == "Selu") {
    double a = attr_f(n, "alpha", 1.67326319217681884765625), g = attr_f(n, "gamma", 1.05070102214813232421875);
    return Tensor::where(x.gt(Tensor::scalar(0, DType::f32, x.device())), x * g, (x.exp() - 1.0) * (a * g));
  }
  if (op == "HardSigmoid") return (x * attr_f(n, "alpha", 0.2) + attr_f(n, "beta", 0.5)).clip(0, 1);
  if (op == "HardSwish") return x * (x * (1.0 / 6) + 0.5).clip(0, 1);
  if (op == "Softplus") {
    // log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|)
    return x.relu() + ((-x.abs()).exp() + 1.0).log();
  }
  if (op == "Softsign") return x / (x.abs() + 1.0);
  if (op == "Mish") return x * (x.relu() + ((-x.abs()).exp() + 1.0).log()).tanh();
  if (op == "ThresholdedRelu") {
    double a = attr_f(n, "alpha", 1.0);
    return x * x.gt(Tensor::scalar(a, DType::f32, x.device())).cast(DType::f32);
  }
  if (op == "Gelu") {
    if (attr_s(n, "approximate", "none") == "tanh") return x.gelu();
    return x * 0.5 * (erf(x * M_SQRT1_2) + 1.0);
  }
  if (op == "Sinh") return ((x).exp() - (-x).exp()) * 0.5;
  if (op == "Cosh") return ((x).exp() + (-x).exp()) * 0.5;
  if (op == "Asinh") {
    Tensor ax = x.abs();
    return x.sign() * (ax + (ax * ax + 1.0).sqrt()).log();
  }
  if (op == "Acosh") return (x + (x * x - 1.0).sqrt()).log();
  if (op == "Atanh") return ((x + 1.0) / (1.0 - x)).log() * 0.5;
  if (op == "Shrink") {
    double bias = attr_f(n, "bias", 0.0), lambd = attr_f(n, "lambd", 0.5);
    Tensor lo = x.lt(Tensor::scalar(-lambd, DType::f32, x.device())).cast(DType::f32);
    Tensor hi = x.gt(Tensor::scalar(lambd, DType::f32, x.device())).cast(DType::f32);
    return lo * (x + bias) + hi * (x - bias);
  }
  if (op == "Round") return round_even(x);
  if (op == "Atan") return atan_t(x);
  if (op == "Asin") return atan_t(x / (1.0 - x * x).sqrt());
  if (op == "Acos") return M_PI_2 - atan_t(x / (1.0 - x * x).sqrt());
  unsupported(n, c.opset, "");
}

Value binary(const Ctx& c, const std::string& op) {
  int32_t e0 = c.v(0).elem;
  bool ints = is_int_elem(e0);
  bool cmp = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
  bool logic = op == "And" || op == "Or" || op == "Xor";
  int32_t out_elem = cmp || logic ? int32_t(TP::BOOL) : e0;
  if (c.all_host() && c.v(0).host && c.v(1).host) {
    std::function<double(double, double)> f;
    if (op == "Add") f = [](double a, double b) { return a + b; };
    else if (op == "Sub") f = [](double a, double b) { return a - b; };
    else if (op == "Mul") f = [](double a, double b) { return a * b; };
    else if (op == "Div") f = [ints](double a, double b) { return ints ? (b == 0 ? 0 : std::trunc(a / b)) : a / b; };
    else if (op == "Pow") f = [](double a, double b) { return std::pow(a, b); };
    else if (op == "Equal") f = [](double a, double b) { return double(a == b); };
    else if (op == "Less") f = [](double a, double b) { return double(a < b); };
    else if (op == "Greater") f = [](double a, double b) { return double(a > b); };
    else if (op == "LessOrEqual") f = [](double a, double b) { return double(a <= b); };
    else if (op == "GreaterOrEqual") f = [](double a, double b) { return double(a >= b); };
    else if (op == "And") f = [](double a, double b) { return double(a != 0 && b != 0); };
    else if (op == "Or") f = [](double a, double b) { return double(a != 0 || b != 0); };
    else if (op == "Xor") f = [](double a, double b) { return double((a != 0) != (b != 0)); };
    else if (op == "Max") f = [](double a, double b) { return std::max(a, b); };
    else if (op == "Min") f = [](double a, double b) { return std::min(a, b); };
    else if (op == "Mod") f = [](double a, double b) { return b == 0 ? 0 : a - std::floor(a / b) * b; };
    if (f) return host_binary(c, f, out_elem);
  }
  Tensor a = c.t(0), b = c.t(1);
  if (cmp && (a.dtype() != DType::f32 || b.dtype() != DType::f32)) {
    // Compare integers as float32 (exact below 2^24): the core's int32 CmpLt
    // currently gets negative operands wrong (-1 < 0 is false).
    a = a.cast(DType::f32);
    b = b.cast(DType::f32);
  }
  Tensor y;
  if (op == "Add") y = a + b;
  else if (op == "Sub") y = a - b;
  else if (op == "Mul") y = a * b;
  else if (op == "Div") {
    y = divide(a, b);
    if (ints) {
      // Truncating integer division; the float quotient is nudged away from
      // zero so 9 * (1/3) does not land on 2.9999998.
      y = (y + y.sign() * 1e-5).cast(DType::i32);
    }
  } else if (op == "Pow") {
    y = a.pow(b);
    if (ints) y = (y + y.sign() * 1e-3).cast(DType::i32);
  } else if (op == "Equal") y = a.eq(b);
  else if (op == "Less") y = a.lt(b);
  else if (op == "Greater") y = a.gt(b);
  else if (op == "LessOrEqual") y = a.le(b);
  else if (op == "GreaterOrEqual") y = a.ge(b);
  else if (op == "And") y = a.cast(DType::f32).mul(b.cast(DType::f32)).ne(Tensor::scalar(0, DType::f32, a.device()));
  else if (op == "Or") y = a.cast(DType::f32).maximum(b.cast(DType::f32)).ne(Tensor::scalar(0, DType::f32, a.device()));
  else if (op == "Xor") y = a.cast(DType::f32).ne(b.cast(DType::f32));
  else if (op == "Mod") {
    if (attr_i(c.node, "fmod", 0)) {
      Tensor q = (a.cast(DType::f32) / b.cast(DType::f32));
      Tensor tq = Tensor::where(q.lt(Tensor::scalar(0, DType::f32, a.device())), -floor_t(-q), floor_t(q));
      y = a.cast(DType::f32) - tq * b.cast(DType::f32);
    } else {
      Tensor af = a.cast(DType::f32), bf = b.cast(DType::f32);
      y = af - floor_t(af / bf) * bf;
    }
    if (ints) y = (y + y.sign() * 1e-3).cast(DType::i32);
  } else unsupported(c.node, c.opset, "");
  return from_tensor(y, out_elem);
}

Value variadic(const Ctx& c, const std::string& op) {
  TreeReduce tree{[&op](const Tensor& a, const Tensor& b) {
                     return op == "Max" ? a.maximum(b) : op == "Min" ? a.minimum(b) : a + b;
                   },
                   {}};
  int count = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.has(i)) continue;
    tree.add(c.t(i));
    ++count;
  }
  Tensor acc = tree.result();
  if (!acc.defined()) bad(c.node, "no inputs");
  if (op == "Mean") acc = acc * (1.0 / count);
  // Variadic ops broadcast even with one operand shape differing.
  return from_tensor(acc, c.v(0).elem);
}

// -log p[target] per element, weighted, with ignore_index; mean divides by
// the total weight of the counted targets (ONNX and PyTorch agree on this).
Tensor nll(const Ctx& c, const Tensor& logp, const Tensor& target, const Tensor& weight) {
  const auto& n = c.node;
  int64_t C = logp.dim(1), r = logp.ndim();
  Shape cls_shape(size_t(r), 1);
  cls_shape[1] = C;
  Tensor cls = Tensor::arange(0, double(C), 1, DType::f32, logp.device()).reshape(cls_shape);
  Tensor tf = target.cast(DType::f32).unsqueeze(1);
  Tensor onehot = tf.eq(cls).cast(DType::f32);
  if (auto* a = find_attr(n, "ignore_index")) {
    Tensor keep = tf.ne(Tensor::scalar(double(a->i()), DType::f32, logp.device())).cast(DType::f32);
    onehot = onehot * keep;
  }
  Tensor wc = weight.defined() ? per_channel(n, weight, logp.shape(), "class weights") : Tensor();
  Tensor w = weight.defined() ? (onehot * wc).sum({1}) : onehot.sum({1});
  Tensor loss = -(logp * onehot * (weight.defined() ? wc : Tensor::scalar(1, DType::f32, logp.device()))).sum({1});
  std::string red = attr_s(n, "reduction", "mean");
  if (red == "none") return loss;
  if (red == "sum") return loss.sum();
  if (red == "mean") return loss.sum() / w.sum();
  unsupported(n, c.opset, "reduction " + red);
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
  Tensor dp = data.cast(DType::f32).permute(perm).unsqueeze(int(r) - 1);       // (..., 1, D)
  Tensor ip = idx.permute(perm).unsqueeze(int(r));                            // (..., K, 1)
  Tensor ar = Tensor::arange(0, double(D), 1, DType::f32, data.device());     // (D)
  Tensor y = (dp * ip.eq(ar).cast(DType::f32)).sum({int(r)}).permute(back);
  int32_t elem = c.v(0).elem;
  return from_tensor(is_int_elem(elem) ? (y + y.sign() * 0.25).cast(DType::i32) : y, elem);
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

Value cumsum(const Ctx& c) {
  Tensor x = c.t(0);
  int64_t r = x.ndim();
  int axis = int(norm_axis(c.first_int(1), r, c.node));
  bool exclusive = attr_i(c.node, "exclusive", 0) != 0, reverse = attr_i(c.node, "reverse", 0) != 0;
  int64_t D = x.dim(axis);
  c.budget({D, D}, "the prefix-sum matrix");
  // A prefix sum is a product with a triangular 0/1 matrix (D is small in practice).
  std::vector<float> tri(size_t(D * D), 0.f);
  for (int64_t i = 0; i < D; ++i)
    for (int64_t j = 0; j < D; ++j) {
      bool on = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      tri[size_t(i * D + j)] = on ? 1.f : 0.f;
    }
  Tensor T = Tensor::from_data(tri, {D, D}, x.device());
  Tensor y = x.cast(DType::f32).transpose(axis, int(r - 1)).matmul(T).transpose(axis, int(r - 1));
  int32_t elem = c.v(0).elem;
  return from_tensor(is_int_elem(elem) ? (y + y.sign() * 0.25).cast(DType::i32) : y, elem);
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

// Resize / Upsample: every mode ONNX has is separable, so each resized axis
// is one matmul with an (out, in) weight matrix built on the host from the
// coordinate transformation and the 1-D kernel (nearest, linear, cubic).
Value resize(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = n.op_type();
  Tensor x = c.t(0);
  int64_t r = x.ndim();
  std::string mode = attr_s(n, "mode", "nearest");
  std::string coord = "half_pixel", nearest_mode = "round_prefer_floor";
  std::vector<double> scales, roi;
  Ints sizes;
  Ints axes;
  if (op == "Upsample" || c.opset < 11) {
    coord = "asymmetric";
    nearest_mode = "floor";
    if (op == "Upsample" && c.opset < 9) {
      auto* a = find_attr(n, "scales");
      if (a) scales.assign(a->floats().begin(), a->floats().end());
    } else {
      scales = c.h(1);
    }
  } else {
    coord = attr_s(n, "coordinate_transformation_mode", "half_pixel");
    nearest_mode = attr_s(n, "nearest_mode", "round_prefer_floor");
    if (c.has(1)) roi = c.h(1);
    if (c.has(2)) scales = c.h(2);
    if (c.has(3)) sizes = c.ints(3);
    for (auto a : attr_ints(n, "axes")) axes.push_back(norm_axis(a, r, n));
  }
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear" && mode != "cubic") unsupported(n, c.opset, "mode " + mode);
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  std::vector<double> scale(size_t(r), 1.0), roi_start(size_t(r), 0.0), roi_end(size_t(r), 1.0);
  Shape out = x.shape();
  if (!roi.empty()) {
    if (roi.size() != 2 * axes.size()) bad(n, "roi has " + std::to_string(roi.size()) + " values");
    for (size_t k = 0; k < axes.size(); ++k) {
      roi_start[size_t(axes[k])] = roi[k];
      roi_end[size_t(axes[k])] = roi[k + axes.size()];
    }
  }
  for (auto v : scales)
    if (!(v > 0 && v <= double(kMaxWindowValue))) bad(n, "scale " + std::to_string(v) + " is not a positive finite number");
  for (auto v : sizes)
    if (v < 0 || v > kMaxWindowValue) bad(n, "size " + std::to_string(v) + " is negative or absurdly large");
  for (int64_t a = 0; a < r; ++a)
    if (x.dim(int(a)) > kMaxWindowValue) bad(n, "input dimension " + std::to_string(x.dim(int(a))) + " is too large");
  if (!sizes.empty()) {
    if (sizes.size() != axes.size()) bad(n, "sizes has " + std::to_string(sizes.size()) + " values for " + std::to_string(axes.size()) + " axes");
    std::string policy = attr_s(n, "keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) {
        out[size_t(axes[k])] = sizes[k];
        scale[size_t(axes[k])] = double(sizes[k]) / double(x.dim(int(axes[k])));
      }
    } else {
      double s = policy == "not_larger" ? 1e300 : 0;
      for (size_t k = 0; k < axes.size(); ++k) {
        double q = double(sizes[k]) / double(x.dim(int(axes[k])));
        s = policy == "not_larger" ? std::min(s, q) : std::max(s, q);
      }
      for (auto a : axes) {
        double o = std::round(s * double(x.dim(int(a))));
        if (!(o >= 0 && o <= double(kMaxWindowValue))) bad(n, "output size " + std::to_string(o) + " is out of range");
        scale[size_t(a)] = s;
        out[size_t(a)] = int64_t(o);
      }
    }
  } else {
    if (scales.size() != axes.size()) bad(n, "needs scales or sizes for every axis");
    for (size_t k = 0; k < axes.size(); ++k) {
      scale[size_t(axes[k])] = scales[k];
      double o = std::floor(double(x.dim(int(axes[k]))) * scales[k]);
      if (!(o <= double(kMaxWindowValue))) bad(n, "output size " + std::to_string(o) + " is out of range");
      out[size_t(axes[k])] = int64_t(o);
    }
  }
  c.budget(out, "the resized output");
  for (int64_t a = 0; a < r; ++a) {
    c.budget({out[size_t(a)], x.dim(int(a))}, "the interpolation matrix of axis " + std::to_string(a));
  }
  const double A = attr_f(n, "cubic_coeff_a", -0.75), extrap = attr_f(n, "extrapolation_value", 0.0);
  const bool exclude = attr_i(n, "exclude_outside", 0) != 0;
  const bool antialias = op == "Resize" && c.opset >= 18 && attr_i(n, "antialias", 0) != 0;
  Tensor y = x.cast(DType::f32);
  Tensor valid;  // tf_crop_and_resize: 1 where every coordinate fell inside
  for (int64_t a = 0; a < r; ++a) {
    int64_t I = x.dim(int(a)), O = out[size_t(a)];
    if (I == 0 && O > 0) bad(n, "axis " + std::to_string(a) + " has length 0: no values to resize to length " + std::to_string(O));
    double sc = scale[size_t(a)];
    if (O == I && sc == 1.0 && coord != "tf_crop_and_resize") continue;
    // An antialiased downscale by `sc` has about 4 / sc taps per output.
    if (antialias && sc < 1) c.work(double(O) * (4.0 / sc + 4.0), "the antialiased resize of axis " + std::to_string(a));
    std::vector<float> M(size_t(O * I), 0.f);
    std::vector<float> inside(size_t(O), 1.f);
    for (int64_t o = 0; o < O; ++o) {
      double xo = double(o), xi;
      if (coord == "half_pixel") xi = (xo + 0.5) / sc - 0.5;
      else if (coord == "pytorch_half_pixel") xi = O > 1 ? (xo + 0.5) / sc - 0.5 : 0;
      // align_corners uses the unrounded output length I * scale, as ONNX's reference does.
      else if (coord == "align_corners") xi = O == 1 ? 0 : xo * double(I - 1) / (double(I) * sc - 1);
      else if (coord == "asymmetric") xi = xo / sc;
      else if (coord == "tf_half_pixel_for_nn") xi = (xo + 0.5) / sc;
      else if (coord == "half_pixel_symmetric") {
        double adj = double(O) / (sc * double(I)), center = double(I) / 2;
        xi = center * (1 - adj) + (xo + 0.5) / sc - 0.5;
      } else if (coord == "tf_crop_and_resize") {
        double s0 = roi_start[size_t(a)], e0 = roi_end[size_t(a)];
        xi = O > 1 ? s0 * double(I - 1) + xo * (e0 - s0) * double(I - 1) / double(O - 1) : 0.5 * (s0 + e0) * double(I - 1);
        if (xi < 0 || xi > double(I - 1)) {
          inside[size_t(o)] = 0.f;
          continue;
        }
      } else unsupported(n, c.opset, "coordinate_transformation_mode " + coord);
      if (!(std::fabs(xi) < 1e15)) bad(n, "sampling coordinate " + std::to_string(xi) + " is not finite");
      std::vector<std::pair<int64_t, double>> taps;
      if (mode == "nearest") {
        double v;
        if (nearest_mode == "round_prefer_floor") v = (xi == std::floor(xi) + 0.5) ? std::floor(xi) : std::round(xi);
        else if (nearest_mode == "round_prefer_ceil") v = std::round(xi + (xi == std::floor(xi) + 0.5 ? 0.5 : 0));
        else if (nearest_mode == "floor") v = std::floor(xi);
        else if (nearest_mode == "ceil") v = std::ceil(xi);
        else unsupported(n, c.opset, "nearest_mode " + nearest_mode);
        if (nearest_mode == "round_prefer_ceil" && xi == std::floor(xi) + 0.5) v = std::floor(xi) + 1;
        taps.push_back({int64_t(v), 1.0});
      } else if (antialias && sc < 1) {
        // Downsampling with antialias: the kernel stretched by 1/scale, weights normalised.
        double f = std::floor(xi), t = xi - f, total = 0;
        int64_t start = int64_t(std::floor((mode == "linear" ? -1.0 : -2.0) / sc)) + 1;
        for (int64_t i = start; i <= 1 - start; ++i) {
          double d = std::fabs(sc * (double(i) - t)), w;
          if (mode == "linear") w = std::max(0.0, 1 - d);
          else w = d < 1 ? ((A + 2) * d - (A + 3)) * d * d + 1 : d < 2 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A : 0;
          taps.push_back({int64_t(f) + i, w});
          total += w;
        }
        for (auto& tw : taps) tw.second /= total;
      } else if (mode == "linear") {
        double f = std::floor(xi), t = xi - f;
        taps = {{int64_t(f), 1 - t}, {int64_t(f) + 1, t}};
      } else {
        double f = std::floor(xi), t = xi - f;
        auto k = [A](double d) {
          d = std::fabs(d);
          if (d <= 1) return (A + 2) * d * d * d - (A + 3) * d * d + 1;
          if (d < 2) return A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A;
          return 0.0;
        };
        for (int j = -1; j <= 2; ++j) taps.push_back({int64_t(f) + j, k(t - j)});
      }
      double total = 0;
      for (auto& [j, w] : taps) {
        if (exclude && (j < 0 || j >= I)) w = 0;
        total += w;
      }
      for (auto& [j, w] : taps) {
        int64_t jj = std::clamp<int64_t>(j, 0, I - 1);
        M[size_t(o * I + jj)] += float(exclude && total != 0 ? w / total : w);
      }
    }
    Tensor Mt = Tensor::from_data(M, {O, I}, x.device()).transpose(0, 1);  // (I, O)
    y = y.transpose(int(a), int(r - 1)).matmul(Mt).transpose(int(a), int(r - 1));
    if (coord == "tf_crop_and_resize") {
      Shape s(size_t(r), 1);
      s[size_t(a)] = O;
      Tensor m = Tensor::from_data(inside, s, x.device());
      valid = valid.defined() ? valid * m : m;
    }
  }
  if (valid.defined()) y = Tensor::where(valid.gt(Tensor::scalar(0.5, DType::f32, x.device())), y, Tensor::scalar(extrap, DType::f32, x.device()));
  int32_t elem = c.v(0).elem;
  if (is_int_elem(elem)) y = floor_t(y + 0.5).cast(DType::i32);
  return from_tensor(y, elem);
}

// Transposed convolution as a plain convolution of the stride-dilated input
// with the flipped, in/out-swapped kernel.
Value conv_transpose(const Ctx& c) {
  const auto& n = c.node;
  Tensor x = c.t(0), w = c.t(1);
  int64_t r = x.ndim(), d = r - 2;
  if (d < 1 || w.ndim() != r)
    bad(n, "ConvTranspose needs X (N, C, ...) and W of the same rank, got " + shape_str(x.shape()) + " and " + shape_str(w.shape()));
  if (x.dim(1) != w.dim(0))
    bad(n, "X has " + std::to_string(x.dim(1)) + " channels, W " + shape_str(w.shape()) + " expects " + std::to_string(w.dim(0)));
  const int64_t groups = attr_i_in(n, "group", 1, 1, std::max<int64_t>(w.dim(0), 1));
  if (w.dim(0) % groups) bad(n, "group " + std::to_string(groups) + " does not divide " + std::to_string(w.dim(0)) + " channels");
  Ints kernel = attr_ints(n, "kernel_shape", Ints(w.shape().begin() + 2, w.shape().end()));
  if (kernel != Ints(w.shape().begin() + 2, w.shape().end()))
    bad(n, "kernel_shape " + shape_str(kernel) + " differs from the weights' " + shape_str(w.shape()));
  Ints strides = attr_ints_in(n, "strides", Ints(size_t(d), 1), 1, kMaxWindowValue);
  Ints dil = attr_ints_in(n, "dilations", Ints(size_t(d), 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(n, "pads", Ints(size_t(2 * d), 0), 0, kMaxWindowValue);
  Ints outpad = attr_ints_in(n, "output_padding", Ints(size_t(d), 0), 0, kMaxWindowValue);
  Ints out_shape = attr_ints_in(n, "output_shape", {}, 0, kMaxWindowValue);
  require_count(n, strides, size_t(d), "strides");
  require_count(n, dil, size_t(d), "dilations");
  require_count(n, pads, size_t(2 * d), "pads");
  require_count(n, outpad, size_t(d), "output_padding");
  if (!out_shape.empty() && out_shape.size() < size_t(d)) require_count(n, out_shape, size_t(d), "output_shape");
  for (int64_t i = 0; i < d; ++i) {
    if (kernel[size_t(i)] < 1 || kernel[size_t(i)] > kMaxWindowValue) bad(n, "kernel size " + std::to_string(kernel[size_t(i)]));
    if (x.dim(int(2 + i)) > kMaxWindowValue) bad(n, "input size " + std::to_string(x.dim(int(2 + i))) + " is too large");
  }
  {
    Shape dilated = {x.dim(0), x.dim(1)};
    for (int64_t i = 0; i < d; ++i)
      dilated.push_back(x.dim(int(2 + i)) * strides[size_t(i)] + (kernel[size_t(i)] - 1) * dil[size_t(i)] * 2 + outpad[size_t(i)]);
    c.budget(dilated, "the stride-dilated input");
  }
  std::string autopad = attr_s(n, "auto_pad", "NOTSET");
  for (int64_t i = 0; i < d; ++i) {
    int64_t in = x.dim(int(2 + i)), eff = (kernel[size_t(i)] - 1) * dil[size_t(i)] + 1;
    int64_t full = strides[size_t(i)] * (in - 1) + outpad[size_t(i)] + eff;
    if (!out_shape.empty() || autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      int64_t target = !out_shape.empty() ? out_shape[size_t(out_shape.size() - size_t(d) + size_t(i))] : in * strides[size_t(i)];
      // Negative totals (output_shape larger than the natural size) grow the end.
      int64_t total = full - target;
      bool lower = autopad == "SAME_LOWER";
      // output_shape follows SAME_UPPER's split unless SAME_LOWER asks otherwise.
      pads[size_t(i)] = lower ? total - total / 2 : total / 2;
      pads[size_t(i + d)] = total - pads[size_t(i)];
    } else if (autopad == "VALID") {
      pads[size_t(i)] = pads[size_t(i + d)] = 0;
    }
  }
  // Zero-insert the input: (.., H, ..) -> (.., H, s) -> (.., H*s) minus the tail.
  Tensor xd = x;
  for (int64_t i = 0; i < d; ++i) {
    int64_t s = strides[size_t(i)];
    if (s == 1) continue;
    int ax = int(2 + i);
    int64_t in = xd.dim(ax);
    Tensor u = xd.unsqueeze(ax + 1);
    std::vector<std::pair<int64_t, int64_t>> p(size_t(u.ndim()), {0, 0});
    p[size_t(ax + 1)] = {0, s - 1};
    Shape merged = xd.shape();
    merged[size_t(ax)] = in * s;
    xd = u.pad(p, 0).reshape(merged).slice(ax, 0, (in - 1) * s + 1);
  }
  std::vector<std::pair<int64_t, int64_t>> p = {{0, 0}, {0, 0}};
  for (int64_t i = 0; i < d; ++i) {
    int64_t eff = (kernel[size_t(i)] - 1) * dil[size_t(i)];
    p.push_back({eff - pads[size_t(i)], eff - pads[size_t(i + d)] + outpad[size_t(i)]});
  }
  xd = xd.pad(p, 0);
  // W: (C_in, C_out/g, k...) -> (C_out, C_in/g, k...), flipped in space.
  int64_t Cin = w.dim(0), Cog = w.dim(1);
  Shape ws = {groups, Cin / groups, Cog};
  ws.insert(ws.end(), w.shape().begin() + 2, w.shape().end());
  std::vector<int> perm = {0, 2, 1};
  for (int64_t i = 0; i < d; ++i) perm.push_back(int(3 + i));
  Shape wf = {groups * Cog, Cin / groups};
  wf.insert(wf.end(), w.shape().begin() + 2, w.shape().end());
  std::vector<int> flip_axes;
  for (int64_t i = 0; i < d; ++i) flip_axes.push_back(int(2 + i));
  Tensor wt = w.reshape(ws).permute(perm).reshape(wf).flip(flip_axes);
  Tensor bias = c.has(2) ? c.t(2) : Tensor();
  if (d == 2) {
    Conv2dOptions o;
    o.dilation_h = dil[0];
    o.dilation_w = dil[1];
    o.groups = groups;
    return from_tensor(xd.conv2d(wt, bias, o), c.v(0).elem);
  }
  // 1-D and 3-D: the tap-sum convolution of Conv with unit strides.
  if (checked_numel(n, Shape(kernel.begin(), kernel.end()), c.max_elements, "the kernel") > kMaxUnrolledTaps)
    unsupported(n, c.opset, "a kernel of more than " + std::to_string(kMaxUnrolledTaps) + " taps");
  PoolGeometry g;
  g.kernel = kernel;
  g.strides = Ints(size_t(d), 1);
  g.dilations = dil;
  g.out.resize(size_t(d));
  for (int64_t i = 0; i < d; ++i) g.out[size_t(i)] = xd.dim(int(2 + i)) - (kernel[size_t(i)] - 1) * dil[size_t(i)];
  return from_tensor(tap_sum_conv(n, xd, wt, bias, groups, g), c.v(0).elem);
}

// Per-axis parameters (scale, zero point) of the quantize ops brought to x's rank.
Tensor along_axis(const onnx::NodeProto& n, const Tensor& p, const Tensor& x, int64_t axis) {
  if (p.ndim() == 0 || p.numel() == 1) return p.reshape({});
  axis = norm_axis(axis, x.ndim(), n);
  if (p.numel() != x.dim(int(axis)))
    bad(n, "a per-axis parameter of " + std::to_string(p.numel()) + " values for axis " + std::to_string(axis) + " of " +
               shape_str(x.shape()));
  Shape s(size_t(x.ndim()), 1);
  s[size_t(axis)] = p.numel();
  return p.reshape(s);
}

Tensor saturate(const Tensor& q, int32_t elem) {
  double lo = elem == TP::INT8 ? -128 : 0, hi = elem == TP::INT8 ? 127 : 255;
  if (elem == TP::INT32) { lo = -2147483648.0; hi = 2147483520.0; }
  return q.clip(lo, hi);
}

Value quantize(const Ctx& c) {
  Tensor x = c.t(0).cast(DType::f32);
  int64_t axis = attr_i(c.node, "axis", 1);
  Tensor scale = along_axis(c.node, c.t(1).cast(DType::f32), x, axis);
  int32_t elem = c.has(2) ? c.v(2).elem : int32_t(TP::UINT8);
  Tensor zp = c.has(2) ? along_axis(c.node, c.t(2).cast(DType::f32), x, axis) : Tensor::scalar(0, DType::f32, x.device());
  return from_tensor(saturate(round_even(divide(x, scale)) + zp, elem).cast(DType::i32), elem);
}

Value dequantize(const Ctx& c) {
  Tensor x = c.t(0).cast(DType::f32);
  int64_t axis = attr_i(c.node, "axis", 1);
  Tensor scale = along_axis(c.node, c.t(1).cast(DType::f32), x, axis);
  Tensor zp = c.has(2) ? along_axis(c.node, c.t(2).cast(DType::f32), x, axis) : Tensor::scalar(0, DType::f32, x.device());
  return from_tensor((x - zp) * scale, TP::FLOAT);
}

Value group_norm(const Ctx& c) {
  Tensor x = c.t(0);
  c.ranked(0, 2);
  int64_t G = attr_i(c.node, "num_groups", 0), N = x.dim(0), C = x.dim(1);
  if (G <= 0 || C % G) bad(c.node, "num_groups must divide the channels");
  double eps = attr_f(c.node, "epsilon", 1e-5);
  Tensor g = x.reshape({N, G, -1});
  Tensor cen = g - g.mean({2}, true);
  Tensor y = (cen * ((cen * cen).mean({2}, true) + eps).rsqrt()).reshape(x.shape());
  auto per_c = [&](Tensor p) {
    if (p.numel() == G && G != C) p = p.reshape({G, 1}).expand({G, C / G}).reshape({C});
    return per_channel(c.node, p, x.shape(), "scale/bias");
  };
  return from_tensor(y * per_c(c.t(1)) + per_c(c.t(2)), c.v(0).elem);
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

Value window(const Ctx& c) {
  const std::string& op = c.node.op_type();
  int64_t N = c.first_int(0);
  if (N < 0 || N > (1 << 24)) bad(c.node, "window size " + std::to_string(N));
  c.budget({N}, "the window");
  bool periodic = attr_i(c.node, "periodic", 1) != 0;
  int32_t elem = int32_t(attr_i(c.node, "output_datatype", TP::FLOAT));
  double den = periodic ? double(N) : double(N - 1);
  std::vector<double> w(static_cast<size_t>(std::max<int64_t>(N, 0)));
  for (int64_t i = 0; i < N; ++i) {
    double a = 2 * M_PI * double(i) / den;
    if (op == "HannWindow") w[size_t(i)] = 0.5 - 0.5 * std::cos(a);
    else if (op == "HammingWindow") w[size_t(i)] = 25.0 / 46 - (1 - 25.0 / 46) * std::cos(a);
    else w[size_t(i)] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    w[size_t(i)] = store_as(w[size_t(i)], elem);
  }
  return from_host({N}, elem, w);
}

// TopK by k rounds of (max, argmax, mask the winner): fine for the small k of
// detection heads and tests.
std::vector<Value> top_k(const Ctx& c) {
  Tensor x = c.t(0).cast(DType::f32);
  int64_t k = c.opset < 10 ? attr_i(c.node, "k", 1) : c.first_int(1);
  int axis = int(norm_axis(attr_i(c.node, "axis", -1), x.ndim(), c.node));
  if (k < 1 || k > x.dim(axis))
    bad(c.node, "k = " + std::to_string(k) + " for an axis of " + std::to_string(x.dim(axis)) + " entries");
  // One lazy max/argmax round per k.
  if (k > kMaxUnrolledTaps) unsupported(c.node, c.opset, "k = " + std::to_string(k) + " (more than " + std::to_string(kMaxUnrolledTaps) + ")");
  bool largest = attr_i(c.node, "largest", 1) != 0;
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
    if (i % 16 == 15) bound_chain(work);  // round after round would be one long lazy chain
  }
  Tensor v = k == 1 ? vals[0] : Tensor::cat(vals, axis), ix = k == 1 ? idxs[0] : Tensor::cat(idxs, axis);
  if (!largest) v = -v;
  int32_t elem = c.v(0).elem;
  return {from_tensor(is_int_elem(elem) ? v.cast(DType::i32) : v, elem), from_tensor(ix.cast(DType::i32), TP::INT64)};
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

// ---- host fallbacks: integer bit ops and scatters run on host copies ----
// (read back once; their results are small index tensors or one-off updates)
Value& hosted(const Ctx& c, size_t i) {
  Value& v = c.v(i);
  if (!v.host) {
    v.data = c.h(i);
    v.host = true;
  }
  return v;
}

uint64_t type_mask(int32_t elem) {
  switch (elem) {
    case TP::UINT8: case TP::INT8: return 0xffull;
    case TP::UINT16: case TP::INT16: return 0xffffull;
    case TP::UINT32: case TP::INT32: return 0xffffffffull;
    default: return ~0ull;
  }
}

double from_bits(uint64_t b, int32_t elem) {
  b &= type_mask(elem);
  switch (elem) {
    case TP::INT8: return double(int8_t(b));
    case TP::INT16: return double(int16_t(b));
    case TP::INT32: return double(int32_t(b));
    case TP::INT64: return double(int64_t(b));
    default: return double(b);
  }
}

Value bitwise(const Ctx& c) {
  const std::string& op = c.node.op_type();
  int32_t elem = c.v(0).elem;
  if (!is_int_elem(elem)) bad(c.node, "bit ops need integer inputs");
  hosted(c, 0);
  auto bits = [](double v) { return uint64_t(clamp_i64(v)); };
  if (op == "BitwiseNot") {
    std::vector<double> d = c.v(0).data;
    for (auto& x : d) x = from_bits(~bits(x), elem);
    return from_host(c.shape(0), elem, d);
  }
  hosted(c, 1);
  std::function<double(double, double)> f;
  if (op == "BitwiseAnd") f = [&](double a, double b) { return from_bits(bits(a) & bits(b), elem); };
  else if (op == "BitwiseOr") f = [&](double a, double b) { return from_bits(bits(a) | bits(b), elem); };
  else if (op == "BitwiseXor") f = [&](double a, double b) { return from_bits(bits(a) ^ bits(b), elem); };
  else {
    bool left = attr_s(c.node, "direction", "") == "LEFT";
    f = [&, left](double a, double b) {
      uint64_t sh = bits(b);
      if (sh >= 64) return 0.0;
      return from_bits(left ? bits(a) << sh : bits(a) >> sh, elem);
    };
  }
  return host_binary(c, f, elem);
}

// ScatterElements (and the old Scatter) and ScatterND with their reductions.
Value scatter(const Ctx& c) {
  const std::string& op = c.node.op_type();
  Value& data = hosted(c, 0);
  Ints idx = c.ints(1);
  Value& upd = hosted(c, 2);
  std::string red = attr_s(c.node, "reduction", "none");
  std::vector<double> out = data.data;
  auto apply = [&](double& dst, double v) {
    if (red == "none") dst = v;
    else if (red == "add") dst += v;
    else if (red == "mul") dst *= v;
    else if (red == "max") dst = std::max(dst, v);
    else if (red == "min") dst = std::min(dst, v);
    else unsupported(c.node, c.opset, "reduction " + red);
  };
  const Shape& D = data.shape;
  int64_t r = int64_t(D.size());
  const Shape& U = upd.shape;
  if (op == "ScatterND") {
    const Shape& I = c.ranked(1, 1);
    int64_t L = I.back(), inner = 1;
    if (L < 1 || L > r)
      bad(c.node, "index tuples of length " + std::to_string(L) + " for data of rank " + std::to_string(r) + " " + shape_str(D));
    Shape want(I.begin(), I.end() - 1);
    want.insert(want.end(), D.begin() + L, D.end());
    if (U != want)
      bad(c.node, "updates have shape " + shape_str(U) + ", indices " + shape_str(I) + " and data " + shape_str(D) +
                      " need " + shape_str(want));
    for (size_t i = size_t(L); i < D.size(); ++i) inner *= D[i];
    int64_t tuples = numel(I) / std::max<int64_t>(L, 1);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t row = 0;
      for (int64_t l = 0; l < L; ++l) {
        int64_t v = idx[size_t(t * L + l)], dim = D[size_t(l)];
        if (v < 0) v += dim;
        if (v < 0 || v >= dim) bad(c.node, "index out of range");
        row = row * dim + v;
      }
      for (int64_t k = 0; k < inner; ++k) apply(out[size_t(row * inner + k)], upd.data[size_t(t * inner + k)]);
    }
    return from_host(D, data.elem, out);
  }
  int64_t axis = norm_axis(attr_i(c.node, "axis", 0), r, c.node);
  const Shape& I = c.shape(1);
  if (int64_t(I.size()) != r || U != I)
    bad(c.node, "indices " + shape_str(I) + " and updates " + shape_str(U) + " must have one shape, of the data's rank " +
                    std::to_string(r));
  Ints pos(I.size(), 0);
  size_t k = 0;
  if (numel(I) > 0) do {
      int64_t off = 0;
      for (int64_t a = 0; a < r; ++a) {
        int64_t v = a == axis ? idx[k] : pos[size_t(a)];
        if (a == axis && v < 0) v += D[size_t(a)];
        if (v < 0 || v >= D[size_t(a)]) bad(c.node, "index out of range");
        off = off * D[size_t(a)] + v;
      }
      apply(out[size_t(off)], upd.data[k]);
      ++k;
    } while (next_index(pos, I));
  return from_host(D, data.elem, out);
}

// ---- recurrent layers, unrolled over the sequence ----
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
  Tensor operator()(const Tensor& x) const {
    if (name == "Sigmoid") return x.sigmoid();
    if (name == "Tanh") return x.tanh();
    if (name == "Relu") return x.relu();
    if (name == "LeakyRelu") return x.leaky_relu(alpha);
    if (name == "HardSigmoid") return (x * alpha + beta).clip(0, 1);
    if (name == "Softsign") return x / (x.abs() + 1.0);
    if (name == "Softplus") return x.relu() + ((-x.abs()).exp() + 1.0).log();
    if (name == "Affine") return x * alpha + beta;
    if (name == "ScaledTanh") return (x * beta).tanh() * alpha;
    if (name == "ThresholdedRelu") return x * x.gt(Tensor::scalar(alpha, DType::f32, x.device())).cast(DType::f32);
    if (name == "Elu") return Tensor::where(x.gt(Tensor::scalar(0, DType::f32, x.device())), x, (x.exp() - 1.0) * alpha);
    return Tensor();
  }
};

std::vector<Value> recurrent(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = n.op_type();
  const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  Tensor X = c.t(0).cast(DType::f32), W = c.t(1), R = c.t(2);
  const int64_t layout = attr_i(n, "layout", 0);
  if (layout) X = X.transpose(0, 1);  // work in (seq, batch, input)
  c.ranked(0, 3, 3);
  c.ranked(1, 3, 3);
  c.ranked(2, 3, 3);
  const int64_t S = X.dim(0), B = X.dim(1), H = attr_i(n, "hidden_size", R.dim(-1));
  if (S > 16 * kMaxUnrolledTaps) unsupported(n, c.opset, "a sequence of " + std::to_string(S) + " steps (more than " + std::to_string(16 * kMaxUnrolledTaps) + ")");
  const std::string direction = attr_s(n, "direction", "forward");
  const int dirs = direction == "bidirectional" ? 2 : 1;
  if (H != R.dim(-1) || W.dim(0) != dirs || R.dim(0) != dirs || W.dim(1) != gates * H || R.dim(1) != gates * H ||
      W.dim(2) != X.dim(2))
    bad(n, "W " + shape_str(W.shape()) + " and R " + shape_str(R.shape()) + " do not fit " + std::to_string(dirs) +
               " direction(s), hidden_size " + std::to_string(H) + " and X " + shape_str(X.shape()));
  const double clip = attr_f(n, "clip", 0);
  if (op == "LSTM" && attr_i(n, "input_forget", 0)) unsupported(n, c.opset, "input_forget 1");
  // Activations: f, g (and h for LSTM) per direction, with optional alpha/beta lists.
  std::vector<std::string> names;
  if (auto* a = find_attr(n, "activations")) names.assign(a->strings().begin(), a->strings().end());
  std::vector<float> alphas, betas;
  if (auto* a = find_attr(n, "activation_alpha")) alphas.assign(a->floats().begin(), a->floats().end());
  if (auto* a = find_attr(n, "activation_beta")) betas.assign(a->floats().begin(), a->floats().end());
  const int per_dir = op == "LSTM" ? 3 : op == "GRU" ? 2 : 1;
  std::vector<std::string> defaults = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                    : std::vector<std::string>{"Tanh"};
  std::vector<Activation> acts;
  for (int i = 0; i < per_dir * dirs; ++i) {
    Activation act;
    act.name = size_t(i) < names.size() ? names[size_t(i)] : defaults[size_t(i % per_dir)];
    // ONNX's default alpha/beta per activation, when the lists leave them out.
    act.alpha = size_t(i) < alphas.size() ? alphas[size_t(i)] : act.name == "LeakyRelu" ? 0.01 : act.name == "HardSigmoid" ? 0.2 : 1.0;
    act.beta = size_t(i) < betas.size() ? betas[size_t(i)] : act.name == "HardSigmoid" ? 0.5 : 0.0;
    if (!act(Tensor::zeros({1}, DType::f32, c.device)).defined()) unsupported(n, c.opset, "activation " + act.name);
    acts.push_back(act);
  }
  Ints lens;
  if (c.has(4)) lens = c.ints(4);
  if (c.has(4) && int64_t(lens.size()) != B)
    bad(n, "sequence_lens has " + std::to_string(lens.size()) + " entries for a batch of " + std::to_string(B));
  bool ragged = false;
  for (auto l : lens) ragged |= l != S;
  Tensor init_h = c.has(5) ? c.t(5) : Tensor(), init_c = (op == "LSTM" && c.has(6)) ? c.t(6) : Tensor();
  Tensor P = (op == "LSTM" && c.has(7)) ? c.t(7) : Tensor();
  std::vector<Tensor> ys(static_cast<size_t>(dirs)), hs(static_cast<size_t>(dirs)), cs(static_cast<size_t>(dirs));
  for (int d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    if (reverse && ragged) unsupported(n, c.opset, "sequence_lens with a reverse direction");
    Tensor Wd = W.slice(0, d, d + 1).reshape({gates * H, X.dim(2)}).transpose(0, 1);  // (input, G*H)
    Tensor Rd = R.slice(0, d, d + 1).reshape({gates * H, H});
    Tensor Wb, Rb;
    if (c.has(3)) {
      Tensor Bd = c.t(3).slice(0, d, d + 1).reshape({2 * gates * H});
      Wb = Bd.slice(0, 0, gates * H);
      Rb = Bd.slice(0, gates * H, 2 * gates * H);
    } else {
      Wb = Rb = Tensor::zeros({gates * H}, DType::f32, c.device);
    }
    Tensor h = init_h.defined() ? init_h.slice(0, d, d + 1).reshape({B, H}) : Tensor::zeros({B, H}, DType::f32, c.device);
    Tensor cell = init_c.defined() ? init_c.slice(0, d, d + 1).reshape({B, H}) : Tensor::zeros({B, H}, DType::f32, c.device);
    const Activation *f = &acts[size_t(d * per_dir)], *g = per_dir > 1 ? &acts[size_t(d * per_dir + 1)] : nullptr,
                     *hh = per_dir > 2 ? &acts[size_t(d * per_dir + 2)] : nullptr;
    auto gate = [&](const Tensor& t, int k) { return t.slice(1, k * H, (k + 1) * H); };
    auto clipped = [&](const Tensor& t) { return clip > 0 ? t.clip(-clip, clip) : t; };
    // All input projections at once: (S*B, input) @ (input, G*H).
    Tensor xw = X.reshape({S * B, X.dim(2)}).matmul(Wd).reshape({S, B, gates * H}) + Wb;
    std::vector<Tensor> steps(static_cast<size_t>(S));
    for (int64_t step = 0; step < S; ++step) {
      int64_t t = reverse ? S - 1 - step : step;
      Tensor xt = xw.slice(0, t, t + 1).reshape({B, gates * H});
      Tensor hr = h.matmul(Rd.transpose(0, 1)) + Rb;  // (B, G*H)
      Tensor hn, cn;
      if (op == "RNN") {
        hn = (*f)(clipped(xt + hr));
      } else if (op == "GRU") {
        Tensor z = (*f)(clipped(gate(xt, 0) + gate(hr, 0)));
        Tensor r = (*f)(clipped(gate(xt, 1) + gate(hr, 1)));
        Tensor cand;
        if (attr_i(n, "linear_before_reset", 0)) {
          cand = (*g)(clipped(gate(xt, 2) + r * gate(hr, 2)));
        } else {
          Tensor Rh = Rd.slice(0, 2 * H, 3 * H);  // (H, H)
          cand = (*g)(clipped(gate(xt, 2) + (r * h).matmul(Rh.transpose(0, 1)) + Rb.slice(0, 2 * H, 3 * H)));
        }
        hn = (1.0 - z) * cand + z * h;
      } else {
        Tensor pre = xt + hr;
        Tensor pi = gate(pre, 0), po = gate(pre, 1), pf = gate(pre, 2), pc = gate(pre, 3);
        if (P.defined()) {
          Tensor Pd = P.slice(0, d, d + 1).reshape({3 * H});
          pi = pi + Pd.slice(0, 0, H) * cell;
          pf = pf + Pd.slice(0, 2 * H, 3 * H) * cell;
        }
        Tensor i = (*f)(clipped(pi)), fg = (*f)(clipped(pf)), cc = (*g)(clipped(pc));
        cn = fg * cell + i * cc;
        if (P.defined()) po = po + P.slice(0, d, d + 1).reshape({3 * H}).slice(0, H, 2 * H) * cn;
        Tensor o = (*f)(clipped(po));
        hn = o * (*hh)(cn);
      }
      if (ragged) {
        // Past a sequence's end: its state stays, its output is zero.
        std::vector<float> m(static_cast<size_t>(B));
        for (int64_t b = 0; b < B; ++b) m[size_t(b)] = t < lens[size_t(b)] ? 1.f : 0.f;
        Tensor mask = Tensor::from_data(m, {B, 1}, c.device);
        hn = mask * hn + (1.0 - mask) * h;
        if (cn.defined()) cn = mask * cn + (1.0 - mask) * cell;
        steps[size_t(t)] = (mask * hn).reshape({1, 1, B, H});
      } else {
        steps[size_t(t)] = hn.reshape({1, 1, B, H});
      }
      h = hn;
      if (cn.defined()) cell = cn;
      // Each step's state feeds the next: materialise it now and then so a
      // long sequence is not one chain of thousands of lazy ops.
      if (step % 16 == 15) {
        bound_chain(h);
        if (cell.defined()) bound_chain(cell);
      }
    }
    ys[size_t(d)] = S == 1 ? steps[0] : Tensor::cat(steps, 0);  // (S, 1, B, H)
    hs[size_t(d)] = h.reshape({1, B, H});
    cs[size_t(d)] = cell.reshape({1, B, H});
  }
  Tensor Y = dirs == 1 ? ys[0] : Tensor::cat(ys, 1);
  Tensor Yh = dirs == 1 ? hs[0] : Tensor::cat(hs, 0), Yc = dirs == 1 ? cs[0] : Tensor::cat(cs, 0);
  if (layout) {
    Y = Y.permute({2, 0, 1, 3});
    Yh = Yh.transpose(0, 1);
    Yc = Yc.transpose(0, 1);
  }
  std::vector<Value> out = {from_tensor(Y, TP::FLOAT), from_tensor(Yh, TP::FLOAT)};
  if (op == "LSTM") out.push_back(from_tensor(Yc, TP::FLOAT));
  return out;
}

// ---- integer / quantized linear algebra: dequantize, compute in float32 ----
// (exact while the integer sums stay below 2^24, which holds for 8-bit data
// and the sizes quantized layers use)
Tensor zero_shifted(const Ctx& c, size_t x, size_t zp, int64_t zp_axis) {
  Tensor t = c.t(x).cast(DType::f32);
  if (!c.has(zp)) return t;
  Tensor z = c.t(zp).cast(DType::f32);
  if (z.numel() == 1) return t - z.reshape({});
  Shape s(size_t(t.ndim()), 1);
  s[size_t(norm_axis(zp_axis, t.ndim(), c.node))] = z.numel();
  return t - z.reshape(s);
}

Value conv_on(const Ctx& c, const Tensor& x, const Tensor& w, const Tensor& bias) {
  Value xv = from_tensor(x, TP::FLOAT), wv = from_tensor(w, TP::FLOAT), bv;
  std::vector<Value*> ins = {&xv, &wv};
  if (bias.defined()) {
    bv = from_tensor(bias, TP::FLOAT);
    ins.push_back(&bv);
  }
  Ctx sub{c.node, ins, c.opset, c.device, c.max_elements};
  return from_tensor(conv(sub), TP::FLOAT);
}

Value quantized_linear(const Ctx& c) {
  const std::string& op = c.node.op_type();
  if (op == "MatMulInteger") {
    // zero points: a's per row (axis 0 of a 2-D A), b's per column
    Tensor y = zero_shifted(c, 0, 2, 0).matmul(zero_shifted(c, 1, 3, -1));
    return from_tensor(y.cast(DType::i32), TP::INT32);
  }
  if (op == "ConvInteger") {
    Value y = conv_on(c, zero_shifted(c, 0, 2, 1), zero_shifted(c, 1, 3, 0), Tensor());
    return from_tensor(y.tensor.cast(DType::i32), TP::INT32);
  }
  auto scale_of = [&](size_t i, int64_t rank, int64_t axis) {
    Tensor s = c.t(i).cast(DType::f32);
    if (s.numel() == 1) return s.reshape({});
    Shape sh(size_t(rank), 1);
    sh[size_t(norm_axis(axis, rank, c.node))] = s.numel();
    return s.reshape(sh);
  };
  int32_t out_elem = c.has(7) ? c.v(7).elem : int32_t(TP::UINT8);
  Tensor y;
  if (op == "QLinearMatMul") {
    Tensor a = zero_shifted(c, 0, 2, 0) * scale_of(1, c.rank(0), 0);
    Tensor b = zero_shifted(c, 3, 5, -1) * scale_of(4, c.rank(3), -1);
    y = a.matmul(b);
  } else {  // QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B
    Tensor x = zero_shifted(c, 0, 2, 1) * scale_of(1, c.rank(0), 1);
    Tensor w = zero_shifted(c, 3, 5, 0) * scale_of(4, c.rank(3), 0);
    Tensor bias;
    if (c.has(8)) bias = c.t(8).cast(DType::f32) * (c.t(1).cast(DType::f32).reshape({}) * c.t(4).cast(DType::f32).reshape({-1}));
    y = conv_on(c, x, w, bias).tensor;
  }
  Tensor ys = c.t(6).cast(DType::f32).reshape({});
  Tensor yz = c.has(7) ? c.t(7).cast(DType::f32).reshape({}) : Tensor::scalar(0, DType::f32, c.device);
  return from_tensor(saturate(round_even(divide(y, ys)) + yz, out_elem).cast(DType::i32), out_elem);
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

// Determinants by LU with partial pivoting on the host.
Value determinant(const Ctx& c) {
  auto d = c.h(0);
  const Shape& s = c.shape(0);
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2]) bad(c.node, "Det needs square matrices, got " + shape_str(s));
  int64_t n = s.back(), count = numel(Shape(s.begin(), s.end() - 2));
  std::vector<double> out;
  for (int64_t m = 0; m < count; ++m) {
    std::vector<double> a(d.begin() + m * n * n, d.begin() + (m + 1) * n * n);
    double det = 1;
    for (int64_t k = 0; k < n; ++k) {
      int64_t piv = k;
      for (int64_t i = k + 1; i < n; ++i)
        if (std::fabs(a[size_t(i * n + k)]) > std::fabs(a[size_t(piv * n + k)])) piv = i;
      if (a[size_t(piv * n + k)] == 0) {
        det = 0;
        break;
      }
      if (piv != k) {
        for (int64_t j = 0; j < n; ++j) std::swap(a[size_t(k * n + j)], a[size_t(piv * n + j)]);
        det = -det;
      }
      det *= a[size_t(k * n + k)];
      for (int64_t i = k + 1; i < n; ++i) {
        double f = a[size_t(i * n + k)] / a[size_t(k * n + k)];
        for (int64_t j = k; j < n; ++j) a[size_t(i * n + j)] -= f * a[size_t(k * n + j)];
      }
    }
    out.push_back(store_as(det, c.v(0).elem));
  }
  return from_host(Shape(s.begin(), s.end() - 2), c.v(0).elem, out);
}

// MaxPool's second output: the flat (n, c, h, w) index of each window's
// first maximum (storage_order 0), tracked tap by tap.
std::vector<Value> max_pool_with_indices(const Ctx& c) {
  const bool column_major = attr_i(c.node, "storage_order", 0) != 0;
  Tensor x = c.t(0);
  if (x.ndim() != 4) unsupported(c.node, c.opset, "Indices output for a non-2-D pool");
  int64_t N = x.dim(0), C = x.dim(1), Hh = x.dim(2), Ww = x.dim(3);
  Shape spatial = {Hh, Ww};
  PoolGeometry g = geometry(c, spatial, attr_ints(c.node, "kernel_shape"), attr_i(c.node, "ceil_mode", 0) != 0);
  Tensor xp = x.pad(spatial_pads(g, true), kMaxPoolFill);
  std::vector<float> base(size_t(N * C));
  for (int64_t i = 0; i < N * C; ++i) base[size_t(i)] = float(i * Hh * Ww);
  Tensor plane = Tensor::from_data(base, {N, C, 1, 1}, x.device());
  Tensor best, where_at;
  for_each_tap(xp, g, [&](const Tensor& v, const Ints& tap) {
    std::vector<float> pos(size_t(g.out[0] * g.out[1]));
    for (int64_t oh = 0; oh < g.out[0]; ++oh)
      for (int64_t ow = 0; ow < g.out[1]; ++ow) {
        int64_t h = oh * g.strides[0] + tap[0] * g.dilations[0] - g.pad_begin[0];
        int64_t w = ow * g.strides[1] + tap[1] * g.dilations[1] - g.pad_begin[1];
        h = std::clamp<int64_t>(h, 0, Hh - 1);
        w = std::clamp<int64_t>(w, 0, Ww - 1);
        pos[size_t(oh * g.out[1] + ow)] = float(column_major ? w * Hh + h : h * Ww + w);
      }
    Tensor idx = Tensor::from_data(pos, {1, 1, g.out[0], g.out[1]}, x.device()) + plane;
    if (!best.defined()) {
      best = v;
      where_at = idx;
      return;
    }
    Tensor better = v.gt(best);
    best = Tensor::where(better, v, best);
    where_at = Tensor::where(better, idx, where_at);
  });
  return {from_tensor(best, c.v(0).elem), from_tensor(where_at.cast(DType::i32), TP::INT64)};
}

// NonMaxSuppression on the host: greedy per batch and class, best score first.
Value non_max_suppression(const Ctx& c) {
  auto boxes = c.h(0), scores = c.h(1);
  const Shape &bs = c.shape(0), &ss = c.shape(1);
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    bad(c.node, "boxes (B, N, 4) and scores (B, C, N) expected, got " + shape_str(bs) + " and " + shape_str(ss));
  int64_t max_out = c.has(2) ? c.first_int(2) : 0;
  double iou_t = c.has(3) ? c.first(3) : 0, score_t = c.has(4) ? c.first(4) : -INFINITY;
  bool center = attr_i(c.node, "center_point_box", 0) != 0;
  int64_t B = bs[0], N = bs[1], C = ss[1];
  auto corners = [&](int64_t b, int64_t i) {
    const double* p = &boxes[size_t((b * N + i) * 4)];
    std::array<double, 4> r;  // y1 x1 y2 x2
    if (center) r = {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    else r = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
    return r;
  };
  auto iou = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double ih = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    double iw = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    double inter = ih * iw, uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<double> out;
  int64_t count = 0;
  for (int64_t b = 0; b < B && max_out > 0; ++b)
    for (int64_t k = 0; k < C; ++k) {
      std::vector<int64_t> order;
      for (int64_t i = 0; i < N; ++i)
        if (scores[size_t((b * C + k) * N + i)] > score_t) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return scores[size_t((b * C + k) * N + x)] > scores[size_t((b * C + k) * N + y)];
      });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_out) break;
        bool ok = true;
        for (int64_t j : kept) ok = ok && iou(corners(b, i), corners(b, j)) <= iou_t;
        if (!ok) continue;
        kept.push_back(i);
        out.insert(out.end(), {double(b), double(k), double(i)});
        ++count;
      }
    }
  return from_host({count, 3}, TP::INT64, out);
}

// MaxUnpool on the host: zeros with each value put back at its flat index.
Value max_unpool(const Ctx& c) {
  auto x = c.h(0);
  Ints idx = c.ints(1);
  const Shape& xs = c.shape(0);
  // Indices address the natural unpooled shape; output_shape only pads its ends.
  Ints k = attr_ints_in(c.node, "kernel_shape", {}, 1, kMaxWindowValue);
  Ints st = attr_ints_in(c.node, "strides", Ints(k.size(), 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(c.node, "pads", Ints(2 * k.size(), 0), 0, kMaxWindowValue);
  if (k.empty() || xs.size() != k.size() + 2 || st.size() != k.size() || pads.size() != 2 * k.size())
    bad(c.node, "kernel_shape/strides/pads do not match the input rank of " + shape_str(xs));
  Shape natural = {xs[0], xs[1]};
  for (size_t i = 0; i < k.size(); ++i) {
    if (xs[2 + i] < 1 || xs[2 + i] > kMaxWindowValue) bad(c.node, "input " + shape_str(xs) + " has an empty or huge spatial axis");
    natural.push_back((xs[2 + i] - 1) * st[i] + k[i] - pads[i] - pads[i + k.size()]);
  }
  c.budget(natural, "the unpooled output");
  if (c.has(2)) {
    const Ints want = c.ints(2);
    c.budget(Shape(want.begin(), want.end()), "output_shape");
  }
  std::vector<double> y(size_t(numel(natural)), 0.0);
  for (size_t i = 0; i < x.size() && i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= int64_t(y.size())) bad(c.node, "index " + std::to_string(idx[i]) + " out of range");
    y[size_t(idx[i])] = x[i];
  }
  Value v = from_host(natural, c.v(0).elem, y);
  if (!c.has(2)) return v;
  Ints want = c.ints(2);
  if (want.size() != natural.size()) bad(c.node, "output_shape has the wrong rank");
  std::vector<std::pair<int64_t, int64_t>> p;
  for (size_t i = 0; i < want.size(); ++i) p.push_back({0, want[i] - natural[i]});
  return from_tensor(device_tensor(v, c.device).pad(p, 0), c.v(0).elem);
}

// DFT on the host (O(n^2) per signal; the signals of models and tests are short).
Value dft(const Ctx& c) {
  auto x = c.h(0);
  const Shape& S = c.shape(0);
  int64_t r = int64_t(S.size());
  if (r < 2 || (S.back() != 1 && S.back() != 2)) bad(c.node, "input must end in a dimension of 1 (real) or 2 (complex)");
  int64_t axis = attr_i(c.node, "axis", 1);
  if (axis < 0) axis += r;
  if (axis <= 0 || axis >= r - 1) bad(c.node, "axis " + std::to_string(axis) + " is not a signal axis");
  bool inverse = attr_i(c.node, "inverse", 0) != 0, onesided = attr_i(c.node, "onesided", 0) != 0;
  int64_t N = S[size_t(axis)], L = c.has(1) ? c.first_int(1) : N;
  if (L <= 0 || L > (1 << 20)) bad(c.node, "dft_length " + std::to_string(L));
  int64_t K = onesided ? L / 2 + 1 : L, cpx = S.back();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= S[size_t(i)];
  for (int64_t i = axis + 1; i < r - 1; ++i) inner *= S[size_t(i)];
  Shape out = S;
  out[size_t(axis)] = K;
  out.back() = 2;
  c.budget(out, "the DFT output");
  c.work(double(outer) * double(inner) * double(K) * double(std::min(N, L)), "the DFT");
  std::vector<double> y(size_t(numel(out)), 0.0);
  const double sign = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in)
      for (int64_t k = 0; k < K; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < std::min(N, L); ++n) {
          size_t at = size_t(((o * N + n) * inner + in) * cpx);
          double xr = x[at], xi = cpx == 2 ? x[at + 1] : 0;
          double ang = sign * 2 * M_PI * double(k * n % L) / double(L);
          re += xr * std::cos(ang) - xi * std::sin(ang);
          im += xr * std::sin(ang) + xi * std::cos(ang);
        }
        if (inverse) {
          re /= double(L);
          im /= double(L);
        }
        size_t at = size_t(((o * K + k) * inner + in) * 2);
        y[at] = re;
        y[at + 1] = im;
      }
  return from_host(out, c.v(0).elem, y);
}

// Unique on the host: values (or slices along `axis`), first indices,
// inverse indices and counts.
std::vector<Value> unique(const Ctx& c) {
  auto x = c.h(0);
  Shape S = c.shape(0);
  auto* ax = find_attr(c.node, "axis");
  int64_t axis = 0;
  if (ax) axis = norm_axis(ax->i(), int64_t(S.size()), c.node);
  else S = {int64_t(x.size())};
  int64_t outer = 1, inner = 1, D = S[size_t(axis)];
  for (int64_t i = 0; i < axis; ++i) outer *= S[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < S.size(); ++i) inner *= S[i];
  // Each slice is compared with every distinct one found so far.
  c.work(double(D) * double(D) * double(std::max<int64_t>(outer * inner, 1)), "Unique");
  auto slice_of = [&](int64_t d) {
    std::vector<double> v;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) v.push_back(x[size_t((o * D + d) * inner + i)]);
    return v;
  };
  std::vector<std::vector<double>> uniq;
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) {
    auto v = slice_of(d);
    auto it = std::find(uniq.begin(), uniq.end(), v);
    if (it == uniq.end()) {
      uniq.push_back(v);
      first.push_back(d);
      counts.push_back(0);
      it = uniq.end() - 1;
    }
    size_t u = size_t(it - uniq.begin());
    ++counts[u];
    inverse[size_t(d)] = int64_t(u);
  }
  std::vector<size_t> order(uniq.size());
  std::iota(order.begin(), order.end(), 0);
  if (attr_i(c.node, "sorted", 1)) std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return uniq[a] < uniq[b]; });
  std::vector<int64_t> rank(uniq.size());
  for (size_t k = 0; k < order.size(); ++k) rank[order[k]] = int64_t(k);
  int64_t U = int64_t(uniq.size());
  Shape ys = S;
  ys[size_t(axis)] = U;
  std::vector<double> y(size_t(numel(ys)));
  for (int64_t k = 0; k < U; ++k) {
    const auto& v = uniq[order[size_t(k)]];
    size_t j = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) y[size_t((o * U + k) * inner + i)] = v[j++];
  }
  std::vector<double> fi, inv, cnt;
  for (int64_t k = 0; k < U; ++k) {
    fi.push_back(double(first[order[size_t(k)]]));
    cnt.push_back(double(counts[order[size_t(k)]]));
  }
  for (auto u : inverse) inv.push_back(double(rank[size_t(u)]));
  return {from_host(ys, c.v(0).elem, y), from_host({U}, TP::INT64, fi), from_host({D}, TP::INT64, inv),
          from_host({U}, TP::INT64, cnt)};
}

// GridSample on the host, with PyTorch's (and ONNX's reference) rules for
// unnormalising, padding and the three modes.
Value grid_sample(const Ctx& c) {
  auto x = c.h(0), grid = c.h(1);
  const Shape &xs = c.shape(0), &gs = c.shape(1);
  if (xs.size() != 4 || gs.size() != 4 || gs[3] != 2 || gs[0] != xs[0])
    unsupported(c.node, c.opset, "only 2-D sampling: X (N, C, H, W) and grid (N, H_out, W_out, 2)");
  const bool align = attr_i(c.node, "align_corners", 0) != 0;
  const std::string mode = attr_s(c.node, "mode", "bilinear"), pad = attr_s(c.node, "padding_mode", "zeros");
  if ((mode != "bilinear" && mode != "nearest" && mode != "bicubic" && mode != "linear" && mode != "cubic") ||
      (pad != "zeros" && pad != "border" && pad != "reflection"))
    unsupported(c.node, c.opset, "mode " + mode + " / padding_mode " + pad);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], Ho = gs[1], Wo = gs[2];
  if (H < 1 || W < 1) bad(c.node, "X " + shape_str(xs) + " has an empty image");
  c.budget({N, C, Ho, Wo}, "the sampled output");
  c.work(double(N) * double(C) * double(Ho) * double(Wo) * 16, "GridSample");
  auto unnormalize = [&](double g, int64_t size) { return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2; };
  auto reflect = [](double v, double twice_low, double twice_high) {
    if (twice_low == twice_high) return 0.0;
    double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
    v = std::fabs(v - lo);
    double extra = std::fmod(v, span);
    // The parity of the number of flips, without converting a huge double to an integer.
    bool even = std::fmod(std::floor(v / span), 2.0) == 0;
    return even ? extra + lo : span - extra + lo;
  };
  auto padded = [&](double v, int64_t size) {
    if (pad == "border") return std::clamp(v, 0.0, double(size - 1));
    if (pad == "reflection") {
      v = align ? reflect(v, 0, 2.0 * double(size - 1)) : reflect(v, -1, 2.0 * double(size) - 1);
      return std::clamp(v, 0.0, double(size - 1));
    }
    return v;
  };
  // Coordinates are doubles from the grid: NaN, infinities and values beyond
  // the image read as padding, never as an integer conversion out of range.
  auto pixel = [&](int64_t n, int64_t ch, double yd, double xd) {
    if (!(yd > -1 && yd < double(H) && xd > -1 && xd < double(W))) return 0.0;  // truncation lands in [0, size)
    int64_t yy = int64_t(yd), xx = int64_t(xd);
    return x[size_t(((n * C + ch) * H + yy) * W + xx)];
  };
  auto cubic = [](double d) {
    const double A = -0.75;
    d = std::fabs(d);
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0.0;
  };
  std::vector<double> y(size_t(N * C * Ho * Wo));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        size_t g = size_t(((n * Ho + i) * Wo + j) * 2);
        double fx = unnormalize(grid[g], W), fy = unnormalize(grid[g + 1], H);
        for (int64_t ch = 0; ch < C; ++ch) {
          double v = 0;
          if (mode == "bicubic" || mode == "cubic") {
            double x0 = std::floor(fx), y0 = std::floor(fy), tx = fx - x0, ty = fy - y0;
            for (int dy = -1; dy <= 2; ++dy)
              for (int dx = -1; dx <= 2; ++dx) {
                // Each tap is padded on its own (PyTorch's get_value_bounded).
                double px = padded(x0 + dx, W), py = padded(y0 + dy, H);
                v += cubic(tx - dx) * cubic(ty - dy) * pixel(n, ch, py, px);
              }
          } else {
            double px = padded(fx, W), py = padded(fy, H);
            if (mode == "nearest") {
              v = pixel(n, ch, std::nearbyint(py), std::nearbyint(px));
            } else {
              double x0 = std::floor(px), y0 = std::floor(py), tx = px - x0, ty = py - y0;
              v = pixel(n, ch, y0, x0) * (1 - tx) * (1 - ty) + pixel(n, ch, y0, x0 + 1) * tx * (1 - ty) +
                  pixel(n, ch, y0 + 1, x0) * (1 - tx) * ty + pixel(n, ch, y0 + 1, x0 + 1) * tx * ty;
            }
          }
          y[size_t(((n * C + ch) * Ho + i) * Wo + j)] = v;
        }
      }
  return from_host({N, C, Ho, Wo}, c.v(0).elem, y);
}

// Col2Im on the host: every column of the (N, C*prod(block), L) input adds its
// block back into the image (overlaps sum).
Value col2im(const Ctx& c) {
  auto x = c.h(0);
  const Shape& xs = c.shape(0);
  Ints image = c.ints(1), block = c.ints(2);
  size_t d = image.size();
  if (xs.size() != 3 || block.size() != d || d == 0) bad(c.node, "input (N, C*prod(block), L) and matching image/block shapes expected");
  Ints dil = attr_ints_in(c.node, "dilations", Ints(d, 1), 1, kMaxWindowValue);
  Ints st = attr_ints_in(c.node, "strides", Ints(d, 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(c.node, "pads", Ints(2 * d, 0), 0, kMaxWindowValue);
  if (dil.size() != d || st.size() != d || pads.size() != 2 * d) bad(c.node, "dilations/strides/pads do not match the image rank");
  for (size_t i = 0; i < d; ++i)
    if (image[i] < 1 || image[i] > kMaxWindowValue || block[i] < 1 || block[i] > kMaxWindowValue)
      bad(c.node, "image shape " + shape_str(image) + " and block shape " + shape_str(block) + " must be positive");
  int64_t kprod = c.budget(Shape(block.begin(), block.end()), "the block");
  {
    Shape out = {xs[0], std::max<int64_t>(xs[1] / kprod, 1)};
    out.insert(out.end(), image.begin(), image.end());
    c.budget(out, "the image");
  }
  int64_t N = xs[0], C = xs[1] / std::max<int64_t>(kprod, 1), L = xs[2];
  Ints blocks(d);  // block positions per axis
  int64_t total = 1;
  for (size_t i = 0; i < d; ++i) {
    int64_t span = image[i] + pads[i] + pads[i + d] - (dil[i] * (block[i] - 1) + 1);
    if (span < 0) bad(c.node, "block larger than the padded image on axis " + std::to_string(i));
    blocks[i] = span / st[i] + 1;
    total *= blocks[i];
  }
  if (total != L || C * kprod != xs[1]) bad(c.node, "input shape " + shape_str(xs) + " does not match the image and block shapes");
  Shape out = {N, C};
  out.insert(out.end(), image.begin(), image.end());
  int64_t img = numel(Shape(image.begin(), image.end()));
  std::vector<double> y(size_t(numel(out)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      Ints k(d, 0);
      int64_t kflat = 0;
      do {
        Ints b(d, 0);
        int64_t l = 0;
        do {
          int64_t off = 0;
          bool inside = true;
          for (size_t i = 0; i < d; ++i) {
            int64_t p = b[i] * st[i] + k[i] * dil[i] - pads[i];
            inside = inside && p >= 0 && p < image[i];
            off = off * image[i] + p;
          }
          if (inside) y[size_t((n * C + ch) * img + off)] += x[size_t(((n * C + ch) * kprod + kflat) * L + l)];
          ++l;
        } while (next_index(b, Shape(blocks.begin(), blocks.end())));
        ++kflat;
      } while (next_index(k, Shape(block.begin(), block.end())));
    }
  return from_host(out, c.v(0).elem, y);
}

// RoiAlign on the host, sampling as ONNX's reference and ONNX Runtime do
// (including max mode's max over the four weighted corners).
Value roi_align(const Ctx& c) {
  auto x = c.h(0), rois = c.h(1);
  Ints bidx = c.ints(2);
  const Shape& xs = c.shape(0);
  if (xs.size() != 4 || c.shape(1).size() != 2 || c.shape(1)[1] != 4 || int64_t(bidx.size()) != c.shape(1)[0])
    bad(c.node, "X (N, C, H, W), rois (R, 4) and batch_indices (R) expected");
  const int64_t C = xs[1], H = xs[2], W = xs[3], R = c.shape(1)[0];
  if (H < 1 || W < 1) bad(c.node, "X " + shape_str(xs) + " has an empty image");
  const int64_t oh = attr_i_in(c.node, "output_height", 1, 1, kMaxWindowValue);
  const int64_t ow = attr_i_in(c.node, "output_width", 1, 1, kMaxWindowValue);
  const int64_t ratio = attr_i_in(c.node, "sampling_ratio", 0, 0, 1024);
  c.budget({R, C, oh, ow}, "the pooled output");
  const double scale = attr_f(c.node, "spatial_scale", 1.0);
  const bool half = attr_s(c.node, "coordinate_transformation_mode", c.opset >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  const bool is_max = attr_s(c.node, "mode", "avg") == "max";
  std::vector<double> y(size_t(R * C * oh * ow), 0.0);
  for (int64_t r = 0; r < R; ++r) {
    int64_t n = bidx[size_t(r)];
    if (n < 0 || n >= xs[0]) bad(c.node, "batch index " + std::to_string(n) + " out of range");
    const double off = half ? 0.5 : 0;
    double sw = rois[size_t(r * 4)] * scale - off, sh = rois[size_t(r * 4 + 1)] * scale - off;
    double rw = rois[size_t(r * 4 + 2)] * scale - off - sw, rh = rois[size_t(r * 4 + 3)] * scale - off - sh;
    if (!half) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bh = rh / double(oh), bw = rw / double(ow);
    // An adaptive grid follows the box's size, which comes from the file.
    double agh = std::ceil(rh / double(oh)), agw = std::ceil(rw / double(ow));
    if (ratio == 0 && !(agh <= 1024 && agw <= 1024 && agh > -1024 && agw > -1024))
      bad(c.node, "region " + std::to_string(r) + " is not a finite box of reasonable size");
    int64_t gh = ratio > 0 ? ratio : int64_t(agh), gw = ratio > 0 ? ratio : int64_t(agw);
    c.work(double(C) * double(oh) * double(ow) * double(std::max<int64_t>(gh, 1)) * double(std::max<int64_t>(gw, 1)) * double(R),
           "RoiAlign");
    double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < C; ++ch) {
      const double* plane = &x[size_t((n * C + ch) * H * W)];
      for (int64_t ph = 0; ph < oh; ++ph)
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0, best = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v = 0, vmax = 0;
              if (std::isfinite(yy) && std::isfinite(xx) && !(yy < -1.0 || yy > double(H) || xx < -1.0 || xx > double(W))) {
                yy = std::max(yy, 0.0);
                xx = std::max(xx, 0.0);
                int64_t yl = int64_t(yy), xl = int64_t(xx), yh, xh;
                if (yl >= H - 1) { yh = yl = H - 1; yy = double(yl); } else yh = yl + 1;
                if (xl >= W - 1) { xh = xl = W - 1; xx = double(xl); } else xh = xl + 1;
                double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                double a = hy * hx * plane[yl * W + xl], b = hy * lx * plane[yl * W + xh];
                double cc = ly * hx * plane[yh * W + xl], d = ly * lx * plane[yh * W + xh];
                v = a + b + cc + d;
                vmax = std::max(std::max(a, b), std::max(cc, d));
              }
              acc += v;
              best = first ? vmax : std::max(best, vmax);
              first = false;
            }
          y[size_t(((r * C + ch) * oh + ph) * ow + pw)] = is_max ? best : acc / count;
        }
    }
  }
  return from_host({R, C, oh, ow}, c.v(0).elem, y);
}

// STFT on the host: windowed frames, each through the DFT of frame_length.
Value stft(const Ctx& c) {
  auto x = c.h(0);
  const Shape& S = c.shape(0);
  if (S.size() != 3 || (S[2] != 1 && S[2] != 2)) bad(c.node, "signal must be (batch, length, 1 or 2)");
  int64_t step = c.first_int(1);
  std::vector<double> window;
  if (c.has(2)) window = c.h(2);
  int64_t L = c.has(3) ? c.first_int(3) : int64_t(window.size());
  if (window.empty()) window.assign(static_cast<size_t>(std::max<int64_t>(L, 0)), 1.0);
  if (L <= 0 || step <= 0 || int64_t(window.size()) != L || L > S[1]) bad(c.node, "bad frame_length / frame_step / window");
  bool onesided = attr_i(c.node, "onesided", 1) != 0;
  int64_t B = S[0], N = S[1], cpx = S[2], frames = (N - L) / step + 1, K = onesided ? L / 2 + 1 : L;
  c.budget({B, frames, K, 2}, "the STFT output");
  c.work(double(B) * double(frames) * double(K) * double(L), "the STFT");
  std::vector<double> y(size_t(B * frames * K * 2), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < K; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < L; ++n) {
          size_t at = size_t((b * N + f * step + n) * cpx);
          double xr = x[at] * window[size_t(n)], xi = cpx == 2 ? x[at + 1] * window[size_t(n)] : 0;
          double ang = -2 * M_PI * double(k * n % L) / double(L);
          re += xr * std::cos(ang) - xi * std::sin(ang);
          im += xr * std::sin(ang) + xi * std::cos(ang);
        }
        size_t at = size_t(((b * frames + f) * K + k) * 2);
        y[at] = re;
        y[at + 1] = im;
      }
  return from_host({B, frames, K, 2}, c.v(0).elem, y);
}

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

Value run_single(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = n.op_type();
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };

  static const std::set<std::string> unary = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs",
                                              "Reciprocal", "Sin", "Cos", "Tan", "Sign", "Erf", "Floor", "Ceil",
                                              "LeakyRelu", "Elu", "Celu", "Selu", "HardSigmoid", "HardSwish",
                                              "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Gelu", "Round",
                                              "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Shrink", "Atan", "Asin", "Acos"};
  if (unary.count(op)) {
    Value& x = c.v(0);
    if (is_int_elem(x.elem) && (op == "Neg" || op == "Abs" || op == "Sign" || op == "Relu")) {
      Tensor t = c.t(0);
      Tensor y = op == "Neg" ? t.neg() : op == "Abs" ? t.abs() : op == "Relu" ? t.relu() : t.sign();
      return same(y.cast(DType::i32));
    }
    return same(unary_f(c, op));
  }
  static const std::set<std::string> binaries = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater",
                                                 "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod"};
  if (binaries.count(op)) return binary(c, op);
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    if (c.in.size() == 2 && c.all_host()) return binary(c, op);
    return variadic(c, op);
  }
  if (op == "Not") {
    if (c.v(0).host) {
      auto d = c.v(0).data;
      for (auto& x : d) x = x == 0;
      return from_host(c.shape(0), TP::BOOL, d);
    }
    return from_tensor(c.t(0).cast(DType::f32).eq(Tensor::scalar(0, DType::f32, c.device)), TP::BOOL);
  }
  if (op == "Identity" || op == "Dropout") {
    return c.v(0);
  }
  if (op == "Constant") return constant_value(c);
  if (op == "Shape") {
    const Shape& s = c.shape(0);
    int64_t r = int64_t(s.size());
    int64_t start = attr_i(n, "start", 0), end = attr_i(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    return from_host({end - start}, TP::INT64, std::vector<double>(s.begin() + start, s.begin() + end));
  }
  if (op == "Size") return from_host({}, TP::INT64, {double(numel(c.shape(0)))});
  if (op == "Cast" || op == "CastLike") {
    int32_t to = op == "Cast" ? int32_t(attr_i(n, "to", TP::FLOAT)) : c.v(1).elem;
    tl_dtype(to, op);
    Value& x = c.v(0);
    if (x.host) {
      auto d = x.data;
      for (auto& e : d) e = store_as(e, to);
      return from_host(x.shape, to, d);
    }
    return from_tensor(cast_to(c.t(0), to), to);
  }
  if (op == "Reshape") {
    Ints target = c.opset < 5 ? attr_ints(n, "shape") : c.ints(1);
    return reshaped(c, reshape_target(c, c.shape(0), target, attr_i(n, "allowzero", 0) != 0));
  }
  if (op == "Flatten") {
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
  if (op == "Squeeze" || op == "Unsqueeze") {
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
  if (op == "Concat") {
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
      total[size_t(axis)] += si[size_t(axis)];
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
  if (op == "Gather") return gather(c);
  if (op == "Slice") return slice(c);
  if (op == "ConstantOfShape") {
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
  if (op == "Range") {
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
  if (op == "Where") {
    Tensor y = Tensor::where(c.t(0), c.t(1), c.t(2));
    int32_t elem = c.v(1).elem;
    if (is_int_elem(elem)) y = y.cast(DType::i32);
    return from_tensor(y, elem);
  }
  if (op == "Expand") {
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
  if (op == "Tile") {
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
  if (op == "Transpose") {
    int64_t r = c.rank(0);
    Ints perm = attr_ints(n, "perm");
    if (perm.empty())
      for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
    std::vector<int> p(perm.begin(), perm.end());
    return same(c.t(0).permute(p));
  }
  if (op == "MatMul") {
    Tensor y = c.t(0).matmul(c.t(1));
    c.flops(double(y.numel()) * double(c.shape(0).empty() ? 1 : c.shape(0).back()), "the product");
    return same(is_int_elem(c.v(0).elem) ? y.cast(DType::i32) : y);
  }
  if (op == "Gemm") {
    Tensor a = c.t(0), b = c.t(1);
    if (attr_i(n, "transA", 0)) a = a.transpose(0, 1);
    if (attr_i(n, "transB", 0)) b = b.transpose(0, 1);
    Tensor y = a.matmul(b);
    c.flops(double(y.numel()) * double(a.dim(-1)), "the product");
    double alpha = attr_f(n, "alpha", 1.0), beta = attr_f(n, "beta", 1.0);
    if (alpha != 1.0) y = y * alpha;
    if (c.has(2)) y = y + (beta == 1.0 ? c.t(2) : c.t(2) * beta);
    return same(y);
  }
  if (op == "Conv") return same(conv(c));
  if (op == "MaxPool") {
    if (n.output_size() > 1 && !n.output(1).empty()) unsupported(n, c.opset, "MaxPool's Indices output");
    return same(pool(c, true));
  }
  if (op == "AveragePool") return same(pool(c, false));
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    Tensor x = c.t(0);
    std::vector<int> axes;
    for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
    return same(op == "GlobalAveragePool" ? x.mean(axes, true) : x.max(axes, true));
  }
  if (op == "BatchNormalization") {
    Tensor x = c.t(0);
    double eps = attr_f(n, "epsilon", 1e-5);
    Tensor inv = (c.t(4) + eps).rsqrt() * c.t(1);
    const Shape& xs = x.shape();
    return same((x - per_channel(n, c.t(3), xs, "mean")) * per_channel(n, inv, xs, "scale") + per_channel(n, c.t(2), xs, "bias"));
  }
  if (op == "InstanceNormalization") {
    Tensor x = c.t(0);
    std::vector<int> axes;
    for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
    double eps = attr_f(n, "epsilon", 1e-5);
    Tensor mean = x.mean(axes, true), cen = x - mean;
    Tensor var = (cen * cen).mean(axes, true);
    return same(cen * (var + eps).rsqrt() * per_channel(n, c.t(1), x.shape(), "scale") + per_channel(n, c.t(2), x.shape(), "bias"));
  }
  if (op == "MeanVarianceNormalization") {
    Tensor x = c.t(0);
    Ints ax = attr_ints(n, "axes", {0, 2, 3});
    std::vector<int> axes;
    for (auto a : ax) axes.push_back(int(norm_axis(a, x.ndim(), n)));
    Tensor cen = x - x.mean(axes, true);
    return same(cen * ((cen * cen).mean(axes, true) + 1e-9).rsqrt());
  }
  if (op == "LpNormalization") {
    Tensor x = c.t(0);
    int axis = int(norm_axis(attr_i(n, "axis", -1), x.ndim(), n));
    int64_t p = attr_i(n, "p", 2);
    Tensor norm = p == 1 ? x.abs().sum({axis}, true) : (x * x).sum({axis}, true).sqrt();
    return same(x / norm);
  }
  if (op == "LRN") {
    Tensor x = c.t(0);
    c.ranked(0, 2);
    int64_t size = attr_i(n, "size", 0);
    if (size <= 0) bad(n, "size is required");
    if (size > kMaxUnrolledTaps) unsupported(n, c.opset, "size " + std::to_string(size) + " (more than " + std::to_string(kMaxUnrolledTaps) + ")");
    double alpha = attr_f(n, "alpha", 1e-4), beta = attr_f(n, "beta", 0.75), bias = attr_f(n, "bias", 1.0);
    std::vector<std::pair<int64_t, int64_t>> p(size_t(x.ndim()), {0, 0});
    p[1] = {(size - 1) / 2, size - 1 - (size - 1) / 2};
    Tensor sq = (x * x).pad(p, 0);
    TreeReduce window = sum_tree();
    for (int64_t k = 0; k < size; ++k) window.add(sq.slice(1, k, k + x.dim(1)));
    Tensor acc = window.result();
    return same(x / (acc * (alpha / double(size)) + bias).pow(beta));
  }
  if (op == "Softmax") return same(softmax_like(c, 0));
  if (op == "LogSoftmax") return same(softmax_like(c, 1));
  if (op == "Hardmax") return same(softmax_like(c, 2));
  if (op == "Clip") {
    Tensor x = c.t(0);
    bool ints = is_int_elem(c.v(0).elem);
    if (c.opset < 11) {
      return same(x.clip(attr_f(n, "min", -FLT_MAX), attr_f(n, "max", FLT_MAX)));
    }
    if (c.has(1)) x = x.maximum(c.t(1));
    if (c.has(2)) x = x.minimum(c.t(2));
    return same(ints ? x.cast(DType::i32) : x);
  }
  if (op == "PRelu") {
    Tensor x = c.t(0), slope = c.t(1);
    // Opset 6 and PyTorch's per-channel slopes: a (C) slope means channel 1.
    if (slope.ndim() == 1 && x.ndim() >= 3 && slope.numel() == x.dim(1) && slope.numel() > 1 &&
        (c.opset < 7 || x.dim(-1) != slope.numel()))
      slope = per_channel(n, slope, x.shape(), "slope");
    return same(Tensor::where(x.lt(Tensor::scalar(0, DType::f32, x.device())), x * slope, x));
  }
  if (op == "Pad") {
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
  if (op.rfind("Reduce", 0) == 0) return reduce(c, op);
  if (op == "ArgMax" || op == "ArgMin") {
    Tensor x = c.t(0).cast(DType::f32);
    if (op == "ArgMin") x = -x;
    int axis = int(norm_axis(attr_i(n, "axis", 0), x.ndim(), n));
    bool keep = attr_i(n, "keepdims", 1) != 0;
    Tensor y;
    if (attr_i(n, "select_last_index", 0)) {
      y = (double(x.dim(axis) - 1) - x.flip({axis}).argmax(axis, keep).cast(DType::f32)).cast(DType::i32);
    } else {
      y = x.argmax(axis, keep);
    }
    return from_tensor(y, TP::INT64);
  }
  if (op == "LayerNormalization") {
    Tensor x = c.t(0);
    int64_t axis = norm_axis(attr_i(n, "axis", -1), x.ndim(), n);
    std::vector<int> axes;
    for (int64_t i = axis; i < x.ndim(); ++i) axes.push_back(int(i));
    double eps = attr_f(n, "epsilon", 1e-5);
    Tensor mean = x.mean(axes, true), cen = x - mean;
    Tensor inv = ((cen * cen).mean(axes, true) + eps).rsqrt();
    Tensor y = cen * inv * c.t(1);
    if (c.has(2)) y = y + c.t(2);
    return same(y);  // Mean / InvStdDev outputs are filled by run_node
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
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
  if (op == "NegativeLogLikelihoodLoss")
    return same(nll(c, c.t(0).cast(DType::f32), c.t(1), c.has(2) ? c.t(2) : Tensor()));
  if (op == "SoftmaxCrossEntropyLoss")
    return same(nll(c, c.t(0).cast(DType::f32).log_softmax(1), c.t(1), c.has(2) ? c.t(2) : Tensor()));
  if (op == "GatherElements") return gather_elements(c);
  if (op == "MatMulInteger" || op == "ConvInteger" || op == "QLinearMatMul" || op == "QLinearConv")
    return quantized_linear(c);
  if (op == "ReverseSequence") return reverse_sequence(c);
  if (op == "Det") return determinant(c);
  if (op == "NonMaxSuppression") return non_max_suppression(c);
  if (op == "MaxUnpool") return max_unpool(c);
  if (op == "DFT") return dft(c);
  if (op == "GridSample") return grid_sample(c);
  if (op == "Col2Im") return col2im(c);
  if (op == "RoiAlign") return roi_align(c);
  if (op == "STFT") return stft(c);
  if (op == "BitwiseAnd" || op == "BitwiseOr" || op == "BitwiseXor" || op == "BitwiseNot" || op == "BitShift")
    return bitwise(c);
  if (op == "ScatterElements" || op == "Scatter" || op == "ScatterND") return scatter(c);
  if (op == "QuantizeLinear") return quantize(c);
  if (op == "DequantizeLinear") return dequantize(c);
  if (op == "GroupNormalization") return group_norm(c);
  if (op == "CenterCropPad") return center_crop_pad(c);
  if (op == "HannWindow" || op == "HammingWindow" || op == "BlackmanWindow") return window(c);
  if (op == "GatherND") return gather_nd(c);
  if (op == "NonZero") return non_zero(c);
  if (op == "Compress") return compress(c);
  if (op == "Resize" || op == "Upsample") return resize(c);
  if (op == "ConvTranspose") return conv_transpose(c);
  if (op == "Trilu") return trilu(c);
  if (op == "CumSum") return cumsum(c);
  if (op == "OneHot") return one_hot(c);
  if (op == "EyeLike") return eye_like(c);
  if (op == "IsNaN") {
    Tensor x = c.t(0);
    return from_tensor(x.ne(x), TP::BOOL);
  }
  if (op == "IsInf") {
    // x - x is NaN exactly for infinities and NaNs; no inf literal has to be rendered.
    Tensor x = c.t(0), z = x - x;
    Tensor inf = z.ne(z).cast(DType::f32) * x.eq(x).cast(DType::f32);
    Tensor zero = Tensor::scalar(0, DType::f32, x.device());
    Tensor pos = x.gt(zero).cast(DType::f32), neg = x.lt(zero).cast(DType::f32);
    Tensor sel = pos * double(attr_i(n, "detect_positive", 1) != 0) + neg * double(attr_i(n, "detect_negative", 1) != 0);
    return from_tensor((inf * sel).ne(zero), TP::BOOL);
  }
  unsupported(n, c.opset, "");
}

}  // namespace

bool is_float_elem(int32_t e) {
  return e == TP::FLOAT || e == TP::DOUBLE || e == TP::FLOAT16 || e == TP::BFLOAT16;
}

const char* elem_name(int32_t e) {
  switch (e) {
    case TP::FLOAT: return "float";
    case TP::UINT8: return "uint8";
    case TP::INT8: return "int8";
    case TP::UINT16: return "uint16";
    case TP::INT16: return "int16";
    case TP::INT32: return "int32";
    case TP::INT64: return "int64";
    case TP::STRING: return "string";
    case TP::BOOL: return "bool";
    case TP::FLOAT16: return "float16";
    case TP::DOUBLE: return "double";
    case TP::UINT32: return "uint32";
    case TP::UINT64: return "uint64";
    case TP::COMPLEX64: return "complex64";
    case TP::COMPLEX128: return "complex128";
    case TP::BFLOAT16: return "bfloat16";
    default: return "unknown";
  }
}

DType tl_dtype(int32_t e, const std::string& op) {
  if (is_float_elem(e)) return DType::f32;
  if (e == TP::BOOL) return DType::boolean;
  switch (e) {
    case TP::UINT8: case TP::INT8: case TP::UINT16: case TP::INT16: case TP::INT32: case TP::INT64:
    case TP::UINT32: case TP::UINT64:
      return DType::i32;
    default:
      throw OnnxUnsupported("unsupported ONNX element type " + std::string(elem_name(e)) + " (in " + op + ")",
                            "type:" + std::string(elem_name(e)));
  }
}

Tensor& device_tensor(Value& v, const std::string& device) {
  if (v.tensor.defined() && v.tensor.device() == device) return v.tensor;
  if (v.tensor.defined()) {
    v.tensor = v.tensor.to(device);
    return v.tensor;
  }
  DType d = tl_dtype(v.elem, "input");
  if (d == DType::f32) {
    v.tensor = Tensor::from_data(std::vector<float>(v.data.begin(), v.data.end()), v.shape, device);
  } else {
    std::vector<int32_t> ints(v.data.size());
    for (size_t i = 0; i < ints.size(); ++i)
      ints[i] = std::isnan(v.data[i]) ? 0 : int32_t(std::clamp(v.data[i], double(INT32_MIN), double(INT32_MAX)));
    v.tensor = Tensor::from_ints(ints, v.shape, device);
    if (d == DType::boolean) v.tensor = v.tensor.cast(DType::boolean);
  }
  return v.tensor;
}

bool op_supported(const std::string& domain, const std::string& op) {
  static const std::set<std::string> ops = {
      "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Reciprocal", "Sin", "Cos", "Tan", "Sign",
      "Erf", "Floor", "Ceil", "LeakyRelu", "Elu", "Celu", "Selu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
      "Mish", "ThresholdedRelu", "Gelu", "Round", "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater",
      "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod", "Max", "Min", "Sum", "Mean", "Not", "Identity",
      "Dropout", "Constant", "Shape", "Size", "Cast", "CastLike", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
      "Concat", "Gather", "Slice", "ConstantOfShape", "Range", "Where", "Expand", "Tile", "Transpose", "MatMul",
      "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization",
      "InstanceNormalization", "MeanVarianceNormalization", "LpNormalization", "LRN", "Softmax", "LogSoftmax",
      "Hardmax", "Clip", "PRelu", "Pad", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
      "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd", "ArgMax", "ArgMin",
      "LayerNormalization", "DepthToSpace", "SpaceToDepth", "Split", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
      "Shrink", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "GatherElements", "Trilu", "CumSum",
      "OneHot", "EyeLike", "IsNaN", "IsInf", "Resize", "Upsample", "ConvTranspose", "Atan", "Asin", "Acos",
      "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "GroupNormalization", "CenterCropPad",
      "HannWindow", "HammingWindow", "BlackmanWindow", "GatherND", "NonZero", "Compress", "TopK", "BitwiseAnd",
      "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitShift", "ScatterElements", "Scatter", "ScatterND", "RNN", "GRU",
      "LSTM", "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "ReverseSequence", "Det",
      "NonMaxSuppression", "MaxUnpool", "DFT", "Unique", "GridSample", "Col2Im", "RoiAlign", "STFT"};
  return (domain.empty() || domain == "ai.onnx") && ops.count(op) > 0;
}

namespace {

// What every value must satisfy before an op reads it and after an op made
// it: non-negative dimensions, at most `max_elements` elements, and host data
// of exactly the shape's size (host code indexes it by the shape).
void check_value(const onnx::NodeProto& node, const Value& v, int64_t max_elements, const std::string& what) {
  int64_t count = checked_numel(node, v.shape, max_elements, what);
  if (v.host && int64_t(v.data.size()) != count)
    bad(node, what + " holds " + std::to_string(v.data.size()) + " values for its shape " + shape_str(v.shape));
  if (v.tensor.defined() && v.tensor.shape() != v.shape)
    bad(node, what + " has shape " + shape_str(v.tensor.shape()) + " on the device but " + shape_str(v.shape) + " recorded");
}

std::vector<Value> run_node_unchecked(Ctx& c) {
  const onnx::NodeProto& node = c.node;
  const int64_t opset = c.opset;
  const std::string& device = c.device;
  std::vector<Value*>& inputs = c.in;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (c.has(i)) tl_dtype(inputs[i]->elem, node.op_type());
  if (node.op_type() == "Split") return split(c);
  if (node.op_type() == "TopK") return top_k(c);
  if (node.op_type() == "Unique") return unique(c);
  if (node.op_type() == "MaxPool" && node.output_size() > 1 && !node.output(1).empty()) return max_pool_with_indices(c);
  if (node.op_type() == "RNN" || node.op_type() == "GRU" || node.op_type() == "LSTM") return recurrent(c);
  if (node.op_type() == "DynamicQuantizeLinear") {
    Tensor x = c.t(0).cast(DType::f32);
    Tensor zero = Tensor::scalar(0, DType::f32, device);
    Tensor lo = x.min().minimum(zero), hi = x.max().maximum(zero);
    Tensor scale = (hi - lo) / 255.0;
    Tensor zp = saturate(round_even(zero - divide(lo, scale)), TP::UINT8);
    Tensor y = saturate(round_even(divide(x, scale)) + zp, TP::UINT8);
    return {from_tensor(y.cast(DType::i32), TP::UINT8), from_tensor(scale, TP::FLOAT), from_tensor(zp.cast(DType::i32), TP::UINT8)};
  }
  if (node.op_type() == "BatchNormalization" && attr_i(node, "training_mode", 0) != 0) {
    // Batch statistics; the running ones blend in with `momentum`.
    Tensor x = c.t(0);
    int64_t r = x.ndim();
    std::vector<int> axes = {0};
    for (int i = 2; i < r; ++i) axes.push_back(i);
    double eps = attr_f(node, "epsilon", 1e-5), mom = attr_f(node, "momentum", 0.9);
    Tensor mean = x.mean(axes, true), cen = x - mean, var = (cen * cen).mean(axes, true);
    Tensor y = cen * (var + eps).rsqrt() * per_channel(node, c.t(1), x.shape(), "scale") + per_channel(node, c.t(2), x.shape(), "bias");
    Shape cs = {x.dim(1)};
    Tensor rm = c.t(3) * mom + mean.reshape(cs) * (1 - mom), rv = c.t(4) * mom + var.reshape(cs) * (1 - mom);
    return {from_tensor(y, c.v(0).elem), from_tensor(rm, c.v(3).elem), from_tensor(rv, c.v(4).elem)};
  }
  if (node.op_type() == "Dropout" && opset >= 12 && c.has(2) && c.first_int(2) != 0) {
    double ratio = c.has(1) ? c.first(1) : 0.5;
    if (ratio != 0) unsupported(node, opset, "Dropout in training mode with ratio " + std::to_string(ratio) + " (random)");
    std::vector<Value> out = {c.v(0)};
    if (node.output_size() > 1) out.push_back(from_tensor(Tensor::full(c.shape(0), 1, DType::boolean, device), TP::BOOL));
    return out;
  }
  std::vector<Value> out;
  out.push_back(run_single(c));
  const std::string& op = node.op_type();
  for (int i = 1; i < node.output_size(); ++i) {
    if (node.output(i).empty()) {
      out.emplace_back();
      continue;
    }
    if (op == "Dropout") {  // the mask: every element kept
      out.push_back(from_tensor(Tensor::full(c.shape(0), 1, DType::boolean, device), TP::BOOL));
    } else if (op == "SoftmaxCrossEntropyLoss") {
      out.push_back(from_tensor(c.t(0).cast(DType::f32).log_softmax(1), c.v(0).elem));
    } else if (op == "LayerNormalization") {
      Tensor x = c.t(0);
      int64_t axis = norm_axis(attr_i(node, "axis", -1), x.ndim(), node);
      std::vector<int> axes;
      for (int64_t k = axis; k < x.ndim(); ++k) axes.push_back(int(k));
      Tensor mean = x.mean(axes, true), cen = x - mean;
      Tensor inv = ((cen * cen).mean(axes, true) + attr_f(node, "epsilon", 1e-5)).rsqrt();
      out.push_back(from_tensor(i == 1 ? mean : inv, TP::FLOAT));
    } else {
      unsupported(node, opset, "output " + std::to_string(i) + " (" + node.output(i) + ")");
    }
  }
  return out;
}

}  // namespace

std::vector<Value> run_node(const onnx::NodeProto& node, std::vector<Value*>& inputs, int64_t opset,
                            const std::string& device, int64_t max_elements) {
  if (!op_supported(node.domain(), node.op_type())) unsupported(node, opset, "");
  Ctx c{node, inputs, opset, device, max_elements};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (c.has(i)) check_value(node, *inputs[i], INT64_MAX, "input " + std::to_string(i));
  std::vector<Value> out = run_node_unchecked(c);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].present) check_value(node, out[i], max_elements, "output " + std::to_string(i));
  return out;
}

}  // namespace tl::onnx_detail
