#include "core/depthwise.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/codegen/templates.h"
#include "core/error.h"
#include "core/runtime/registry.h"
#include "core/settings.h"
#include "core/tensor_internal.h"
#include "core/tree_reduce.h"

namespace tl {

namespace {

// Strided outputs at least this wide read their input through the pad.
constexpr int64_t kThroughPadFrom = 8;

int64_t out_size(int64_t in, std::pair<int64_t, int64_t> pad, int64_t kernel, int64_t stride, int64_t dilation) {
  const int64_t span = in + pad.first + pad.second - (kernel - 1) * dilation - 1;
  if (span < 0)
    throw ShapeError("convolution window: kernel " + std::to_string(kernel) + " (dilation " + std::to_string(dilation) +
                     ") is larger than the padded input of " + std::to_string(in + pad.first + pad.second));
  return span / stride + 1;
}

void check_window(const Tensor& x, const Window2d& g) {
  if (x.ndim() != 4) throw ShapeError("convolution window: input " + shape_str(x.shape()) + " is not (N, C, H, W)");
  for (int64_t v : {g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w})
    if (v < 1) throw ShapeError("convolution window: kernel, stride and dilation must be at least 1");
  for (int64_t v : {g.pad_h.first, g.pad_h.second, g.pad_w.first, g.pad_w.second})
    if (v < 0) throw ShapeError("convolution window: negative padding");
}

// A lazy zero pad of x's spatial axes (an ONNX Pad node before the Conv)
// joins the window's own padding, and the taps read what it pads: a strided
// window can then read through the pad instead of a padded copy.
void absorb_zero_pad(Tensor& x, Window2d& g) {
  const Node& n = *x.node();
  if (n.op != Op::Pad || n.realized() || n.value != 0 || std::signbit(n.value) || n.src.size() != 1 ||
      n.arg.size() != 8 || n.arg[0] || n.arg[1] || n.arg[2] || n.arg[3])
    return;
  g.pad_h.first += n.arg[4], g.pad_h.second += n.arg[5];
  g.pad_w.first += n.arg[6], g.pad_w.second += n.arg[7];
  x = Tensor(n.src[0]);
}

// The terms summed as a balanced tree (core/tree_reduce.h), in the order
// the ONNX ops add theirs: a chain of K*K adds would be as deep as the
// kernel is large; the tree is log2(K*K) deep.
Tensor tree_sum(const std::vector<Tensor>& terms) {
  TreeReduce sum{[](const Tensor& a, const Tensor& b) { return a + b; }, {}};
  for (const Tensor& t : terms) sum.add(t);
  return sum.result();
}

// x (N, C, H, W) with `before` zeros ahead of each spatial axis and zeros
// after it up to `total` rows and columns (cut back where the input reaches
// past what the window reads).
// `through_pad`: x is computed into its own buffer and the pad stays a lazy
// view (the renderer turns it into index ranges); else the padded image is
// copied once.
Tensor pad_to(Tensor x, std::pair<int64_t, int64_t> before, std::pair<int64_t, int64_t> total, bool through_pad) {
  if (through_pad) x = x.contiguous();
  const int64_t end_h = total.first - before.first - x.dim(2), end_w = total.second - before.second - x.dim(3);
  if (end_h < 0) x = x.slice(2, 0, x.dim(2) + end_h);
  if (end_w < 0) x = x.slice(3, 0, x.dim(3) + end_w);
  x = x.pad({{0, 0}, {0, 0}, {before.first, std::max<int64_t>(end_h, 0)}, {before.second, std::max<int64_t>(end_w, 0)}});
  return through_pad ? x : x.contiguous();
}

// Stride 1 on a narrow map (14x14, 7x7: rows too short for a vector loop):
// each padded image is one flat row, tap (kh, kw) that row shifted by
// kh * DH * PW + kw * DW, PW the padded width: an unguarded load, affine in
// one long loop that vectorises. Output (i, j) sits at i * PW + j; the PW - OW
// positions per row that straddle the border are computed and dropped by the
// final slice (the consumer's GEMM wants a dense operand anyway). One more
// row of zeros at the bottom holds the last tap's overhang of (KW - 1) * DW.
// The padded copy also applies the producer's bias and activation.
Tensor flat_rows(const Tensor& x, const Tensor& weight, const Window2d& g, int64_t OH, int64_t OW) {
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t PH = x.dim(2) + g.pad_h.first + g.pad_h.second, PW = x.dim(3) + g.pad_w.first + g.pad_w.second;
  const Tensor flat =
      x.pad({{0, 0}, {0, 0}, {g.pad_h.first, g.pad_h.second + 1}, g.pad_w}).contiguous().reshape({N, C, (PH + 1) * PW});
  std::vector<Tensor> terms;
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const int64_t t = kh * g.kernel_w + kw, shift = kh * g.dilation_h * PW + kw * g.dilation_w;
      terms.push_back(flat.slice(2, shift, shift + OH * PW) * weight.slice(0, t, t + 1).reshape({1, C, 1}));
    }
  return tree_sum(terms).contiguous().reshape({N, C, OH, PW}).slice(3, 0, OW);
}

// The rows and columns of the padded input that an output of OH x OW reads.
std::pair<int64_t, int64_t> window_extent(const Window2d& g, int64_t OH, int64_t OW) {
  return {(OH - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1,
          (OW - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1};
}

// Tap (kh, kw) of padded input xp for an output of OH x OW, in the order
// kh * KW + kw: xp from (kh * DH, kw * DW) on, every SH-th row and SW-th
// column.
std::vector<Tensor> tap_views(const Tensor& xp, const Window2d& g, int64_t OH, int64_t OW) {
  std::vector<Tensor> out;
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const int64_t r = kh * g.dilation_h, c = kw * g.dilation_w;
      out.push_back(xp.slice(2, r, r + (OH - 1) * g.stride_h + 1, g.stride_h)
                        .slice(3, c, c + (OW - 1) * g.stride_w + 1, g.stride_w));
    }
  return out;
}

// The taps' views (window_taps) of an output of OH x OW: tap (kh, kw) is the
// padded input from (kh * DH, kw * DW) on, every SH-th row and SW-th column.
// - stride 1, or strided rows narrower than kThroughPadFrom: the views read a
//   padded copy (which also applies the producer's bias and activation), and
//   each row is one vector loop. The copy is the size of the output, small
//   next to the K*K reads; reading through the pad would leave guarded
//   columns at both ends of every row (2 of 7 or 14 for a 5x5).
// - strided, wider rows: the input is computed once into its own unpadded
//   buffer (the producing GEMM's store applies bias and activation) and read
//   through a lazy pad, which the renderer turns into index ranges: a guarded
//   column or two at the ends of each row and an unguarded vector loop
//   between. A padded copy would cost a pass over an input four times the
//   output's size.
// `guarded`: read through the pad at any stride and width (guarded_form).
std::vector<Tensor> strided_views(const Tensor& x, const Window2d& g, int64_t OH, int64_t OW, bool guarded = false) {
  const bool through_pad = guarded || ((g.stride_h > 1 || g.stride_w > 1) && OW >= kThroughPadFrom);
  return tap_views(pad_to(x, {g.pad_h.first, g.pad_w.first}, window_extent(g, OH, OW), through_pad), g, OH, OW);
}

// The taps' views times their weights, summed as a balanced tree.
Tensor tap_sum(const Tensor& x, const Tensor& weight, const Window2d& g, int64_t OH, int64_t OW, bool guarded) {
  std::vector<Tensor> terms = strided_views(x, g, OH, OW, guarded);
  for (size_t t = 0; t < terms.size(); ++t)
    terms[t] = terms[t] * weight.slice(0, int64_t(t), int64_t(t) + 1).reshape({1, x.dim(1), 1, 1});
  return tree_sum(terms);
}

// A GPU computes every output in a work-item of its own, where reading
// through the pad costs one predicated load per tap; a padded copy costs a
// kernel and a pass over memory, and on narrow maps the flat rows cost a
// slice after them. So a GPU gets the window as one kernel that reads its
// input through the pad at every stride and width (for Lite0: 53 kernels
// instead of 75). A GPU whose GEMM template gathers planes (CUDA's
// kernels/depthwise.cu) takes by_gather instead: one kernel that stages each
// block's cells in shared memory and reads them there for every tap.
// TINYLENS_DEPTHWISE=guarded gives any device this form (CI tests it on PoCL
// and the C device), =padded the other one (to compare).
bool guarded_form(const Tensor& x) {
  if (setting_equals("TINYLENS_DEPTHWISE", "guarded")) return true;
  if (setting_equals("TINYLENS_DEPTHWISE", "padded")) return false;
  const Device& device = Registry::instance().get(x.device());
  return device.info().kind == "GPU" && !gemm_template_gathers_planes(device);
}

// On a device whose GEMM template gathers planes (the C device, CUDA): N x C one-row
// products over the channels' planes, one kernel with no copy of the input
// (detail::depthwise_by_gather). Undefined elsewhere.
Tensor by_gather(const Tensor& x, const Tensor& weight, const Window2d& g, int64_t OH, int64_t OW) {
  if (!gemm_template_gathers_planes(Registry::instance().get(x.device()))) return Tensor();
  ConvGather window;
  window.kernel_h = g.kernel_h, window.kernel_w = g.kernel_w;
  window.stride_h = g.stride_h, window.stride_w = g.stride_w;
  window.dilation_h = g.dilation_h, window.dilation_w = g.dilation_w;
  window.pad_top = g.pad_h.first, window.pad_left = g.pad_w.first;
  return detail::depthwise_by_gather(pad_to(x, {g.pad_h.first, g.pad_w.first}, window_extent(g, OH, OW), true), x,
                                     weight, window, gemm_template_wraps_a(Registry::instance().get(x.device())));
}

}  // namespace

Tensor max_pool_by_gather(Tensor x, const Window2d& g) {
  check_window(x, g);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), K = g.kernel_h * g.kernel_w;
  if (x.dtype() != DType::f32 || K < 2 || !detail::plane_fits_int(H, W) ||
      !gemm_template_gathers_planes(Registry::instance().get(x.device())))
    return Tensor();
  const int64_t OH = out_size(H, g.pad_h, g.kernel_h, g.stride_h, g.dilation_h);
  const int64_t OW = out_size(W, g.pad_w, g.kernel_w, g.stride_w, g.dilation_w);
  // The image is a GEMM operand, which the scheduler stores (row-major) in
  // a buffer of its own, or reads where it is stored already. A copy that
  // only stores a computed value (the caller's contiguous()) would be
  // stored a second time beside it when that value has other readers too (a
  // Concat that a convolution also reads): the value itself is the operand.
  // A view (a movement op) is copied once.
  auto stored_as_is = [](const Node& m) { return m.realized() || !is_movement(m.op); };
  const NodeRef& n = x.node();
  if (!n->realized() && n->op == Op::Contiguous && stored_as_is(*n->src[0]))
    x = Tensor(n->src[0]);
  else if (!stored_as_is(*n))
    x = x.contiguous();
  // The value as the graph states it (autograd differentiates it): the
  // taps of x padded with -inf, a balanced tree of maxima.
  const Tensor xp = x.pad({{0, 0}, {0, 0}, g.pad_h, g.pad_w}, -INFINITY);
  TreeReduce largest{[](const Tensor& a, const Tensor& b) { return a.maximum(b); }, {}};
  for (const Tensor& tap : tap_views(xp, g, OH, OW)) largest.add(tap);
  Tensor y = largest.result();
  // ... and as the scheduler computes it: N x C one-row "products" whose B
  // is gathered from each plane and maxed (ConvGather::max). A pool has no
  // weights: A names the image again and is not read (a constant made here
  // would be a new tensor at every call, which the Jit cannot replay).
  auto hint = std::make_shared<MatmulHint>();
  hint->a = hint->b = hint->image = x.node();
  hint->batch = N * C, hint->m = 1, hint->n = OH * OW, hint->k = K;
  hint->b_strides[0] = H * W;
  ConvGather& w = hint->gather;
  w.channels = 1, w.height = H, w.width = W;
  w.kernel_h = g.kernel_h, w.kernel_w = g.kernel_w, w.stride_h = g.stride_h, w.stride_w = g.stride_w;
  w.dilation_h = g.dilation_h, w.dilation_w = g.dilation_w, w.pad_top = g.pad_h.first, w.pad_left = g.pad_w.first;
  w.out_w = OW, w.max = true;
  hint->gather_only = true;
  y.node()->matmul = hint;
  return y;
}

std::vector<Tensor> window_taps(const Tensor& x, const Window2d& g) {
  check_window(x, g);
  return strided_views(x, g, out_size(x.dim(2), g.pad_h, g.kernel_h, g.stride_h, g.dilation_h),
                       out_size(x.dim(3), g.pad_w, g.kernel_w, g.stride_w, g.dilation_w));
}

Tensor depthwise_conv2d(Tensor x, const Tensor& weight, const Tensor& bias, Window2d g) {
  check_window(x, g);
  absorb_zero_pad(x, g);
  const int64_t C = x.dim(1);
  if (weight.shape() != Shape{g.kernel_h * g.kernel_w, C})
    throw ShapeError("depthwise convolution: weight " + shape_str(weight.shape()) + " is not (" +
                     std::to_string(g.kernel_h * g.kernel_w) + " taps, " + std::to_string(C) + " channels)");
  if (bias.defined() && bias.numel() != C)
    throw ShapeError("depthwise convolution: " + std::to_string(bias.numel()) + " biases for " + std::to_string(C) +
                     " channels");
  const int64_t OH = out_size(x.dim(2), g.pad_h, g.kernel_h, g.stride_h, g.dilation_h);
  const int64_t OW = out_size(x.dim(3), g.pad_w, g.kernel_w, g.stride_w, g.dilation_w);
  const bool guarded = guarded_form(x);
  Tensor y = guarded ? tap_sum(x, weight, g, OH, OW, true) : by_gather(x, weight, g, OH, OW);
  if (!y.defined())
    y = g.stride_h == 1 && g.stride_w == 1 && OW < kFlatDepthwiseBelow ? flat_rows(x, weight, g, OH, OW)
                                                                      : tap_sum(x, weight, g, OH, OW, false);
  return bias.defined() ? y + bias.reshape({1, C, 1, 1}) : y;
}

}  // namespace tl
