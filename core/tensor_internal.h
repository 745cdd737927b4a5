// Helpers shared by the files that implement Tensor (tensor.cpp,
// tensor_movement.cpp, tensor_nn.cpp, autograd.cpp, depthwise.cpp). Not part of the API:
// code outside those files uses tensor.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/device.h"
#include "core/tensor.h"

namespace tl::detail {

int norm_axis(int axis, int ndim, const Shape& shape, const char* what);
std::vector<int> norm_axes(const std::vector<int>& axes, const Shape& shape, const char* what);
int64_t add_sizes(int64_t a, int64_t b, const std::string& what);
int64_t mul_sizes(int64_t a, int64_t b, const std::string& what);
NodeRef make(Op op, std::vector<NodeRef> src, Shape shape, DType dtype, std::vector<int64_t> arg = {},
             double value = 0);
const NodeRef& need(const NodeRef& n);
Shape broadcast_shape(const Shape& a, const Shape& b, const char* what);
// Split-K GEMMs (tensor_nn.cpp): how many slices of K a product of one
// (m, k) x (k, n) pair runs as on a device like `info` (1: not split), and
// the split product itself.
int64_t split_k_parts(const DeviceInfo& info, int64_t batch, int64_t m, int64_t n, int64_t k);
Tensor matmul_split_k(const Tensor& a, const Tensor& b, int64_t parts);
// A depthwise convolution of `image` (1, C, H, W) with `weight` (taps, C),
// `padded` the image padded to the rows and columns the window reads: the
// windows times the taps, summed, marked (a gather-only MatmulHint) as N x C
// one-row GEMMs whose B is gathered from each channel's plane by `window`
// (its sizes filled in here), which a template that gathers computes as one
// kernel. With `wrap_a` (a template that reads MatmulHint::a_period), N
// images read the C channels' weights in place instead of a copy per image.
// Undefined where that does not apply (tensor_nn.cpp; used by
// core/depthwise.cpp).
Tensor depthwise_by_gather(const Tensor& padded, const Tensor& image, const Tensor& weight, ConvGather window,
                           bool wrap_a = false);
// Whether the GEMM library can gather from an image plane of h x w: it
// indexes the plane, and rows and columns around it, in int.
bool plane_fits_int(int64_t h, int64_t w);

}  // namespace tl::detail
