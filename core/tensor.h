// The user-facing tensor. Lazy: every operation records a node; nothing runs
// until realize() or a read. Everything here lowers to the primitives in ops.h.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/ops.h"

namespace tl {

// Seeded host-side random generator: same seed, same numbers, any device.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  void seed(uint64_t s) { engine_.seed(s); }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

struct Conv2dOptions {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;  // symmetric; pad explicitly for other schemes
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(NodeRef node) : node_(std::move(node)) {}

  // ---- creation ("" = the default device) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, const std::string& device = "");
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, const std::string& device = "");
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, const std::string& device = "");
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, const std::string& device = "");
  static Tensor arange(double start, double stop, double step = 1, DType dtype = DType::f32, const std::string& device = "");
  static Tensor arange(int64_t n, const std::string& device = "") { return arange(0, double(n), 1, DType::f32, device); }
  static Tensor eye(int64_t n, const std::string& device = "");
  static Tensor rand(const Shape& shape, Generator& gen, const std::string& device = "");   // U[0, 1)
  static Tensor randn(const Shape& shape, Generator& gen, const std::string& device = "");  // N(0, 1)
  static Tensor uniform(const Shape& shape, double low, double high, Generator& gen, const std::string& device = "");
  static Tensor from_data(const std::vector<float>& data, const Shape& shape, const std::string& device = "");
  static Tensor from_doubles(const std::vector<double>& data, const Shape& shape, const std::string& device = "");
  static Tensor from_ints(const std::vector<int32_t>& data, const Shape& shape, const std::string& device = "");
  static Tensor scalar(double value, DType dtype = DType::f32, const std::string& device = "");

  // ---- reading back (realizes) ----
  std::vector<float> to_vector() const;     // any dtype, converted to float
  std::vector<int32_t> to_ints() const;     // any dtype, converted to int32
  std::vector<double> to_doubles() const;   // any dtype, converted to double
  float item() const;                       // exactly one element

  // ---- facts ----
  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;
  int64_t dim(int axis) const;              // negative axes count from the end
  int ndim() const { return int(shape().size()); }
  int64_t numel() const;
  DType dtype() const;
  const std::string& device() const;
  const NodeRef& node() const { return node_; }

  // ---- evaluation ----
  Tensor& realize();                         // runs the kernels this tensor needs
  // One realize for them all: what they share runs once. (A realize keeps
  // only its roots, core/replay.h, so realizing them one by one would
  // compute the shared part again for each.)
  static void realize_all(const std::vector<Tensor>& tensors);
  Tensor contiguous() const;                 // own row-major buffer
  Tensor to(const std::string& device) const;  // realizes and copies
  Tensor cast(DType dtype) const;

  // ---- elementwise unary ----
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const { return sqrt().reciprocal(); }
  Tensor reciprocal() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor relu() const { return maximum(0.0); }
  Tensor relu6() const { return maximum(0.0).minimum(6.0); }
  Tensor leaky_relu(double slope = 0.01) const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor gelu() const;                       // tanh approximation
  Tensor silu() const { return mul(sigmoid()); }
  Tensor abs() const;
  Tensor sign() const;
  Tensor clip(double low, double high) const { return maximum(low).minimum(high); }

  // ---- binary, with NumPy broadcasting ----
  Tensor add(const Tensor& o) const;
  Tensor sub(const Tensor& o) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor pow(const Tensor& o) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor add(double v) const;
  Tensor sub(double v) const;
  Tensor mul(double v) const;
  Tensor div(double v) const;
  Tensor pow(double v) const;
  Tensor maximum(double v) const;
  Tensor minimum(double v) const;
  static Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

  // ---- reductions (empty axes = all axes) ----
  Tensor sum(const std::vector<int>& axes = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int>& axes = {}, bool keepdim = false) const;
  Tensor max(const std::vector<int>& axes = {}, bool keepdim = false) const;
  Tensor min(const std::vector<int>& axes = {}, bool keepdim = false) const { return neg().max(axes, keepdim).neg(); }
  Tensor argmax(int axis, bool keepdim = false) const;  // int32; first maximum wins
  Tensor var(const std::vector<int>& axes = {}, bool keepdim = false, int correction = 1) const;
  Tensor std(const std::vector<int>& axes = {}, bool keepdim = false, int correction = 1) const;

  // ---- movement ----
  Tensor reshape(const Shape& shape) const;  // one -1 allowed
  Tensor permute(const std::vector<int>& order) const;
  Tensor transpose(int a = -2, int b = -1) const;
  Tensor expand(const Shape& shape) const;   // -1 keeps a size
  Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& padding, double value = 0) const;  // one pair per axis
  Tensor slice(int axis, int64_t start, int64_t stop, int64_t step = 1) const;  // Python semantics
  Tensor flip(const std::vector<int>& axes) const;
  static Tensor cat(const std::vector<Tensor>& tensors, int axis = 0);
  static Tensor stack(const std::vector<Tensor>& tensors, int axis = 0);
  Tensor squeeze(int axis) const;
  Tensor unsqueeze(int axis) const;
  Tensor flatten(int start = 0, int end = -1) const;

  // ---- composite ----
  Tensor matmul(const Tensor& o) const;      // 1-D, 2-D and batched, NumPy rules
  Tensor linear(const Tensor& weight, const Tensor& bias = Tensor()) const;  // x @ w.T + b
  Tensor conv2d(const Tensor& weight, const Tensor& bias = Tensor(), const Conv2dOptions& opt = {}) const;
  Tensor avg_pool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0) const;  // padding counted as zeros
  Tensor max_pool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0) const;
  Tensor adaptive_avg_pool2d(int64_t out_h, int64_t out_w) const;
  // The sliding windows of an (N, C, H, W) tensor as a view, no copy:
  // (N, C, OH, OW, KH, KW), windows that do not fit at the end left out.
  Tensor windows2d(int64_t kh, int64_t kw, int64_t stride_h = 1, int64_t stride_w = 1) const;
  // Inference uses the running statistics; training uses the batch's and
  // updates running_mean / running_var in place (momentum as in PyTorch).
  Tensor batch_norm(const Tensor& weight, const Tensor& bias, Tensor& running_mean, Tensor& running_var,
                    bool training, double momentum = 0.1, double eps = 1e-5) const;
  Tensor softmax(int axis = -1) const;
  Tensor log_softmax(int axis = -1) const;
  Tensor cross_entropy(const Tensor& targets) const;  // logits (N, C), int32 targets (N); mean
  Tensor dropout(double p, bool training, Generator& gen) const;

  // ---- autograd ----
  Tensor& requires_grad(bool on = true);
  bool requires_grad_enabled() const;
  void backward() const;                     // from a scalar
  Tensor grad() const;                       // undefined until backward()
  void zero_grad();
  Tensor detach() const;
  // This tensor's value with `twin`'s gradient: the forward pass computes
  // *this (and never schedules `twin`), backward() differentiates through
  // `twin` instead. Contract: both have the same shape, dtype and device
  // (checked) and the same values (the caller's promise, not checked), so
  // the result differentiates as either would. For a value that is fast to
  // compute but slow to differentiate, beside a twin that is the opposite
  // (nn::Conv2d's columns).
  Tensor with_gradient_of(const Tensor& twin) const;

 private:
  NodeRef node_;
};

inline Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
inline Tensor operator-(const Tensor& a) { return a.neg(); }
inline Tensor operator+(const Tensor& a, double b) { return a.add(b); }
inline Tensor operator-(const Tensor& a, double b) { return a.sub(b); }
inline Tensor operator*(const Tensor& a, double b) { return a.mul(b); }
inline Tensor operator/(const Tensor& a, double b) { return a.div(b); }
inline Tensor operator+(double a, const Tensor& b) { return b.add(a); }
inline Tensor operator-(double a, const Tensor& b) { return b.neg().add(a); }
inline Tensor operator*(double a, const Tensor& b) { return b.mul(a); }
inline Tensor operator/(double a, const Tensor& b) { return b.reciprocal().mul(a); }

// While alive, new operations record no gradient graph.
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};
bool grad_enabled();

// While alive, new nodes carry this scope name (nested scopes join with '.'),
// so the op graph can show and collapse layers.
class Scope {
 public:
  explicit Scope(const std::string& name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  static const std::string& current();

 private:
  std::string previous_;
};

// The device new tensors go to when none is named ("cpu" unless changed).
void set_default_device(const std::string& name);
const std::string& default_device();

}  // namespace tl
