#include "tensor.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "error.h"
#include "realize.h"
#include "runtime/registry.h"

namespace tl {

// ---------------------------------------------------------------- state ----

namespace {
thread_local bool grad_on = true;
thread_local std::string scope_name;
std::string default_device_name = "cpu";

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

// Every shape a node gets: no negative size, a product that fits 64 bits.
void check_shape(const Shape& shape, const char* what) {
  int64_t count = 1;
  for (auto d : shape) {
    if (d < 0) throw ShapeError(std::string(what) + ": negative size " + std::to_string(d) + " in shape " + shape_str(shape));
    if (__builtin_mul_overflow(count, d, &count))
      throw ShapeError(std::string(what) + ": shape " + shape_str(shape) + " has more elements than fit in 64 bits");
  }
}

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

NodeRef make(Op op, std::vector<NodeRef> src, Shape shape, DType dtype, std::vector<int64_t> arg = {}, double value = 0) {
  check_shape(shape, op_name(op));
  auto n = std::make_shared<Node>();
  n->op = op;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->arg = std::move(arg);
  n->value = value;
  n->scope = scope_name;
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
  auto n = make(Op::Const, {}, shape, t, {}, v);
  n->device = resolve(device);
  return n;
}

NodeRef buffer_node(const void* data, const Shape& shape, DType t, const std::string& device) {
  for (auto d : shape)
    if (d < 0) throw ShapeError("negative size in shape " + shape_str(shape));
  Device& dev = Registry::instance().get_available(resolve(device));
  auto n = make(Op::Buffer, {}, shape, t);
  n->device = dev.name();
  size_t bytes = size_t(mul_sizes(numel(shape), int64_t(dtype_size(t)), "buffer of " + shape_str(shape)));
  n->buffer = dev.allocate(bytes);
  if (data) dev.copy_in(*n->buffer, data, bytes);
  return n;
}
}  // namespace

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
  if (dtype == DType::i32) {
    std::vector<int32_t> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = int32_t(start + double(i) * step);
    return from_ints(v, {n}, device);
  }
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = float(start + double(i) * step);
  return from_data(v, {n}, device);
}

Tensor Tensor::eye(int64_t n, const std::string& device) {
  std::vector<float> v(size_t(n * n), 0.f);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.f;
  return from_data(v, {n, n}, device);
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, const std::string& device) {
  return uniform(shape, 0, 1, gen, device);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, Generator& gen, const std::string& device) {
  std::uniform_real_distribution<float> dist{float(low), float(high)};
  std::vector<float> v(size_t(tl::numel(shape)));
  for (auto& x : v) x = dist(gen.engine());
  return from_data(v, shape, device);
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, const std::string& device) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(size_t(tl::numel(shape)));
  for (auto& x : v) x = dist(gen.engine());
  return from_data(v, shape, device);
}

Tensor Tensor::from_data(const std::vector<float>& data, const Shape& shape, const std::string& device) {
  if (int64_t(data.size()) != tl::numel(shape))
    throw ShapeError("from_data: " + std::to_string(data.size()) + " values do not fill shape " + shape_str(shape));
  return Tensor(buffer_node(data.data(), shape, DType::f32, device));
}

Tensor Tensor::from_ints(const std::vector<int32_t>& data, const Shape& shape, const std::string& device) {
  if (int64_t(data.size()) != tl::numel(shape))
    throw ShapeError("from_ints: " + std::to_string(data.size()) + " values do not fill shape " + shape_str(shape));
  return Tensor(buffer_node(data.data(), shape, DType::i32, device));
}

// ---------------------------------------------------------------- facts ----

static const NodeRef& need(const NodeRef& n) {
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

template <typename T>
static std::vector<T> read_as(const Tensor& t) {
  Tensor c = t;
  c.realize();
  require_value(c);
  auto& n = *c.node();
  size_t count = size_t(tl::numel(n.shape));
  Device& dev = *n.buffer->device();
  std::vector<T> out(count);
  if (n.dtype == DType::f32) {
    std::vector<float> raw(count);
    dev.copy_out(*n.buffer, raw.data(), count * 4);
    std::copy(raw.begin(), raw.end(), out.begin());
  } else if (n.dtype == DType::i32) {
    std::vector<int32_t> raw(count);
    dev.copy_out(*n.buffer, raw.data(), count * 4);
    std::copy(raw.begin(), raw.end(), out.begin());
  } else {
    std::vector<uint8_t> raw(count);
    dev.copy_out(*n.buffer, raw.data(), count);
    std::copy(raw.begin(), raw.end(), out.begin());
  }
  return out;
}

std::vector<float> Tensor::to_vector() const { return read_as<float>(*this); }
std::vector<int32_t> Tensor::to_ints() const { return read_as<int32_t>(*this); }

float Tensor::item() const {
  if (numel() != 1) throw ShapeError("item: tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) + " elements, not 1");
  return to_vector()[0];
}

Tensor Tensor::to(const std::string& device) const {
  const std::string& target = resolve(device);
  if (target == this->device()) return *this;
  Device& dst = Registry::instance().get_available(target);
  Tensor src = *this;
  src.realize();
  require_value(src);
  size_t bytes = size_t(numel()) * dtype_size(dtype());
  std::vector<unsigned char> host(bytes);
  src.node()->buffer->device()->copy_out(*src.node()->buffer, host.data(), bytes);
  auto n = make(Op::Buffer, {}, shape(), dtype());
  n->device = dst.name();
  n->buffer = dst.allocate(bytes);
  dst.copy_in(*n->buffer, host.data(), bytes);
  return Tensor(n);
}

Tensor Tensor::cast(DType t) const {
  if (t == dtype()) return *this;
  return Tensor(make(Op::Cast, {node_}, shape(), t));
}

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
  return Tensor(make(Op::Pad, {t.node_}, ps, dtype(), grow, value));
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
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (auto& t : ts) {
    std::vector<std::pair<int64_t, int64_t>> pads(t.ndim(), {0, 0});
    pads[a] = {offset, total - offset - t.shape()[a]};
    offset += t.shape()[a];
    parts.push_back(t.pad(pads));
  }
  while (parts.size() > 1) {
    std::vector<Tensor> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(parts[i] + parts[i + 1]);
    if (parts.size() % 2) next.push_back(parts.back());
    parts = std::move(next);
  }
  return parts[0];
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) throw ShapeError("stack: no tensors given");
  int a = axis < 0 ? axis + ts[0].ndim() + 1 : axis;
  std::vector<Tensor> u;
  for (auto& t : ts) {
    if (t.shape() != ts[0].shape())
      throw ShapeError("stack: shapes " + shape_str(ts[0].shape()) + " and " + shape_str(t.shape()) + " differ");
    u.push_back(t.unsqueeze(a));
  }
  return cat(u, a);
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

// ------------------------------------------------------------ elementwise --

static Shape broadcast_shape(const Shape& a, const Shape& b, const char* what) {
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
  DType t = (a.dtype() == DType::f32 || b.dtype() == DType::f32) ? DType::f32
            : (a.dtype() == DType::i32 || b.dtype() == DType::i32) ? DType::i32 : DType::boolean;
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
  Tensor f = x.dtype() == DType::f32 ? x : x.cast(DType::f32);
  return Tensor(make(op, {f.node()}, f.shape(), DType::f32));
}

Tensor Tensor::neg() const {
  Tensor x = dtype() == DType::boolean ? cast(DType::i32) : *this;
  return Tensor(make(Op::Neg, {x.node_}, shape(), x.dtype()));
}
Tensor Tensor::exp() const { return unary_op(Op::Exp, *this); }
Tensor Tensor::log() const { return unary_op(Op::Log, *this); }
Tensor Tensor::sqrt() const { return unary_op(Op::Sqrt, *this); }
Tensor Tensor::reciprocal() const { return unary_op(Op::Recip, *this); }
Tensor Tensor::rsqrt() const { return sqrt().reciprocal(); }
Tensor Tensor::sin() const { return unary_op(Op::Sin, *this); }
Tensor Tensor::cos() const { return (cast(DType::f32) + M_PI / 2).sin(); }
Tensor Tensor::relu() const { return maximum(0.0); }
Tensor Tensor::relu6() const { return maximum(0.0).minimum(6.0); }
Tensor Tensor::leaky_relu(double slope) const { return where(gt(like(*this, 0)), *this, *this * slope); }
Tensor Tensor::sigmoid() const { return (1.0 + (-*this).exp()).reciprocal(); }
Tensor Tensor::tanh() const { return (*this * 2.0).sigmoid() * 2.0 - 1.0; }
Tensor Tensor::gelu() const {
  Tensor x = *this;
  return 0.5 * x * (1.0 + (std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)).tanh());
}
Tensor Tensor::silu() const { return *this * sigmoid(); }
Tensor Tensor::abs() const { return where(lt(like(*this, 0)), -*this, *this); }
Tensor Tensor::sign() const {
  Tensor z = like(*this, 0);
  return gt(z).cast(DType::f32) - lt(z).cast(DType::f32);
}
Tensor Tensor::clip(double low, double high) const { return maximum(low).minimum(high); }

Tensor Tensor::add(const Tensor& o) const { return binary_op(Op::Add, *this, o, "add"); }
Tensor Tensor::sub(const Tensor& o) const { return binary_op(Op::Add, *this, o.neg(), "sub"); }
Tensor Tensor::mul(const Tensor& o) const { return binary_op(Op::Mul, *this, o, "mul"); }
Tensor Tensor::div(const Tensor& o) const {
  return binary_op(Op::Mul, cast(DType::f32), o.cast(DType::f32).reciprocal(), "div");
}
Tensor Tensor::pow(const Tensor& o) const { return binary_op(Op::Pow, cast(DType::f32), o.cast(DType::f32), "pow"); }
Tensor Tensor::maximum(const Tensor& o) const { return binary_op(Op::Max, *this, o, "maximum"); }
Tensor Tensor::minimum(const Tensor& o) const { return binary_op(Op::Max, -*this, -o, "minimum").neg(); }
Tensor Tensor::eq(const Tensor& o) const { return binary_op(Op::CmpEq, *this, o, "eq"); }
Tensor Tensor::ne(const Tensor& o) const { return where(eq(o), Tensor::full({}, 0, DType::boolean, device()), Tensor::full({}, 1, DType::boolean, device())); }
Tensor Tensor::lt(const Tensor& o) const { return binary_op(Op::CmpLt, *this, o, "lt"); }
Tensor Tensor::gt(const Tensor& o) const { return binary_op(Op::CmpLt, o, *this, "gt"); }
Tensor Tensor::le(const Tensor& o) const { return o.lt(*this).ne(Tensor::full({}, 1, DType::boolean, device())); }
Tensor Tensor::ge(const Tensor& o) const { return lt(o).ne(Tensor::full({}, 1, DType::boolean, device())); }

static Tensor scalar_like(const Tensor& t, double v) {
  return Tensor(constant_node(v, {}, t.dtype() == DType::f32 || v != std::floor(v) ? DType::f32 : t.dtype(), t.device()));
}
Tensor Tensor::add(double v) const { return add(scalar_like(*this, v)); }
Tensor Tensor::sub(double v) const { return add(scalar_like(*this, -v)); }
Tensor Tensor::mul(double v) const { return mul(scalar_like(*this, v)); }
Tensor Tensor::div(double v) const { return cast(DType::f32).mul(Tensor::scalar(1.0 / v, DType::f32, device())); }
Tensor Tensor::pow(double v) const { return pow(Tensor::scalar(v, DType::f32, device())); }
Tensor Tensor::maximum(double v) const { return maximum(scalar_like(*this, v)); }
Tensor Tensor::minimum(double v) const { return minimum(scalar_like(*this, v)); }

Tensor Tensor::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Shape s = broadcast_shape(broadcast_shape(cond.shape(), a.shape(), "where"), b.shape(), "where");
  DType t = (a.dtype() == DType::f32 || b.dtype() == DType::f32) ? DType::f32 : a.dtype();
  Tensor c = cond.cast(DType::boolean).expand(s), x = a.cast(t).expand(s), y = b.cast(t).expand(s);
  return Tensor(make(Op::Where, {c.node(), x.node(), y.node()}, s, t));
}

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator+(const Tensor& a, double b) { return a.add(b); }
Tensor operator-(const Tensor& a, double b) { return a.sub(b); }
Tensor operator*(const Tensor& a, double b) { return a.mul(b); }
Tensor operator/(const Tensor& a, double b) { return a.div(b); }
Tensor operator+(double a, const Tensor& b) { return b.add(a); }
Tensor operator-(double a, const Tensor& b) { return b.neg().add(a); }
Tensor operator*(double a, const Tensor& b) { return b.mul(a); }
Tensor operator/(double a, const Tensor& b) { return b.reciprocal().mul(a); }

// ----------------------------------------------------------- reductions ----

static Tensor reduce_op(Op op, const Tensor& x, const std::vector<int>& axes, bool keepdim, const char* what) {
  auto ax = norm_axes(axes, x.shape(), what);
  Shape kept = x.shape();
  for (int a : ax) kept[a] = 1;
  Tensor t = x;
  if (op == Op::Sum && t.dtype() == DType::boolean) t = t.cast(DType::i32);
  Tensor r = ax.empty() ? t : Tensor(make(op, {t.node()}, kept, t.dtype(), std::vector<int64_t>(ax.begin(), ax.end())));
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
Tensor Tensor::min(const std::vector<int>& axes, bool keepdim) const { return (-*this).max(axes, keepdim).neg(); }
Tensor Tensor::mean(const std::vector<int>& axes, bool keepdim) const {
  auto ax = norm_axes(axes, shape(), "mean");
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  return cast(DType::f32).sum(axes, keepdim) * (n ? 1.0 / double(n) : NAN);
}
Tensor Tensor::var(const std::vector<int>& axes, bool keepdim, int correction) const {
  auto ax = norm_axes(axes, shape(), "var");
  int64_t n = 1;
  for (int a : ax) n *= shape()[a];
  Tensor x = cast(DType::f32);
  Tensor d = x - x.mean(axes, true);
  return (d * d).sum(axes, keepdim) / double(std::max<int64_t>(n - correction, 0));
}
Tensor Tensor::std(const std::vector<int>& axes, bool keepdim, int correction) const {
  return var(axes, keepdim, correction).sqrt();
}
Tensor Tensor::argmax(int axis, bool keepdim) const {
  int a = norm_axis(axis, ndim(), shape(), "argmax");
  int64_t n = shape()[a];
  Tensor x = cast(DType::f32).detach();
  Tensor m = x.max({a}, true);
  Shape s(ndim(), 1);
  s[a] = n;
  // the first maximum has the largest (n - index)
  Tensor rev = Tensor::arange(double(n), 0, -1, DType::f32, device()).reshape(s);
  Tensor score = where(x.eq(m), rev, like(rev, 0));
  return (double(n) - score.max({a}, keepdim)).cast(DType::i32);
}

// ------------------------------------------------------------ composite ----

// Describes a tensor as a strided view of a node that has (or will get) its
// own row-major buffer, so GEMM can read it without a copy.
static NodeRef strided_base(const Tensor& t, std::vector<int64_t>& strides) {
  const NodeRef& n = t.node();
  auto row_major = [](const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
    return st;
  };
  auto dense = [](const NodeRef& x) { return x->realized() || x->op == Op::Contiguous; };
  if (dense(n)) {
    strides = row_major(n->shape);
    return n;
  }
  if (n->op == Op::Reshape) {
    if (dense(n->src[0])) {
      strides = row_major(n->shape);
      return n->src[0];
    }
    // only size-1 axes added or removed: the other axes keep their strides
    Shape a, b;
    for (auto d : n->shape) if (d != 1) a.push_back(d);
    for (auto d : n->src[0]->shape) if (d != 1) b.push_back(d);
    if (a == b) {
      std::vector<int64_t> inner;
      NodeRef base = strided_base(Tensor(n->src[0]), inner);
      std::vector<int64_t> kept;
      for (size_t i = 0; i < inner.size(); ++i) if (n->src[0]->shape[i] != 1) kept.push_back(inner[i]);
      strides.clear();
      size_t j = 0;
      for (auto d : n->shape) strides.push_back(d == 1 ? 0 : kept[j++]);
      return base;
    }
    // Any other reshape: the source gets its own row-major buffer, which is
    // the reshaped tensor too. Its other readers then share that buffer, and
    // the source's kernel may be a GEMM epilogue (a convolution's batch-norm
    // feeding both the next 1x1 convolution and a residual add).
    strides = row_major(n->shape);
    return n->src[0];
  }
  if (n->op == Op::Permute) {
    std::vector<int64_t> inner;
    NodeRef base = strided_base(Tensor(n->src[0]), inner);
    strides.resize(n->arg.size());
    for (size_t i = 0; i < n->arg.size(); ++i) strides[i] = inner[n->arg[i]];
    return base;
  }
  if (n->op == Op::Expand) {
    NodeRef base = strided_base(Tensor(n->src[0]), strides);
    for (size_t i = 0; i < strides.size(); ++i)
      if (n->src[0]->shape[i] == 1 && n->shape[i] != 1) strides[i] = 0;
    return base;
  }
  // The scheduler gives every GEMM operand its own buffer, so the node itself
  // is the base; its other readers (a residual add) then share that buffer.
  strides = row_major(n->shape);
  return n;
}

Tensor Tensor::matmul(const Tensor& o) const {
  if (ndim() == 0 || o.ndim() == 0)
    throw ShapeError("matmul: operands must have at least one axis, got " + shape_str(shape()) + " and " + shape_str(o.shape()));
  Tensor a = ndim() == 1 ? unsqueeze(0) : *this;
  Tensor b = o.ndim() == 1 ? o.unsqueeze(1) : o;
  int64_t m = a.dim(-2), k = a.dim(-1), k2 = b.dim(-2), n = b.dim(-1);
  if (k != k2)
    throw ShapeError("matmul: shapes " + shape_str(shape()) + " and " + shape_str(o.shape()) + " are incompatible (" +
                     std::to_string(k) + " != " + std::to_string(k2) + ")");
  a = a.cast(DType::f32);
  b = b.cast(DType::f32);
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shape(ab, bb, "matmul");
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {m, k});
  eb.insert(eb.end(), {k, n});
  a = a.expand(ea);
  b = b.expand(eb);
  // generic form: (..., m, 1, k) * (..., 1, n, k) summed over k
  Tensor prod = a.unsqueeze(-2) * b.transpose(-1, -2).unsqueeze(-3);
  Tensor s = prod.sum({-1}, true);
  // the GEMM description of the same product
  auto hint = std::make_shared<MatmulHint>();
  std::vector<int64_t> sa, sb;
  int64_t nb = tl::numel(batch);
  Tensor a3 = a.reshape({nb, m, k}), b3 = b.reshape({nb, k, n});
  hint->a_in = a3.node();
  hint->b_in = b3.node();
  hint->a = strided_base(a3, sa);
  hint->b = strided_base(b3, sb);
  hint->batch = nb, hint->m = m, hint->n = n, hint->k = k;
  for (int i = 0; i < 3; ++i) hint->a_strides[i] = sa[i], hint->b_strides[i] = sb[i];
  if (nb == 1) hint->a_strides[0] = hint->b_strides[0] = 0;
  s.node()->matmul = hint;
  Shape out = batch;
  if (ndim() > 1) out.push_back(m);
  if (o.ndim() > 1) out.push_back(n);
  return s.reshape(out);
}

Tensor Tensor::linear(const Tensor& weight, const Tensor& bias) const {
  if (ndim() < 1 || weight.ndim() != 2 || dim(-1) != weight.dim(1))
    throw ShapeError("linear: input " + shape_str(shape()) + " does not match weight " + shape_str(weight.shape()) +
                     " (expects (out_features, in_features) with in_features = the input's last axis)");
  if (bias.defined() && (bias.ndim() != 1 || bias.dim(0) != weight.dim(0)))
    throw ShapeError("linear: bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
  Tensor y = matmul(weight.transpose(-1, -2));
  return bias.defined() ? y + bias : y;
}

// Sliding windows over the last two axes: (..., H, W) -> (..., OH, OW, KH, KW).
// Built from movement ops only: repeat the row k times, view the repetition
// with a period of (size + dilation) and keep every stride-th start.
static Tensor windows_1d(const Tensor& x, int axis, int64_t k, int64_t stride, int64_t dilation, int64_t& out) {
  int64_t size = x.dim(axis);
  if (k < 1 || stride < 1 || dilation < 1)
    throw ShapeError("window: kernel, stride and dilation must be positive (got " + std::to_string(k) + ", " +
                     std::to_string(stride) + ", " + std::to_string(dilation) + ")");
  if (stride > size) stride = size;  // one window either way; keeps the period search below short
  int64_t span = add_sizes(mul_sizes(dilation, k - 1, "window span"), 1, "window span");
  if (span > size)
    throw ShapeError("window of " + std::to_string(k) + " (dilation " + std::to_string(dilation) +
                     ") does not fit an axis of size " + std::to_string(size) + " in " + shape_str(x.shape()));
  out = (size - span) / stride + 1;
  int nd = x.ndim();
  // move `axis` last
  std::vector<int> order;
  for (int i = 0; i < nd; ++i)
    if (i != axis) order.push_back(i);
  order.push_back(axis);
  Tensor t = x.permute(order);
  Shape s = t.shape();
  Shape lead(s.begin(), s.end() - 1);
  // Positions kk*period + j of the repeated row hold x[(kk*dilation + j) % size]
  // whenever period % size == dilation % size.
  int64_t period = size + dilation;
  while (period < out * stride) period += size;
  int64_t needed = (k - 1) * period + out * stride;
  int64_t copies = (needed + size - 1) / size;
  Shape rep = lead;
  rep.insert(rep.end(), {copies, size});
  t = t.unsqueeze(-2).expand(rep);
  Shape flat = lead;
  flat.push_back(copies * size);
  t = t.reshape(flat);
  std::vector<std::pair<int64_t, int64_t>> pads(t.ndim(), {0, 0});
  pads.back().second = k * period - copies * size;  // negative crops
  t = t.pad(pads);  // (..., k * period)
  Shape kp = lead;
  kp.insert(kp.end(), {k, period});
  t = t.reshape(kp).slice(-1, 0, out * stride);  // (..., k, out*stride)
  Shape ko = lead;
  ko.insert(ko.end(), {k, out, stride});
  t = t.reshape(ko).slice(-1, 0, 1).squeeze(-1);  // (..., k, out)
  return t.transpose(-1, -2);                       // (..., out, k)
}

static Tensor windows_2d(const Tensor& x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                         int64_t& oh, int64_t& ow, const char* what, const Shape& input) {
  // x: (N, C, H, W), already padded
  if (kh < 1 || kw < 1 || dh < 1 || dw < 1 || sh < 1 || sw < 1)
    throw ShapeError(std::string(what) + ": kernel " + std::to_string(kh) + "x" + std::to_string(kw) + ", stride " +
                     std::to_string(sh) + "x" + std::to_string(sw) + " and dilation " + std::to_string(dh) + "x" +
                     std::to_string(dw) + " must be positive");
  if (mul_sizes(dh, kh - 1, what) + 1 > x.dim(2) || mul_sizes(dw, kw - 1, what) + 1 > x.dim(3))
    throw ShapeError(std::string(what) + ": a " + std::to_string(kh) + "x" + std::to_string(kw) + " window (dilation " +
                     std::to_string(dh) + "x" + std::to_string(dw) + ") does not fit input " + shape_str(input) +
                     (x.shape() != input ? " padded to " + shape_str(x.shape()) : std::string()));
  Tensor t = windows_1d(x, 3, kw, sw, dw, ow);  // (N, C, H, OW, KW)
  t = t.permute({0, 1, 3, 4, 2});               // (N, C, OW, KW, H)
  t = windows_1d(t, 4, kh, sh, dh, oh);          // (N, C, OW, KW, OH, KH)
  return t.permute({0, 1, 4, 2, 5, 3});          // (N, C, OH, OW, KH, KW)
}

Tensor Tensor::conv2d(const Tensor& weight, const Tensor& bias, const Conv2dOptions& opt) const {
  Scope scope("conv2d");
  if (ndim() != 4 || weight.ndim() != 4)
    throw ShapeError("conv2d: input " + shape_str(shape()) + " and weight " + shape_str(weight.shape()) +
                     " must both be 4-D (N, C, H, W) and (O, C/groups, KH, KW)");
  int64_t N = dim(0), C = dim(1), O = weight.dim(0), G = opt.groups, KH = weight.dim(2), KW = weight.dim(3);
  if (G < 1 || C % G || O % G || weight.dim(1) != C / G)
    throw ShapeError("conv2d: input " + shape_str(shape()) + " and weight " + shape_str(weight.shape()) +
                     " do not match for groups=" + std::to_string(G));
  if (bias.defined() && (bias.ndim() != 1 || bias.dim(0) != O))
    throw ShapeError("conv2d: bias " + shape_str(bias.shape()) + " does not match " + std::to_string(O) + " output channels");
  Tensor x = *this;
  if (opt.pad_h || opt.pad_w) x = x.pad({{0, 0}, {0, 0}, {opt.pad_h, opt.pad_h}, {opt.pad_w, opt.pad_w}});
  int64_t OH, OW;
  Tensor out;
  if (KH == 1 && KW == 1 && opt.stride_h == 1 && opt.stride_w == 1 && G == 1) {
    OH = x.dim(2), OW = x.dim(3);
    out = weight.reshape({O, C}).matmul(x.reshape({N, C, OH * OW}));
  } else {
    Tensor win = windows_2d(x, KH, KW, opt.stride_h, opt.stride_w, opt.dilation_h, opt.dilation_w, OH, OW, "conv2d",
                            shape());
    if (G == 1) {
      // (N, C, OH, OW, KH, KW) -> (N, C * KH * KW, OH * OW): im2col for one GEMM
      Tensor cols = win.permute({0, 1, 4, 5, 2, 3}).reshape({N, C * KH * KW, OH * OW});
      out = weight.reshape({O, C * KH * KW}).matmul(cols);
    } else {
      // Grouped (depthwise): multiply-adds over the taps, with OH and OW kept
      // apart so the kernel walks output rows and reads input rows with unit
      // stride instead of dividing a flattened index.
      Tensor taps = win.permute({0, 1, 4, 5, 2, 3}).reshape({N, G, C / G * KH * KW, OH, OW});
      Tensor w = weight.reshape({1, G, O / G, C / G * KH * KW, 1, 1});
      out = (taps.unsqueeze(2) * w).sum({3});  // (N, G, O/G, OH, OW)
    }
  }
  out = out.reshape({N, O, OH, OW});
  if (bias.defined()) out = out + bias.reshape({1, O, 1, 1});
  return out;
}

static void pool_check(const Tensor& x, const char* what) {
  if (x.ndim() != 4) throw ShapeError(std::string(what) + ": input " + shape_str(x.shape()) + " must be (N, C, H, W)");
}

Tensor Tensor::avg_pool2d(int64_t kernel, int64_t stride, int64_t padding) const {
  Scope scope("avg_pool2d");
  pool_check(*this, "avg_pool2d");
  if (stride == 0) stride = kernel;
  Tensor x = padding ? pad({{0, 0}, {0, 0}, {padding, padding}, {padding, padding}}) : *this;
  int64_t oh, ow;
  return windows_2d(x, kernel, kernel, stride, stride, 1, 1, oh, ow, "avg_pool2d", shape()).mean({4, 5});
}

Tensor Tensor::max_pool2d(int64_t kernel, int64_t stride, int64_t padding) const {
  Scope scope("max_pool2d");
  pool_check(*this, "max_pool2d");
  if (stride == 0) stride = kernel;
  Tensor x = padding ? pad({{0, 0}, {0, 0}, {padding, padding}, {padding, padding}}, -INFINITY) : *this;
  int64_t oh, ow;
  return windows_2d(x, kernel, kernel, stride, stride, 1, 1, oh, ow, "max_pool2d", shape()).max({4, 5});
}

Tensor Tensor::adaptive_avg_pool2d(int64_t out_h, int64_t out_w) const {
  Scope scope("adaptive_avg_pool2d");
  pool_check(*this, "adaptive_avg_pool2d");
  int64_t H = dim(2), W = dim(3);
  if (out_h < 1 || out_w < 1) throw ShapeError("adaptive_avg_pool2d: output size must be positive");
  if (out_h == 1 && out_w == 1) return mean({2, 3}, true);
  // Each output cell averages input rows [floor(i*H/oh), ceil((i+1)*H/oh)):
  // one averaging matrix per axis, applied as two matmuls.
  auto averaging = [&](int64_t in, int64_t out) {
    std::vector<float> m(size_t(out * in), 0.f);
    for (int64_t i = 0; i < out; ++i) {
      int64_t a = i * in / out, b = ((i + 1) * in + out - 1) / out;
      for (int64_t j = a; j < b; ++j) m[size_t(i * in + j)] = 1.f / float(b - a);
    }
    return Tensor::from_data(m, {out, in}, device());
  };
  Tensor ph = averaging(H, out_h), pw = averaging(W, out_w);
  return ph.matmul(matmul(pw.transpose()));
}

Tensor Tensor::batch_norm(const Tensor& weight, const Tensor& bias, Tensor& running_mean, Tensor& running_var,
                          bool training, double momentum, double eps) const {
  Scope scope("batch_norm");
  if (ndim() < 2) throw ShapeError("batch_norm: input " + shape_str(shape()) + " needs a channel axis");
  int64_t C = dim(1);
  Shape bshape(ndim(), 1);
  bshape[1] = C;
  std::vector<int> axes;
  for (int i = 0; i < ndim(); ++i)
    if (i != 1) axes.push_back(i);
  Tensor mean_t, var_t;
  if (training) {
    mean_t = mean(axes, true);
    var_t = var(axes, true, 0);
    int64_t n = numel() / C;
    NoGrad ng;
    // Inside a RealizeTogether (a training step) the new statistics realize
    // with the rest of the step and are assigned only once they exist; the
    // caller's tensors must outlive that realize.
    if (running_mean.defined()) {
      Tensor nm = (running_mean * (1 - momentum) + mean_t.detach().reshape({C}) * momentum);
      realize_then({nm.node()}, [&running_mean, nm] { running_mean = nm.detach(); });
    }
    if (running_var.defined()) {
      Tensor unbiased = var_t.detach().reshape({C}) * (double(n) / double(std::max<int64_t>(n - 1, 1)));
      Tensor nv = running_var * (1 - momentum) + unbiased * momentum;
      realize_then({nv.node()}, [&running_var, nv] { running_var = nv.detach(); });
    }
  } else {
    mean_t = running_mean.reshape(bshape);
    var_t = running_var.reshape(bshape);
  }
  Tensor y = (*this - mean_t) * (var_t + eps).rsqrt();
  if (weight.defined()) y = y * weight.reshape(bshape);
  if (bias.defined()) y = y + bias.reshape(bshape);
  return y;
}

Tensor Tensor::softmax(int axis) const {
  Scope scope("softmax");
  int a = norm_axis(axis, ndim(), shape(), "softmax");
  Tensor e = (*this - max({a}, true).detach()).exp();
  return e / e.sum({a}, true);
}

Tensor Tensor::log_softmax(int axis) const {
  Scope scope("log_softmax");
  int a = norm_axis(axis, ndim(), shape(), "log_softmax");
  Tensor shifted = *this - max({a}, true).detach();
  return shifted - shifted.exp().sum({a}, true).log();
}

Tensor Tensor::cross_entropy(const Tensor& targets) const {
  Scope scope("cross_entropy");
  if (ndim() != 2 || targets.ndim() != 1 || targets.dim(0) != dim(0))
    throw ShapeError("cross_entropy: logits " + shape_str(shape()) + " must be (N, C) and targets " +
                     shape_str(targets.shape()) + " must be (N)");
  Tensor classes = Tensor::arange(0, double(dim(1)), 1, DType::f32, device()).reshape({1, dim(1)});
  Tensor onehot = classes.eq(targets.cast(DType::f32).reshape({dim(0), 1})).cast(DType::f32);
  return -(log_softmax(1) * onehot).sum({1}).mean();
}

Tensor Tensor::dropout(double p, bool training, Generator& gen) const {
  if (!training || p <= 0) return *this;
  if (p >= 1) return *this * 0.0;
  Tensor keep = Tensor::rand(shape(), gen, device()).ge(Tensor::scalar(p, DType::f32, device()));
  return *this * keep.cast(DType::f32) * (1.0 / (1.0 - p));
}

// -------------------------------------------------------------- autograd ---

Tensor& Tensor::requires_grad(bool on) {
  need(node_)->requires_grad = on;
  return *this;
}
bool Tensor::requires_grad_enabled() const { return need(node_)->requires_grad; }
Tensor Tensor::grad() const { return need(node_)->grad ? Tensor(node_->grad) : Tensor(); }
void Tensor::zero_grad() { need(node_)->grad.reset(); }

Tensor Tensor::detach() const {
  if (!need(node_)->requires_grad) return *this;
  // a view that shares the computation but carries no gradient
  auto n = std::make_shared<Node>(*node_);
  n->id = Node::next_id();
  n->requires_grad = false;
  n->grad.reset();
  if (!n->realized()) {
    // keep the same value by wrapping: reshape to itself as a barrier
    n->op = Op::Reshape;
    n->src = {node_};
    n->arg.assign(n->shape.begin(), n->shape.end());
    n->matmul.reset();
  }
  return Tensor(n);
}

namespace {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  // undo a broadcast: sum the axes that were expanded
  std::vector<int> axes;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && g.shape()[i] != 1) axes.push_back(int(i));
  return axes.empty() ? g : g.sum(axes, true);
}

// What gradients flow to: a matmul's two operands, any other node's sources.
std::vector<NodeRef> grad_sources(const NodeRef& n) {
  if (n->matmul && n->matmul->a_in) return {n->matmul->a_in, n->matmul->b_in};
  return n->src;
}

// Gradients of one primitive with respect to each of its sources.
std::vector<Tensor> backward_rule(const NodeRef& node, const Tensor& g) {
  const auto& s = node->src;
  if (node->matmul && node->matmul->a_in) {
    const MatmulHint& h = *node->matmul;
    Tensor g3 = g.reshape({h.batch, h.m, h.n});
    Tensor a(h.a_in), b(h.b_in);
    return {g3.matmul(b.detach().transpose(-1, -2)), a.detach().transpose(-1, -2).matmul(g3)};
  }
  Tensor out(node);
  auto src = [&](int i) { return Tensor(s[i]).detach(); };
  switch (node->op) {
    case Op::Neg: return {-g};
    case Op::Exp: return {g * out.detach()};
    case Op::Log: return {g / src(0)};
    case Op::Sqrt: return {g / (out.detach() * 2.0)};
    case Op::Recip: { Tensor o = out.detach(); return {-g * o * o}; }
    case Op::Sin: return {g * src(0).cos()};
    case Op::Cast: return {s[0]->dtype == DType::f32 ? g.cast(DType::f32) : Tensor()};
    case Op::Add: return {g, g};
    case Op::Mul: return {g * src(1), g * src(0)};
    case Op::Max: {
      Tensor a = src(0), b = src(1);
      Tensor wa = a.gt(b).cast(DType::f32) + a.eq(b).cast(DType::f32) * 0.5;
      return {g * wa, g * (1.0 - wa)};
    }
    case Op::Pow: {
      Tensor a = src(0), b = src(1), o = out.detach();
      Tensor ga = g * b * a.pow(b - 1.0);
      Tensor gb = g * o * Tensor::where(a.gt(Tensor::scalar(0, DType::f32, a.device())), a, Tensor::scalar(1, DType::f32, a.device())).log();
      return {ga, gb};
    }
    case Op::CmpLt: case Op::CmpEq: return {Tensor(), Tensor()};
    case Op::Where: {
      Tensor c = src(0), z = Tensor::scalar(0, DType::f32, g.device());
      return {Tensor(), Tensor::where(c, g, z), Tensor::where(c, z, g)};
    }
    case Op::Sum: return {g.expand(s[0]->shape)};
    case Op::ReduceMax: {
      Tensor x = src(0), m = out.detach().expand(s[0]->shape);
      Tensor mask = x.eq(m).cast(DType::f32);
      std::vector<int> axes(node->arg.begin(), node->arg.end());
      Tensor count = mask.sum(axes, true);
      return {mask * (g / count).expand(s[0]->shape)};
    }
    case Op::Reshape: return {g.reshape(s[0]->shape)};
    case Op::Permute: {
      std::vector<int> inv(node->arg.size());
      for (size_t i = 0; i < inv.size(); ++i) inv[node->arg[i]] = int(i);
      return {g.permute(inv)};
    }
    case Op::Expand: return {sum_to(g, s[0]->shape)};
    case Op::Pad: {
      Tensor r = g;
      for (int i = 0; i < g.ndim(); ++i)
        r = r.slice(i, node->arg[2 * i], node->arg[2 * i] + s[0]->shape[i]);
      return {r};
    }
    case Op::Shrink: {
      std::vector<std::pair<int64_t, int64_t>> pads;
      for (size_t i = 0; i < s[0]->shape.size(); ++i)
        pads.push_back({node->arg[2 * i], s[0]->shape[i] - node->arg[2 * i + 1]});
      return {g.pad(pads)};
    }
    case Op::Flip: return {g.flip(std::vector<int>(node->arg.begin(), node->arg.end()))};
    case Op::Contiguous: return {g};
    default: return {};
  }
}

}  // namespace

void Tensor::backward() const {
  if (numel() != 1)
    throw ShapeError("backward: needs a scalar (one element), got shape " + shape_str(shape()));
  if (!node_->requires_grad) throw std::invalid_argument("backward: this tensor does not require grad");
  // topological order over nodes that need gradients
  std::vector<NodeRef> order;
  std::unordered_map<Node*, int> state;
  std::vector<std::pair<NodeRef, size_t>> stack{{node_, 0}};
  state[node_.get()] = 1;
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    auto srcs = grad_sources(n);
    if (i < srcs.size()) {
      NodeRef s = srcs[i++];
      if (s->requires_grad && !state.count(s.get())) {
        state[s.get()] = 1;
        stack.push_back({s, 0});
      }
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  NoGrad ng;
  std::unordered_map<Node*, Tensor> grads;
  grads[node_.get()] = Tensor::ones(shape(), DType::f32, device());
  std::vector<NodeRef> leaves;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeRef& n = *it;
    auto g = grads.find(n.get());
    if (g == grads.end()) continue;
    Tensor gn = g->second;
    if (n->src.empty()) {
      leaves.push_back(n);
      continue;
    }
    auto gs = backward_rule(n, gn);
    auto srcs = grad_sources(n);
    for (size_t i = 0; i < gs.size() && i < srcs.size(); ++i) {
      if (!gs[i].defined() || !srcs[i]->requires_grad) continue;
      auto [slot, fresh] = grads.try_emplace(srcs[i].get(), gs[i]);
      if (!fresh) slot->second = slot->second + gs[i];
    }
    grads.erase(n.get());
  }
  std::vector<NodeRef> to_realize;
  for (auto& leaf : leaves) {
    Tensor g = grads.at(leaf.get()).reshape(leaf->shape);
    if (leaf->grad) g = Tensor(leaf->grad) + g;
    leaf->grad = g.contiguous().node();
    to_realize.push_back(leaf->grad);
  }
  realize_nodes(to_realize);
}

}  // namespace tl
