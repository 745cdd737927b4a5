// The helpers every ONNX op handler shares (see context.h), and the element
// types of ONNX values on tl::Tensor.
#include "core/io/onnx/context.h"

#include <algorithm>
#include <sstream>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>

#include "core/io/limits.h"
#include "core/io/onnx.h"

namespace tl::onnx_detail {

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

Ints attr_ints(const onnx::NodeProto& n, const std::string& name, const Ints& def) {
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
  for (auto d : s)
    if (d < 0) bad(n, what + " " + shape_str(s) + " has a negative dimension");
  // A 0 anywhere means no elements, whatever the other sizes: then only the
  // span (what strides and offsets reach) can be too large.
  int64_t count = 1;
  const bool empty = std::find(s.begin(), s.end(), 0) != s.end();
  for (auto d : s)
    if (!empty && (__builtin_mul_overflow(count, d, &count) || count > max_elements))
      bad(n, what + " " + shape_str(s) + " has more than " + std::to_string(max_elements) +
                 " elements, the most one value of this model may hold (" + io::budget_remedy() + ")");
  if (!span_fits(s))
    bad(n, what + " " + shape_str(s) + " spans more than 2^48 (its sizes multiplied with each 0 as 1): no tensor "
               "tinylens can index");
  return empty ? 0 : count;
}

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

// erf(x) = x P(x^2) / Q(x^2), P and Q of degree 5, fitted on |x| <= 3.925
// (past it erf rounds to +-1 in float) by scripts/fit_erf.py: within 6
// float ulps (3.5e-7) everywhere, and relatively exact near 0. No exp, no
// abs or sign: 27 operations against the 45 of Abramowitz & Stegun's
// 1 - t P(t) e^(-x^2), which cost GELU's GEMMs 1.6 ns an element.
Tensor erf(const Tensor& x) {
  static constexpr double kClamp = 3.925;
  static constexpr double kP[] = {1.1283791461012926,    0.19056617225460137,    0.05276473885628421,
                                  0.003771139666720898,  0.00028477376083299935, 2.0457347195967923e-06};
  static constexpr double kQ[] = {1.0,                  0.5022176115473417,    0.11417050063759299,
                                  0.014980374625983993, 0.0011634462462834574, 3.804109210238382e-05};
  Tensor xc = x.maximum(-kClamp).minimum(kClamp);  // NaN passes both
  Tensor z = xc * xc;
  auto horner = [&](const double* c) {
    Tensor v = z * c[5] + c[4];
    for (int i = 3; i >= 0; --i) v = v * z + c[i];
    return v;
  };
  return xc * horner(kP) / horner(kQ);
}

Tensor floor_t(const Tensor& x) {
  // Truncation through int32 is exact for |x| < 2^31; larger floats are already integers.
  const DType f = float_type(x.dtype());
  Tensor tr = x.cast(DType::i32).cast(f);
  Tensor fl = tr - x.lt(tr).cast(f);
  return Tensor::where(x.abs().lt(Tensor::scalar(2147483520.0, f, x.device())), fl, x);
}

// a / b to within float rounding: the core divides by multiplying with the
// reciprocal; one residual step recovers the correctly rounded quotient in
// nearly every case (Quantize's round-half-even is sensitive to the last bit).
Tensor divide(const Tensor& a, const Tensor& b) {
  const DType f = float_type(promote(a.dtype(), b.dtype()));
  Tensor af = a.cast(f), bf = b.cast(f), r = bf.reciprocal();
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
  return f - (half.cast(f.dtype()) * odd.cast(f.dtype()));
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

TreeReduce sum_tree() { return {[](const Tensor& a, const Tensor& b) { return a + b; }, {}}; }

// ---------- element types ----------

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
  if (e == TP::DOUBLE) return DType::f64;
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

Tensor constant_tensor(const std::vector<float>& data, const Shape& shape, const std::string& device) {
  constexpr size_t kMaxEntry = size_t{4} << 20, kMaxAll = size_t{64} << 20;
  const size_t bytes = data.size() * sizeof(float);
  if (bytes > kMaxEntry) return Tensor::from_data(data, shape, device);
  std::string key = device + "|" + shape_str(shape) + "|";
  key.append(reinterpret_cast<const char*>(data.data()), bytes);
  static std::mutex mutex;
  // Never destroyed: its tensors' buffers must not outlive their devices,
  // which static destruction might tear down first.
  static auto& made = *new std::map<std::string, Tensor>();
  static size_t held = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = made.find(key); it != made.end()) return it->second;
  Tensor t = Tensor::from_data(data, shape, device);
  if (held + bytes <= kMaxAll) {
    t.realize();
    made.emplace(std::move(key), t);
    held += bytes;
  }
  return t;
}

Tensor& device_tensor(Value& v, const std::string& device) {
  if (v.tensor.defined() && v.tensor.device() == device) return v.tensor;
  if (v.tensor.defined()) {
    v.tensor = v.tensor.to(device);
    return v.tensor;
  }
  DType d = tl_dtype(v.elem, "input");
  if (d == DType::f64) {
    v.tensor = Tensor::from_doubles(v.data, v.shape, device);
  } else if (d == DType::f32) {
    v.tensor = Tensor::from_data(std::vector<float>(v.data.begin(), v.data.end()), v.shape, device);
  } else {
    std::vector<int32_t> ints(v.data.size());
    for (size_t i = 0; i < ints.size(); ++i)
      ints[i] = int32_t(value_of_type(v.data[i], DType::i32));
    v.tensor = Tensor::from_ints(ints, v.shape, device);
    if (d == DType::boolean) v.tensor = v.tensor.cast(DType::boolean);
  }
  return v.tensor;
}

// An attribute as text, for the inspection: lists cut after 16 entries, small
// tensors with their values.
std::string attribute_text(const onnx::AttributeProto& a) {
  std::ostringstream s;
  auto list = [&](const auto& xs) {
    s << "[";
    int k = 0;
    for (const auto& x : xs) {
      if (k++) s << ", ";
      if (k > 16) {
        s << "...";
        break;
      }
      s << x;
    }
    s << "]";
  };
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: s << a.f(); break;
    case onnx::AttributeProto::INT: s << a.i(); break;
    case onnx::AttributeProto::STRING: s << '"' << a.s() << '"'; break;
    case onnx::AttributeProto::FLOATS: list(a.floats()); break;
    case onnx::AttributeProto::INTS: list(a.ints()); break;
    case onnx::AttributeProto::STRINGS: list(a.strings()); break;
    case onnx::AttributeProto::TENSOR: {
      s << "tensor " << elem_name(a.t().data_type()) << " (";
      for (int i = 0; i < a.t().dims_size(); ++i) s << (i ? ", " : "") << a.t().dims(i);
      s << ")";
      // Constants of a few values (padding arithmetic, axes) read better as values.
      int64_t count = 1;
      for (int i = 0; i < a.t().dims_size() && count > 0; ++i)
        count = a.t().dims(i) < 0 || a.t().dims(i) > 8 ? -1 : count * a.t().dims(i);
      if (count >= 1 && count <= 8) {
        try {
          Value v = value_from_proto(a.t(), "", "attribute '" + a.name() + "'");
          s << " ";
          if (a.t().dims_size() == 0 && v.data.size() == 1) s << v.data[0];
          else list(v.data);
        } catch (const IOError&) {
          // An unreadable constant still shows its type and shape.
        }
      }
      break;
    }
    case onnx::AttributeProto::GRAPH: s << "graph '" << a.g().name() << "'"; break;
    default: s << "(" << onnx::AttributeProto::AttributeType_Name(a.type()) << ")"; break;
  }
  return s.str();
}

}  // namespace tl::onnx_detail
