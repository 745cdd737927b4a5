// Depthwise 2-D convolution (one filter per channel), shared by the native
// EfficientNet-Lite0 and the ONNX Conv with group == channels. It is one
// elementwise kernel of K*K multiply-adds over views of the input; how the
// views are taken decides what the renderer can vectorise (see depthwise.cpp).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tl {

// A 2-D convolution window: kernel, stride and dilation per spatial axis
// (rows, columns), and the zeros added before and after each.
struct Window2d {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  std::pair<int64_t, int64_t> pad_h{0, 0}, pad_w{0, 0};
};

// Stride-1 outputs narrower than this are computed as one flat row per image.
constexpr int64_t kFlatDepthwiseBelow = 16;

// Every tap (kh, kw) of the window over x (N, C, H, W), in the order
// kh * KW + kw, as an (N, C, OH, OW) view of the zero-padded input, read the
// way that renders best (see depthwise.cpp).
std::vector<Tensor> window_taps(const Tensor& x, const Window2d& g);

// y[n, c, i, j] = bias[c] + sum over taps (kh, kw) of weight[kh * KW + kw, c] *
// x[n, c, i * SH + kh * DH - PT, j * SW + kw * DW - PL], zero outside x.
// x is (N, C, H, W); weight (KH * KW, C), tap-major; bias (C) or undefined.
// The taps are summed as a balanced tree (core/tree_reduce.h), the bias
// added last. Throws ShapeError on inconsistent shapes.
// A lazy zero pad of x's spatial axes is read through like the window's own.
Tensor depthwise_conv2d(Tensor x, const Tensor& weight, const Tensor& bias, Window2d g);

// y[n, c, i, j] = the largest of x[n, c, i * SH + kh * DH - PT, j * SW + kw * DW - PL]
// over the taps inside x (padding is left out; NaN wins). Where the device's
// GEMM template gathers planes (the C device, CUDA), one kernel that reads x's planes in
// place, the window's rows and columns in one pass; undefined elsewhere, for
// other than float32, or for a window of one tap (the caller's generic
// windows are then as good).
Tensor max_pool_by_gather(Tensor x, const Window2d& g);

}  // namespace tl
