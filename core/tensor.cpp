// The Tensor API: state (grad mode, scopes, the default device), creation,
// facts, evaluation, elementwise arithmetic and reductions. Movement is in
// tensor_movement.cpp, the composite ops in tensor_nn.cpp, backward() in
// autograd.cpp.
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/tensor_internal.h"
#include "core/trace.h"

namespace tl {

using namespace detail;

// ---------------------------------------------------------------- state ----

namespace {
thread_local bool grad_on = true;
thread_local std::string scope_name;
std::string default_device_name = "cpu";
}  // namespace

namespace detail {

int norm_axis(int axis, int ndim, const Shape& shape, const char* what) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= std::max(ndim, 1) || (ndim == 0))
    throw ShapeError(std::string(what) + ": axis " + std::to_string(axis) + " is out of range for a tensor of shape " +
                     shape_str(shape));
  return a;
}

std::vector<int> norm_axes(const std::vector<int>& axes, const Shape& shape, const char* what) {
  int nd = int(shape.size());
  std::vector<int> out;
  if (axes.empty()) {
    out.resize(nd);
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  for (int a : axes) {
    int n = norm_axis(a, nd, shape, what);
    if (std::find(out.begin(), out.end(), n) != out.end())
      throw ShapeError(std::string(what) + ": axis " + std::to_string(a) + " repeated for shape " + shape_str(shape));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

const std::string& resolve(const std::string& device) { return device.empty() ? default_device_name : device; }

// a + b and a * b of sizes, or a ShapeError naming `what` and the operands.
int64_t add_sizes(int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw ShapeError(what + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows 64 bits");
  return r;
}
int64_t mul_sizes(int64_t a, int64_t b, const std::string& what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw ShapeError(what + ": " + std::to_string(a) + " x " + std::to_string(b) + " overflows 64 bits");
  return r;
}

NodeRef make(Op op, std::vector<NodeRef> src, Shape shape, DType dtype, std::vector<int64_t> arg, double value) {
  check_span(shape, op_name(op));  // no negative size, a span within kMaxShapeSpan
  auto n = std::make_shared<Node>();
  n->op = op;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->arg = std::move(arg);
  n->value = value;
  n->scope = scope_name;
  n->origin = OriginScope::current();
  if (!src.empty()) n->device = src[0]->device;
  for (auto& s : src) {
    if (s->device != n->device)
      throw DeviceError(std::string(op_name(op)) + ": operands live on different devices ('" + n->device + "' and '" +
                        s->device + "'); move one with .to()");
    if (grad_on && s->requires_grad) n->requires_grad = true;
  }
  n->src = std::move(src);
  return n;
}

NodeRef constant_node(double v, const Shape& shape, DType t, const std::string& device) {
  auto n = make(Op::Const, {}, shape, t, {}, value_of_type(v, t));
  n->device = resolve(device);
  return n;
}

NodeRef buffer_node(const void* data, const Shape& shape, DType t, const std::string& device) {
  Device& dev = Registry::instance().get_available(resolve(device));
  auto n = make(Op::Buffer, {}, shape, t);  // a ShapeError for a negative size
  n->device = dev.name();
  size_t bytes = size_t(mul_sizes(numel(shape), int64_t(dtype_size(t)), "buffer of " + shape_str(shape)));
  n->buffer = dev.acquire(bytes);
  if (data) {
    TraceScope span("upload");
    dev.copy_in(*n->buffer, data, bytes);
  }
  return n;
}
}  // namespace detail

bool grad_enabled() { return grad_on; }
NoGrad::NoGrad() : previous_(grad_on) { grad_on = false; }
NoGrad::~NoGrad() { grad_on = previous_; }

Scope::Scope(const std::string& name) : previous_(scope_name) {
  scope_name = previous_.empty() ? name : previous_ + "." + name;
}
Scope::~Scope() { scope_name = previous_; }
const std::string& Scope::current() { return scope_name; }

void set_default_device(const std::string& name) {
  Registry::instance().get(name);  // throws for unknown names
  default_device_name = name;
}
const std::string& default_device() { return default_device_name; }

// ------------------------------------------------------------- creation ----

Tensor Tensor::empty(const Shape& shape, DType dtype, const std::string& device) { return zeros(shape, dtype, device); }

Tensor Tensor::zeros(const Shape& shape, DType dtype, const std::string& device) { return full(shape, 0, dtype, device); }

Tensor Tensor::ones(const Shape& shape, DType dtype, const std::string& device) { return full(shape, 1, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, const std::string& device) {
  for (auto d : shape)
    if (d < 0) throw ShapeError("full: negative size in shape " + shape_str(shape));
  Registry::instance().get(resolve(device));
  return Tensor(constant_node(value, shape, dtype, device));
}

Tensor Tensor::scalar(double value, DType dtype, const std::string& device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(double start, double stop, double step, DType dtype, const std::string& device) {
  if (step == 0) throw ShapeError("arange: step must not be 0");
  const double steps = std::ceil((stop - start) / step);
  if (std::isnan(steps) || steps > double(int64_t(1) << 40))
    throw ShapeError("arange(" + std::to_string(start) + ", " + std::to_string(stop) + ", " + std::to_string(step) +
                     ") has no finite, reasonable length");
  int64_t n = steps > 0 ? int64_t(steps) : 0;  // (a huge negative double has no int64_t)
  auto values = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = T(start + double(i) * step);
    return v;
  };
  if (dtype == DType::i32) return from_ints(values(int32_t()), {n}, device);
  if (dtype == DType::f64) return from_doubles(values(double()), {n}, device);
  return from_data(values(float()), {n}, device);
}

Tensor Tensor::eye(int64_t n, const std::string& device) {
  std::vector<float> v(size_t(n * n), 0.f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.f;
  return from_data(v, {n, n}, device);
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, const std::string& device) {
  return uniform(shape, 0, 1, gen, device);
}

// `shape`'s elements drawn from `dist`, as float32.
template <class Dist>
static Tensor sample(Dist dist, const Shape& shape, Generator& gen, const std::string& device) {
  std::vector<float> v(size_t(tl::numel(shape)));
  for (auto& x : v) x = dist(gen.engine());
  return Tensor::from_data(v, shape, device);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, Generator& gen, const std::string& device) {
  return sample(std::uniform_real_distribution<float>{float(low), float(high)}, shape, gen, device);
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, const std::string& device) {
  return sample(std::normal_distribution<float>(0.f, 1.f), shape, gen, device);
}

// A buffer of `data`, which must fill `shape` (`what` names the call in the error).
template <class T>
static Tensor from_values(const std::vector<T>& data, const Shape& shape, DType t, const std::string& device,
                          const char* what) {
  if (int64_t(data.size()) != tl::numel(shape))
    throw ShapeError(std::string(what) + ": " + std::to_string(data.size()) + " values do not fill shape " +
                     shape_str(shape));
  return Tensor(buffer_node(data.data(), shape, t, device));
}

Tensor Tensor::from_data(const std::vector<float>& data, const Shape& shape, const std::string& device) {
  return from_values(data, shape, DType::f32, device, "from_data");
}
Tensor Tensor::from_doubles(const std::vector<double>& data, const Shape& shape, const std::string& device) {
  return from_values(data, shape, DType::f64, device, "from_doubles");
}
Tensor Tensor::from_ints(const std::vector<int32_t>& data, const Shape& shape, const std::string& device) {
  return from_values(data, shape, DType::i32, device, "from_ints");
}

// ---------------------------------------------------------------- facts ----

const NodeRef& detail::need(const NodeRef& n) {
  if (!n) throw std::invalid_argument("operation on an undefined tensor");
  return n;
}

const Shape& Tensor::shape() const { return need(node_)->shape; }
int64_t Tensor::dim(int axis) const { return shape()[norm_axis(axis, ndim(), shape(), "dim")]; }
int64_t Tensor::numel() const { return tl::numel(shape()); }
DType Tensor::dtype() const { return need(node_)->dtype; }
const std::string& Tensor::device() const { return need(node_)->device; }

// ----------------------------------------------------------- evaluation ----

Tensor& Tensor::realize() {
  realize_nodes({need(node_)});
  return *this;
}

void Tensor::realize_all(const std::vector<Tensor>& tensors) {
  std::vector<NodeRef> roots;
  for (const Tensor& t : tensors) roots.push_back(need(t.node_));
  realize_nodes(roots);
}

Tensor Tensor::contiguous() const {
  if (need(node_)->realized()) return *this;
  return Tensor(make(Op::Contiguous, {node_}, shape(), dtype()));
}

// Inside a RealizeTogether a realize only collects: a value read there would
// find no buffer.
static void require_value(const Tensor& t) {
  if (!t.node()->realized())
    throw std::logic_error("a tensor's value was read while a RealizeTogether collects realizes; read it after "
                           "RealizeTogether::realize()");
}

static thread_local uint64_t thread_host_reads = 0;
uint64_t host_reads_on_this_thread() { return thread_host_reads; }

template <typename T>
static std::vector<T> read_as(const Tensor& t) {
  ++thread_host_reads;
  Tensor c = t;
  c.realize();
  require_value(c);
  auto& n = *c.node();
  size_t count = size_t(tl::numel(n.shape));
  Device& dev = *n.buffer->device();
  TraceScope span("download");
  auto convert = [&](auto element) {
    std::vector<decltype(element)> raw(count);
    dev.copy_out(*n.buffer, raw.data(), count * sizeof(element));
    return std::vector<T>(raw.begin(), raw.end());
  };
  switch (n.dtype) {
    case DType::f32: return convert(float());
    case DType::i32: return convert(int32_t());
    case DType::boolean: return convert(uint8_t());
    case DType::f64: return convert(double());
  }
  return {};
}

std::vector<float> Tensor::to_vector() const { return read_as<float>(*this); }
std::vector<int32_t> Tensor::to_ints() const { return read_as<int32_t>(*this); }
std::vector<double> Tensor::to_doubles() const { return read_as<double>(*this); }

float Tensor::item() const {
  if (numel() != 1) throw ShapeError("item: tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) + " elements, not 1");
  return to_vector()[0];
}

Tensor Tensor::to(const std::string& device) const {
  const std::string& target = resolve(device);
  if (target == this->device()) return *this;
  Registry::instance().get_available(target);  // fails before any work is done
  Tensor src = *this;
  src.realize();
  require_value(src);
  size_t bytes = size_t(numel()) * dtype_size(dtype());
  std::vector<unsigned char> host(bytes);
  src.node()->buffer->device()->copy_out(*src.node()->buffer, host.data(), bytes);
  return Tensor(buffer_node(host.data(), shape(), dtype(), target));
}

Tensor Tensor::cast(DType t) const {
  if (t == dtype()) return *this;
  return Tensor(make(Op::Cast, {node_}, shape(), t));
}

// ------------------------------------------------------------ elementwise --

Shape detail::broadcast_shape(const Shape& a, const Shape& b, const char* what) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      throw ShapeError(std::string(what) + ": shapes " + shape_str(a) + " and " + shape_str(b) + " cannot broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

static Tensor binary_op(Op op, Tensor a, Tensor b, const char* what) {
  Shape s = broadcast_shape(a.shape(), b.shape(), what);
  DType t = promote(a.dtype(), b.dtype());
  if (op == Op::Add || op == Op::Mul || op == Op::Pow || op == Op::Max) {
    if (t == DType::boolean) t = DType::i32;
  }
  a = a.cast(t).expand(s);
  b = b.cast(t).expand(s);
  DType out = (op == Op::CmpLt || op == Op::CmpEq) ? DType::boolean : t;
  return Tensor(make(op, {a.node(), b.node()}, s, out));
}

static Tensor like(const Tensor& t, double v) { return Tensor(constant_node(v, t.shape(), t.dtype() == DType::boolean ? DType::f32 : t.dtype(), t.device())); }

static Tensor unary_op(Op op, const Tensor& x) {
  Tensor f = x.cast(float_type(x.dtype()));
  return Tensor(make(op, {f.node()}, f.shape(), f.dtype()));
}

Tensor Tensor::neg() const {
  Tensor x = dtype() == DType::boolean ? cast(DType::i32) : *this;
  return Tensor(make(Op::Neg, {x.node_}, shape(), x.dtype()));
}
Tensor Tensor::exp() const { return unary_op(Op::Exp, *this); }
Tensor Tensor::log() const { return unary_op(Op::Log, *this); }
Tensor Tensor::sqrt() const { return unary_op(Op::Sqrt, *this); }
Tensor Tensor::reciprocal() const { return unary_op(Op::Recip, *this); }
Tensor Tensor::sin() const { return unary_op(Op::Sin, *this); }
Tensor Tensor::cos() const { return (cast(float_type(dtype())) + M_PI / 2).sin(); }
Tensor Tensor::leaky_relu(double slope) const { return where(gt(like(*this, 0)), *this, *this * slope); }
Tensor Tensor::sigmoid() const { return (1.0 + (-*this).exp()).reciprocal(); }
Tensor Tensor::tanh() const { return (*this * 2.0).sigmoid() * 2.0 - 1.0; }
Tensor Tensor::gelu() const {
  Tensor x = *this;
  return 0.5 * x * (1.0 + (std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)).tanh());
}
Tensor Tensor::abs() const { return where(lt(like(*this, 0)), -*this, *this); }
Tensor Tensor::sign() const {
  Tensor z = like(*this, 0);
  const DType f = float_type(dtype());
  return gt(z).cast(f) - lt(z).cast(f);
}

Tensor Tensor::add(const Tensor& o) const { return binary_op(Op::Add, *this, o, "add"); }
Tensor Tensor::sub(const Tensor& o) const { return binary_op(Op::Add, *this, o.neg(), "sub"); }
Tensor Tensor::mul(const Tensor& o) const { return binary_op(Op::Mul, *this, o, "mul"); }
Tensor Tensor::div(const Tensor& o) const {
  const DType f = float_type(promote(dtype(), o.dtype()));
  return binary_op(Op::Mul, cast(f), o.cast(f).reciprocal(), "div");
}
Tensor Tensor::pow(const Tensor& o) const {
  const DType f = float_type(promote(dtype(), o.dtype()));
  return binary_op(Op::Pow, cast(f), o.cast(f), "pow");
}
Tensor Tensor::maximum(const Tensor& o) const { return binary_op(Op::Max, *this, o, "maximum"); }
Tensor Tensor::minimum(const Tensor& o) const { return binary_op(Op::Max, -*this, -o, "minimum").neg(); }
Tensor Tensor::eq(const Tensor& o) const { return binary_op(Op::CmpEq, *this, o, "eq"); }
Tensor Tensor::ne(const Tensor& o) const { return where(eq(o), Tensor::full({}, 0, DType::boolean, device()), Tensor::full({}, 1, DType::boolean, device())); }
Tensor Tensor::lt(const Tensor& o) const { return binary_op(Op::CmpLt, *this, o, "lt"); }
Tensor Tensor::gt(const Tensor& o) const { return binary_op(Op::CmpLt, o, *this, "gt"); }
Tensor Tensor::le(const Tensor& o) const { return o.lt(*this).ne(Tensor::full({}, 1, DType::boolean, device())); }
Tensor Tensor::ge(const Tensor& o) const { return lt(o).ne(Tensor::full({}, 1, DType::boolean, device())); }

static Tensor scalar_like(const Tensor& t, double v) {
  DType type = is_float(t.dtype()) || v == std::floor(v) ? t.dtype() : DType::f32;
  return Tensor(constant_node(v, {}, type, t.device()));
}
Tensor Tensor::add(double v) const { return add(scalar_like(*this, v)); }
Tensor Tensor::sub(double v) const { return add(scalar_like(*this, -v)); }
Tensor Tensor::mul(double v) const { return mul(scalar_like(*this, v)); }
Tensor Tensor::div(double v) const {
  const DType f = float_type(dtype());
  return cast(f).mul(Tensor::scalar(1.0 / v, f, device()));
}
Tensor Tensor::pow(double v) const { return pow(Tensor::scalar(v, float_type(dtype()), device())); }
Tensor Tensor::maximum(double v) const { return maximum(scalar_like(*this, v)); }
Tensor Tensor::minimum(double v) const { return minimum(scalar_like(*this, v)); }

Tensor Tensor::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape s = broadcast_shape(broadcast_shape(cond.shape(), a.shape(), "where"), b.shape(), "where");
  DType t = is_float(a.dtype()) || is_float(b.dtype()) ? promote(a.dtype(), b.dtype()) : a.dtype();
  Tensor c = cond.cast(DType::boolean).expand(s), x = a.cast(t).expand(s), y = b.cast(t).expand(s);
  return Tensor(make(Op::Where, {c.node(), x.node(), y.node()}, s, t));
}


// ----------------------------------------------------------- reductions ----

// The start of a maximum: below every value of the type.
static double lowest_value(DType t) {
  return is_float(t) ? -INFINITY : t == DType::boolean ? 0.0 : double(std::numeric_limits<int32_t>::min());
}

// A reduction of `t` over `axes`, one of which has no elements: each output
// is the fold's start, 0 or the lowest value, and no kernel loops over an
// empty axis. Where `t` needs a gradient the result stays in its graph: `t`
// padded to one zero along its empty axes, summed over the rest, adds zeros.
static Tensor reduce_nothing(Op op, const Tensor& t, const std::vector<int>& axes, const Shape& kept) {
  Tensor start = Tensor::full(kept, op == Op::Sum ? 0.0 : lowest_value(t.dtype()), t.dtype(), t.device());
  if (!t.requires_grad_enabled()) return start;
  std::vector<std::pair<int64_t, int64_t>> grow(size_t(t.ndim()), {0, 0});
  std::vector<int> rest;
  for (int a : axes) {
    if (t.shape()[a] == 0) grow[a].second = 1;
    else rest.push_back(a);
  }
  Tensor zeros = t.pad(grow);
  return start + (rest.empty() ? zeros : zeros.sum(rest, true));
}

static Tensor reduce_op(Op op, const Tensor& x, const std::vector<int>& axes, bool keepdim, const char* what) {
  auto ax = norm_axes(axes, x.shape(), what);
  Shape kept = x.shape();
  for (int a : ax) kept[a] = 1;
  Tensor t = x;
  if (op == Op::Sum && t.dtype() == DType::boolean) t = t.cast(DType::i32);
  const bool over_nothing = std::any_of(ax.begin(), ax.end(), [&](int a) { return x.shape()[a] == 0; });
  Tensor r = ax.empty()      ? t
             : over_nothing ? reduce_nothing(op, t, ax, kept)
                            : Tensor(make(op, {t.node()}, kept, t.dtype(), std::vector<int64_t>(ax.begin(), ax.end())));
  if (keepdim) return r;
  Shape s;
  for (int i = 0; i < x.ndim(); ++i)
    if (std::find(ax.begin(), ax.end(), i) == ax.end()) s.push_back(x.shape()[i]);
  return r.reshape(s);
}

Tensor Tensor::sum(const std::vector<int>& axes, bool keepdim) const { return reduce_op(Op::Sum, *this, axes, keepdim, "sum"); }
Tensor Tensor::max(const std::vector<int>& axes, bool keepdim) const {
  return reduce_op(Op::ReduceMax, *this, axes, keepdim, "max");
}
Tensor Tensor::mean(const std::vector<int>& axes, bool keepdim) const {
  auto ax = norm_axes(axes, shape(), "mean");
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  return cast(float_type(dtype())).sum(axes, keepdim) * (n ? 1.0 / double(n) : NAN);
}
Tensor Tensor::var(const std::vector<int>& axes, bool keepdim, int correction) const {
  auto ax = norm_axes(axes, shape(), "var");
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  Tensor x = cast(float_type(dtype()));
  Tensor d = x - x.mean(axes, true);
  return (d * d).sum(axes, keepdim) / double(std::max<int64_t>(n - correction, 0));
}
Tensor Tensor::std(const std::vector<int>& axes, bool keepdim, int correction) const {
  return var(axes, keepdim, correction).sqrt();
}
Tensor Tensor::argmax(int axis, bool keepdim) const {
  int a = norm_axis(axis, ndim(), shape(), "argmax");
  int64_t n = shape()[a];
  Shape others = shape();
  others.erase(others.begin() + a);
  if (n == 0 && tl::numel(others) > 0)
    throw ShapeError("argmax: axis " + std::to_string(axis) + " of a tensor of shape " + shape_str(shape()) +
                     " has no elements, so it has no largest");
  Tensor x = cast(float_type(dtype())).detach();
  Tensor m = x.max({a}, true);
  Shape s(ndim(), 1);
  s[a] = n;
  // the first maximum has the largest (n - index)
  Tensor rev = Tensor::arange(double(n), 0, -1, DType::f32, device()).reshape(s);
  Tensor score = where(x.eq(m), rev, like(rev, 0));
  return (double(n) - score.max({a}, keepdim)).cast(DType::i32);
}

}  // namespace tl
