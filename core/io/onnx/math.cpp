// Elementwise and math ops: unary functions, binary arithmetic and
// comparisons (folded on the host for small host values), variadic
// Max/Min/Sum/Mean, casts, reductions, products and the NaN/Inf tests.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/io/onnx/registry.h"

namespace tl::onnx_detail {

namespace {

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

// Neg, Abs, Sign and Relu keep integers integral; the others compute in float.
Value unary(const Ctx& c) {
  const std::string& op = c.node.op_type();
  Value& x = c.v(0);
  if (is_int_elem(x.elem) && (op == "Neg" || op == "Abs" || op == "Sign" || op == "Relu")) {
    Tensor t = c.t(0);
    Tensor y = op == "Neg" ? t.neg() : op == "Abs" ? t.abs() : op == "Relu" ? t.relu() : t.sign();
    return from_tensor(y.cast(DType::i32), x.elem);
  }
  return from_tensor(unary_f(c, op), x.elem);
}

// 2 or 3 when every element of a host exponent is that integer, else 0.
int small_power(const Value& e) {
  if (!e.host || e.data.empty()) return 0;
  const double p = e.data.front();
  if (p != 2 && p != 3) return 0;
  for (double v : e.data)
    if (v != p) return 0;
  return int(p);
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
  if (cmp && (!is_float(a.dtype()) || !is_float(b.dtype()))) {
    // Compare integers as float32 (exact below 2^24): the core's int32 CmpLt
    // currently gets negative operands wrong (-1 < 0 is false).
    const DType f = float_type(promote(a.dtype(), b.dtype()));
    a = a.cast(f);
    b = b.cast(f);
  }
  const DType fl = float_type(promote(a.dtype(), b.dtype()));  // Mod's working type
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
  } else if (op == "Pow" && !ints && small_power(c.v(1)) && broadcast(a.shape(), b.shape(), c.node) == a.shape()) {
    // A constant exponent of 2 (LayerNorm's variance) or 3 (GELU's tanh
    // form) as products: a multiply per element instead of a call to pow,
    // which does not vectorise. x*x is pow(x, 2) exactly (one rounding of
    // the same product); x*x*x is within an ulp of pow(x, 3); both agree
    // with pow on zeros, infinities and NaN.
    y = small_power(c.v(1)) == 2 ? a * a : a * a * a;
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
      Tensor q = (a.cast(fl) / b.cast(fl));
      Tensor tq = Tensor::where(q.lt(Tensor::scalar(0, fl, a.device())), -floor_t(-q), floor_t(q));
      y = a.cast(fl) - tq * b.cast(fl);
    } else {
      Tensor af = a.cast(fl), bf = b.cast(fl);
      y = af - floor_t(af / bf) * bf;
    }
    if (ints) y = (y + y.sign() * 1e-3).cast(DType::i32);
  } else unsupported(c.node, c.opset, "");
  return from_tensor(y, out_elem);
}

Value binary_op(const Ctx& c) { return binary(c, c.node.op_type()); }

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

Value op_max(const Ctx& c) {
  const std::string& op = c.node.op_type();
  if (c.in.size() == 2 && c.all_host()) return binary(c, op);
  return variadic(c, op);
}

Value op_not(const Ctx& c) {
  if (c.v(0).host) {
    auto d = c.v(0).data;
    for (auto& x : d) x = x == 0;
    return from_host(c.shape(0), TP::BOOL, d);
  }
  return from_tensor(c.t(0).cast(DType::f32).eq(Tensor::scalar(0, DType::f32, c.device)), TP::BOOL);
}

Value op_cast(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = c.node.op_type();
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

Value op_where(const Ctx& c) {
  Tensor y = Tensor::where(c.t(0), c.t(1), c.t(2));
  int32_t elem = c.v(1).elem;
  if (is_int_elem(elem)) y = y.cast(DType::i32);
  return from_tensor(y, elem);
}

Value op_mat_mul(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor y = c.t(0).matmul(c.t(1));
  c.flops(double(y.numel()) * double(c.shape(0).empty() ? 1 : c.shape(0).back()), "the product");
  return same(is_int_elem(c.v(0).elem) ? y.cast(DType::i32) : y);
}

Value op_gemm(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
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

Value op_clip(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  bool ints = is_int_elem(c.v(0).elem);
  if (c.opset < 11) {
    return same(x.clip(attr_f(n, "min", -FLT_MAX), attr_f(n, "max", FLT_MAX)));
  }
  // A float bound the file holds as one number (an initializer or a folded
  // constant, which stay host values) becomes a constant of the graph, as
  // ReLU6's 0 and 6 are: a convolution's GEMM then clamps in registers
  // (tl_gemm.fused, kernels/gemm_cpu.h) instead of reading the bound from a
  // buffer in a pass of its own. Same values, NaN bounds included.
  auto bounded = [&](size_t i, bool lower) {
    const Value& b = c.v(i);
    if (!ints && b.host && b.data.size() == 1 && b.shape.size() <= x.shape().size())
      return lower ? x.maximum(b.data[0]) : x.minimum(b.data[0]);
    return lower ? x.maximum(c.t(i)) : x.minimum(c.t(i));
  };
  if (c.has(1)) x = bounded(1, true);
  if (c.has(2)) x = bounded(2, false);
  return same(ints ? x.cast(DType::i32) : x);
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
  const DType f = float_type(x.dtype());  // what the float forms compute in
  Tensor y;
  if (op == "ReduceSum") y = x.sum(axes, keep);
  else if (op == "ReduceMean") y = x.mean(axes, keep);
  else if (op == "ReduceMax") y = x.max(axes, keep);
  else if (op == "ReduceMin") y = x.min(axes, keep);
  else if (op == "ReduceSumSquare") y = (x * x).sum(axes, keep);
  else if (op == "ReduceL1") y = x.abs().sum(axes, keep);
  else if (op == "ReduceL2") y = (x.cast(f) * x.cast(f)).sum(axes, keep).sqrt();
  else if (op == "ReduceLogSum") y = x.cast(f).sum(axes, keep).log();
  else if (op == "ReduceLogSumExp") {
    Tensor xf = x.cast(f);
    Tensor m = xf.max(axes, true);
    y = (xf - m).exp().sum(axes, true).log() + m;
    if (!keep) {
      std::vector<int> sorted = axes;
      std::sort(sorted.rbegin(), sorted.rend());
      for (int a : sorted) y = y.squeeze(a);
    }
  } else if (op == "ReduceProd") {
    // Sign and magnitude separately: exp(sum(log|x|)) times the parity of negatives.
    Tensor xf = x.cast(f);
    Tensor mag = xf.abs().log().sum(axes, keep).exp();
    Tensor negs = xf.lt(Tensor::scalar(0, DType::f32, x.device())).cast(DType::f32).sum(axes, keep);
    Tensor odd = (negs - (negs * 0.5).cast(DType::i32).cast(DType::f32) * 2.0);
    Tensor zeros = xf.eq(Tensor::scalar(0, DType::f32, x.device())).cast(DType::f32).sum(axes, keep);
    y = mag * (1.0 - odd * 2.0) * (1.0 - zeros.minimum(1.0));  // 1 over no elements
  } else unsupported(c.node, c.opset, "");
  if (is_int_elem(elem) && is_float(y.dtype()) && op != "ReduceMean") y = y.cast(DType::i32);
  return from_tensor(is_int_elem(elem) && op == "ReduceMean" ? y.cast(DType::i32) : y, elem);
}

Value reduce_op(const Ctx& c) { return reduce(c, c.node.op_type()); }

Value op_arg_max(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = c.node.op_type();
  Tensor x = c.t(0).cast(float_type(c.t(0).dtype()));
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
  Tensor T = constant_tensor(tri, {D, D}, x.device());
  Tensor y = x.cast(float_type(x.dtype())).transpose(axis, int(r - 1)).matmul(T).transpose(axis, int(r - 1));
  int32_t elem = c.v(0).elem;
  return from_tensor(is_int_elem(elem) ? (y + y.sign() * 0.25).cast(DType::i32) : y, elem);
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

Value op_is_nan(const Ctx& c) {
  Tensor x = c.t(0);
  return from_tensor(x.ne(x), TP::BOOL);
}

Value op_is_inf(const Ctx& c) {
  const auto& n = c.node;
  // x - x is NaN exactly for infinities and NaNs; no inf literal has to be rendered.
  Tensor x = c.t(0), z = x - x;
  Tensor inf = z.ne(z).cast(DType::f32) * x.eq(x).cast(DType::f32);
  Tensor zero = Tensor::scalar(0, DType::f32, x.device());
  Tensor pos = x.gt(zero).cast(DType::f32), neg = x.lt(zero).cast(DType::f32);
  Tensor sel = pos * double(attr_i(n, "detect_positive", 1) != 0) + neg * double(attr_i(n, "detect_negative", 1) != 0);
  return from_tensor((inf * sel).ne(zero), TP::BOOL);
}

}  // namespace

std::vector<OpDef> math_ops() {
  using namespace types;
  const auto D = Placement::Device;
  std::vector<OpDef> ops = {
      // Unary: Neg, Abs, Sign and Relu take integers too.
      {"Relu", 1, kNumeric, D, unary}, {"Neg", 1, kNumeric, D, unary}, {"Abs", 1, kNumeric, D, unary},
      {"Sign", 9, kNumeric, D, unary}, {"Sigmoid", 1, kFloat, D, unary}, {"Tanh", 1, kFloat, D, unary},
      {"Exp", 1, kFloat, D, unary}, {"Log", 1, kFloat, D, unary}, {"Sqrt", 1, kFloat, D, unary},
      {"Reciprocal", 1, kFloat, D, unary}, {"Sin", 7, kFloat, D, unary}, {"Cos", 7, kFloat, D, unary},
      {"Tan", 7, kFloat, D, unary}, {"Asin", 7, kFloat, D, unary}, {"Acos", 7, kFloat, D, unary},
      {"Atan", 7, kFloat, D, unary}, {"Sinh", 9, kFloat, D, unary}, {"Cosh", 9, kFloat, D, unary},
      {"Asinh", 9, kFloat, D, unary}, {"Acosh", 9, kFloat, D, unary}, {"Atanh", 9, kFloat, D, unary},
      {"Erf", 9, kFloat, D, unary}, {"Floor", 1, kFloat, D, unary}, {"Ceil", 1, kFloat, D, unary},
      {"Round", 11, kFloat, D, unary}, {"LeakyRelu", 1, kFloat, D, unary}, {"Elu", 1, kFloat, D, unary},
      {"Celu", 12, kFloat, D, unary}, {"Selu", 1, kFloat, D, unary}, {"HardSigmoid", 1, kFloat, D, unary},
      {"HardSwish", 14, kFloat, D, unary}, {"Softplus", 1, kFloat, D, unary}, {"Softsign", 1, kFloat, D, unary},
      {"Mish", 18, kFloat, D, unary}, {"ThresholdedRelu", 10, kFloat, D, unary}, {"Gelu", 20, kFloat, D, unary},
      {"Shrink", 9, kNumeric, D, unary},
      // Binary, broadcasting.
      {"Add", 1, kNumeric, D, binary_op}, {"Sub", 1, kNumeric, D, binary_op}, {"Mul", 1, kNumeric, D, binary_op},
      {"Div", 1, kNumeric, D, binary_op}, {"Pow", 1, kNumeric, D, binary_op}, {"Mod", 10, kNumeric, D, binary_op},
      {"Equal", 1, kAll, D, binary_op}, {"Less", 1, kNumeric, D, binary_op}, {"Greater", 1, kNumeric, D, binary_op},
      {"LessOrEqual", 12, kNumeric, D, binary_op}, {"GreaterOrEqual", 12, kNumeric, D, binary_op},
      {"And", 1, kBool, D, binary_op}, {"Or", 1, kBool, D, binary_op}, {"Xor", 1, kBool, D, binary_op},
      {"Not", 1, kBool, D, op_not},
      // Variadic.
      {"Max", 1, kNumeric, D, op_max}, {"Min", 1, kNumeric, D, op_max}, {"Sum", 1, kNumeric, D, op_max},
      {"Mean", 1, kNumeric, D, op_max},
      {"Cast", 1, kAll, D, op_cast}, {"CastLike", 15, kAll, D, op_cast}, {"Where", 9, kBool, D, op_where},
      {"Clip", 1, kNumeric, D, op_clip}, {"MatMul", 1, kNumeric, D, op_mat_mul}, {"Gemm", 1, kNumeric, D, op_gemm},
      // Reductions.
      {"ReduceSum", 1, kNumeric, D, reduce_op}, {"ReduceMean", 1, kNumeric, D, reduce_op},
      {"ReduceMax", 1, kAll, D, reduce_op}, {"ReduceMin", 1, kAll, D, reduce_op},
      {"ReduceProd", 1, kNumeric, D, reduce_op}, {"ReduceSumSquare", 1, kNumeric, D, reduce_op},
      {"ReduceL1", 1, kNumeric, D, reduce_op}, {"ReduceL2", 1, kNumeric, D, reduce_op},
      {"ReduceLogSum", 1, kNumeric, D, reduce_op}, {"ReduceLogSumExp", 1, kNumeric, D, reduce_op},
      {"ArgMax", 1, kNumeric, D, op_arg_max}, {"ArgMin", 1, kNumeric, D, op_arg_max},
      {"CumSum", 11, kNumeric, D, cumsum}, {"Det", 11, kFloat, Placement::Host, determinant},
      {"IsNaN", 9, kFloat, D, op_is_nan}, {"IsInf", 10, kFloat, D, op_is_inf},
  };
  return ops;
}

}  // namespace tl::onnx_detail
