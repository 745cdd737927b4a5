#include "core/nn/layers.h"

#include "core/realize.h"

#include <cmath>

#include "core/error.h"

namespace tl::nn {

namespace {
Tensor init_uniform(const Shape& shape, int64_t fan_in, Generator& gen, const std::string& device) {
  double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  Tensor t = Tensor::uniform(shape, -bound, bound, gen, device);
  t.realize();
  return t;
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, Generator& gen, bool with_bias, const std::string& device) {
  if (in < 1 || out < 1)
    throw ShapeError("Linear: features must be positive, got " + std::to_string(in) + " -> " + std::to_string(out));
  weight = init_uniform({out, in}, in, gen, device);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = init_uniform({out}, in, gen, device);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) {
  if (x.ndim() < 1 || x.dim(-1) != weight.dim(1))
    throw ShapeError("Linear: input " + shape_str(x.shape()) + " does not end in " + std::to_string(weight.dim(1)) +
                     " features");
  return x.linear(weight, bias);
}

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, Generator& gen, int64_t stride, int64_t padding, bool with_bias,
               const std::string& device) {
  if (in < 1 || out < 1 || k < 1 || stride < 1 || padding < 0)
    throw ShapeError("Conv2d: invalid configuration in=" + std::to_string(in) + " out=" + std::to_string(out) +
                     " kernel=" + std::to_string(k) + " stride=" + std::to_string(stride) +
                     " padding=" + std::to_string(padding));
  int64_t fan_in = in * k * k;
  weight = init_uniform({out, in, k, k}, fan_in, gen, device);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = init_uniform({out}, fan_in, gen, device);
    register_parameter("bias", bias);
  }
  options.stride_h = options.stride_w = stride;
  options.pad_h = options.pad_w = padding;
}

// The columns (im2col), (C*k*k, N*OH*OW), are materialised with contiguous()
// inside the autograd graph. Their value comes from the sliding-window view
// (Tensor::windows2d): each column element is one load. Their gradient
// flows through the same columns written as a stack of k*k strided slices
// (Tensor::with_gradient_of), whose backward adds k*k padded slices of the
// columns' gradient; differentiated through the window view itself, the
// input's gradient indexes through that view's whole chain of reshapes and
// expands (measured: 45 ms more per training step of the digits CNN),
// while the stack's forward is a sum of k*k zero-padded pieces, k*k guarded
// loads per element (28% of the step's kernel time when it was the value).
// The copy is made in the columns' six-axis shape (C, k, k, N, OH, OW) and
// flattened afterwards: its kernel then loops over each axis instead of
// dividing a flattened index (measured 3.0 against 16.8 ms for the 32->32
// layer of the digits CNN, batch 32).
//
// The batch sits inside the columns rather than in front of them: the
// forward pass and both gradients are then one GEMM each (the weight
// gradient's inner size is N*OH*OW), instead of N small GEMMs whose weight
// gradients a further kernel sums over the batch.
Tensor Conv2d::forward(const Tensor& input) {
  if (input.ndim() != 4 || input.dim(1) != weight.dim(1))
    throw ShapeError("Conv2d: input " + shape_str(input.shape()) + " must be (N, " + std::to_string(weight.dim(1)) +
                     ", H, W)");
  int64_t N = input.dim(0), C = weight.dim(1), O = weight.dim(0), k = weight.dim(2), s = options.stride_h;
  if (k == 1 && s == 1) return input.conv2d(weight, bias, options);
  // The padded input (channels first) is realized on its own: the columns
  // below sum k*k padded slices, and each element of that sum evaluates
  // every slice's expression, so whatever is fused into them (the previous
  // layer's batch-norm and ReLU, the padding's bounds checks) would run k*k
  // times per column element instead of once per input element.
  Tensor x = input.permute({1, 0, 2, 3});
  int64_t p = options.pad_h;
  if (p) x = x.pad({{0, 0}, {0, 0}, {p, p}, {p, p}});
  x = x.contiguous();
  int64_t H = x.dim(2), W = x.dim(3);
  if (H < k || W < k)
    throw ShapeError("Conv2d: input " + shape_str(input.shape()) + " (padded " + std::to_string(p) +
                     ") is smaller than the " + std::to_string(k) + "x" + std::to_string(k) + " kernel");
  int64_t OH = (H - k) / s + 1, OW = (W - k) / s + 1;
  // (C, N, OH, OW, k, k) -> (C, k, k, N, OH, OW): row c*k*k + i*k + j
  // matches weight.reshape(O, C*k*k)
  Tensor cols = x.windows2d(k, k, s, s).permute({0, 4, 5, 1, 2, 3});
  if (cols.requires_grad_enabled()) {
    std::vector<Tensor> taps;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j)
        taps.push_back(x.slice(2, i, i + s * (OH - 1) + 1, s).slice(3, j, j + s * (OW - 1) + 1, s));
    cols = cols.with_gradient_of(Tensor::stack(taps, 1).reshape(cols.shape()));
  }
  cols = cols.contiguous().reshape({C * k * k, N * OH * OW});
  Tensor out = weight.reshape({O, C * k * k}).matmul(cols).reshape({O, N, OH, OW}).permute({1, 0, 2, 3});
  if (bias.defined()) out = out + bias.reshape({1, O, 1, 1});
  return out;
}

BatchNorm2d::BatchNorm2d(int64_t channels, double momentum, double eps, const std::string& device)
    : momentum(momentum), eps(eps) {
  if (channels < 1) throw ShapeError("BatchNorm2d: channels must be positive, got " + std::to_string(channels));
  weight = Tensor::ones({channels}, DType::f32, device).realize();
  bias = Tensor::zeros({channels}, DType::f32, device).realize();
  running_mean = Tensor::zeros({channels}, DType::f32, device).realize();
  running_var = Tensor::ones({channels}, DType::f32, device).realize();
  num_batches_tracked = Tensor::zeros({}, DType::f32, device).realize();
  register_parameter("weight", weight);
  register_parameter("bias", bias);
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
  register_buffer("num_batches_tracked", num_batches_tracked);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (x.ndim() != 4 || x.dim(1) != weight.dim(0))
    throw ShapeError("BatchNorm2d: input " + shape_str(x.shape()) + " must be (N, " + std::to_string(weight.dim(0)) +
                     ", H, W)");
  if (training()) {
    NoGrad ng;
    Tensor n = num_batches_tracked + 1.0;
    realize_then({n.node()}, [this, n] { num_batches_tracked = n; });
  }
  return x.batch_norm(weight, bias, running_mean, running_var, training(), momentum, eps);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  if (stride != kernel) return x.max_pool2d(kernel, stride);
  if (x.ndim() != 4 || x.dim(2) < kernel || x.dim(3) < kernel)
    throw ShapeError("MaxPool2d: input " + shape_str(x.shape()) + " must be (N, C, H, W) with H, W >= " +
                     std::to_string(kernel));
  int64_t N = x.dim(0), C = x.dim(1), oh = x.dim(2) / kernel, ow = x.dim(3) / kernel;
  Tensor t = x;
  // PyTorch's floor mode drops the rows and columns that do not fill a window
  if (oh * kernel != x.dim(2)) t = t.slice(2, 0, oh * kernel);
  if (ow * kernel != x.dim(3)) t = t.slice(3, 0, ow * kernel);
  return t.reshape({N, C, oh, kernel, ow, kernel}).max({3, 5});
}

}  // namespace tl::nn
