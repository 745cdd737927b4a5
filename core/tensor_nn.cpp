// The composite ops of neural networks, lowered to primitives: matmul and
// linear, conv2d, pooling, batch norm, softmax, cross-entropy, dropout.
#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/tensor_internal.h"

namespace tl {

using namespace detail;

// ------------------------------------------------------------ composite ----

// The strides of `to` as a view of `from` laid out with strides `st`, when
// the reshape needs no copy: each run of axes of `from` that merges (or
// splits) into axes of `to` is contiguous within itself. False otherwise,
// and for no elements.
static bool view_strides(const Shape& from, const std::vector<int64_t>& st, const Shape& to,
                         std::vector<int64_t>& out) {
  Shape f;
  std::vector<int64_t> fs;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1) f.push_back(from[i]), fs.push_back(st[i]);
  if (tl::numel(from) == 0 || tl::numel(from) != tl::numel(to)) return false;
  out.assign(to.size(), 0);
  size_t o = 0, t = 0;
  while (t < to.size()) {
    if (to[t] == 1) {
      ++t;
      continue;
    }
    // the smallest runs f[o, oe) and to[t, te) of equal sizes
    size_t oe = o + 1, te = t + 1;
    int64_t fp = f[o], tp = to[t];
    while (fp != tp) {
      if (fp < tp) fp *= f[oe++];
      else tp *= to[te++];
    }
    for (size_t i = o; i + 1 < oe; ++i)
      if (fs[i] != fs[i + 1] * f[i + 1]) return false;
    out[te - 1] = fs[oe - 1];
    for (size_t i = te - 1; i > t; --i) out[i - 1] = out[i] * to[i];
    o = oe, t = te;
  }
  return true;
}

// Describes a tensor as a strided view of a node that has (or will get) its
// own row-major buffer, so GEMM can read it without a copy.
static NodeRef strided_base(const Tensor& t, std::vector<int64_t>& strides) {
  const NodeRef& n = t.node();
  auto dense = [](const NodeRef& x) { return x->realized() || x->op == Op::Contiguous; };
  if (dense(n)) {
    strides = strides_of(n->shape);
    return n;
  }
  if (n->op == Op::Reshape) {
    if (dense(n->src[0])) {
      strides = strides_of(n->shape);
      return n->src[0];
    }
    // A view of the source's view (size-1 axes added or removed, axes that
    // lie at one stride merged: a channels-last activation's (H, W) rows
    // read as one axis of H*W rows): the same base, no copy.
    std::vector<int64_t> inner;
    NodeRef base = strided_base(Tensor(n->src[0]), inner);
    if (view_strides(n->src[0]->shape, inner, n->shape, strides)) return base;
    // Any other reshape: the source gets its own row-major buffer, which is
    // the reshaped tensor too. Its other readers then share that buffer, and
    // the source's kernel may be a GEMM epilogue (a convolution's batch-norm
    // feeding both the next 1x1 convolution and a residual add).
    strides = strides_of(n->shape);
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
  strides = strides_of(n->shape);
  return n;
}

// Split-K. A product with fewer 32 x 32 output tiles than fill a wide
// device four times over (pick_gpu_tiles' measure) runs on a few of its
// units, each walking all of K: a convolution's weight gradient (32 x 288
// outputs over 12800 positions), ViT's second MLP product at batch 1 (168
// tiles over K = 3072 on 132 units). Summed over `parts` slices of K of at
// least 256 instead, as a batch of GEMMs whose partial products a reduction
// adds (fused with what follows), it fills the device. Below a K of 4096
// only products of 2^26 multiply-adds or more are split, or those whose
// tiles each hold 2^20 or more (a 7x7 map's convolution over 1024 channels
// at batch 1, DenseNet's and EfficientNet's last blocks, a dozen units busy
// for tens of microseconds): a classifier's or a squeeze-and-excite's small
// product, one row or column a tile, would gain less than the reduction's
// launch costs. A CPU's few cores are filled by one GEMM's tiles.
int64_t detail::split_k_parts(const DeviceInfo& info, int64_t batch, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kTile = 32, kMinSlice = 256, kWide = 32, kLongK = 4096, kMinWork = int64_t(1) << 26,
                    kMinTileWork = int64_t(1) << 20;
  const int64_t units = info.compute_units;
  const bool long_tiles = std::min(m, kTile) * std::min(n, kTile) * k >= kMinTileWork;
  if (batch != 1 || units < kWide || (k < kLongK && m * n * k < kMinWork && !long_tiles)) return 1;
  const int64_t tiles = ((m + kTile - 1) / kTile) * ((n + kTile - 1) / kTile);
  const int64_t want = (4 * units + tiles - 1) / tiles;
  int64_t parts = 1;
  for (int64_t s = 2; s <= want && k / s >= kMinSlice; ++s)
    if (k % s == 0) parts = s;
  return parts;
}

// (m, k) x (k, n) as `parts` products over slices of K, summed.
Tensor detail::matmul_split_k(const Tensor& a, const Tensor& b, int64_t parts) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  Tensor as = a.reshape({m, parts, k / parts}).permute({1, 0, 2});  // (parts, m, k / parts)
  Tensor bs = b.reshape({parts, k / parts, n});
  return as.matmul(bs).sum({0});
}

// Whether the leading axes of `a` (..., m, k) merge into rows of one (rows,
// k) matrix that a GEMM reads without a copy (strided_base sees a view).
static bool rows_merge(const Tensor& a) {
  if (a.dim(-1) == 0) return false;
  std::vector<int64_t> st, merged;
  strided_base(a, st);
  return view_strides(a.shape(), st, {tl::numel(a.shape()) / a.dim(-1), a.dim(-1)}, merged);
}

// The order of the axes of `a` (..., m, k) in which its rows merge, when
// only another order does: leading axes and m by decreasing stride, k last.
// Empty when the given order merges, or none does.
static std::vector<int> row_order(const Tensor& a) {
  std::vector<int64_t> st;
  strided_base(a, st);
  std::vector<int> order(size_t(a.ndim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end() - 1, [&](int x, int y) { return st[size_t(x)] > st[size_t(y)]; });
  if (std::is_sorted(order.begin(), order.end()) || !rows_merge(a.permute(order))) return {};
  return order;
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
  const DType f = float_type(promote(a.dtype(), b.dtype()));
  a = a.cast(f);
  b = b.cast(f);
  Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  // A right operand with no batch of its own (a Linear over a sequence,
  // (L, N, E) x (E, F)) makes one product of all the left rows: the GEMM
  // then takes L*N rows at once instead of L products of N rows (ViT's
  // attention projections were 197 one-row products, at a third of the
  // speed of one 197-row product).
  if (o.ndim() == 2 && tl::numel(ab) > 1) {
    if (rows_merge(a)) {
      Shape out(a.shape().begin(), a.shape().end() - 1);
      out.push_back(n);
      return a.reshape({tl::numel(ab) * m, k}).matmul(b).reshape(out);
    }
    // Rows that merge in another order: a sequence-first view of a
    // batch-first activation ((L, N, E) read from an (N, L, E) buffer, ViT's
    // attention at a batch above 1). One product of the rows in memory
    // order, moved back.
    if (std::vector<int> order = row_order(a); !order.empty()) {
      std::vector<int> back(order.size());
      for (size_t i = 0; i < order.size(); ++i) back[size_t(order[i])] = int(i);
      return a.permute(order).matmul(b).permute(back);
    }
  }
  Shape batch = broadcast_shape(ab, bb, "matmul");
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {m, k});
  eb.insert(eb.end(), {k, n});
  a = a.expand(ea);
  b = b.expand(eb);
  const int64_t nb = tl::numel(batch);
  Shape out = batch;  // the batch, then m and n unless an operand was a vector
  if (ndim() > 1) out.push_back(m);
  if (o.ndim() > 1) out.push_back(n);
  if (int64_t parts = split_k_parts(Registry::instance().get(device()).info(), nb, m, n, k); parts > 1)
    return matmul_split_k(a.reshape({m, k}), b.reshape({k, n}), parts).reshape(out);
  // generic form: (..., m, 1, k) * (..., 1, n, k) summed over k
  Tensor prod = a.unsqueeze(-2) * b.transpose(-1, -2).unsqueeze(-3);
  Tensor s = prod.sum({-1}, true);
  // the GEMM description of the same product
  auto hint = std::make_shared<MatmulHint>();
  std::vector<int64_t> sa, sb;
  Tensor a3 = a.reshape({nb, m, k}), b3 = b.reshape({nb, k, n});
  hint->a_in = a3.node();
  hint->b_in = b3.node();
  hint->a = strided_base(a3, sa);
  hint->b = strided_base(b3, sb);
  hint->batch = nb, hint->m = m, hint->n = n, hint->k = k;
  for (int i = 0; i < 3; ++i) hint->a_strides[i] = sa[i], hint->b_strides[i] = sb[i];
  if (nb == 1) hint->a_strides[0] = hint->b_strides[0] = 0;
  s.node()->matmul = hint;
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

bool detail::plane_fits_int(int64_t h, int64_t w) {
  return h < (int64_t(1) << 29) && w < (int64_t(1) << 29) && h * w < (int64_t(1) << 31);
}

// Describes the im2col columns that `product` (a GEMM of conv2d) reads as a
// gather from the image (ConvGather in core/ops.h), so that a GEMM template
// that can gather reads the image itself. `padded` is the convolution's input
// after its zero padding: pads that only grow H and W with zeros are peeled
// back to the tensor they pad, whose buffer is then all the GEMM reads.
static void describe_gather(const Tensor& product, const Tensor& padded, int64_t KH, int64_t KW,
                            const Conv2dOptions& opt, int64_t OW, int64_t groups = 1) {
  Node* s = product.node().get();
  if (s->op == Op::Reshape) s = s->src[0].get();
  if (!s->matmul || padded.dtype() != DType::f32) return;  // a split-K product, or B is cast
  NodeRef x = padded.node();
  int64_t top = 0, left = 0;
  auto zero_spatial_pad = [](const Node& n) {
    if (n.op != Op::Pad || n.value != 0 || n.arg.size() != 8) return false;
    for (int i = 0; i < 8; ++i)
      if (n.arg[size_t(i)] < 0 || (i < 4 && n.arg[size_t(i)] != 0)) return false;
    return true;
  };
  while (zero_spatial_pad(*x)) {
    top += x->arg[4], left += x->arg[6];
    x = x->src[0];
  }
  if (!plane_fits_int(x->shape[2], x->shape[3])) return;
  auto hint = std::make_shared<MatmulHint>(*s->matmul);
  hint->image = x;
  ConvGather& g = hint->gather;
  // A grouped convolution's products each read one group's channels: batch
  // item n * groups + g is the image's channels [g, g + 1) * C / groups.
  g.channels = x->shape[1] / groups, g.height = x->shape[2], g.width = x->shape[3];
  g.kernel_h = KH, g.kernel_w = KW;
  g.stride_h = opt.stride_h, g.stride_w = opt.stride_w;
  g.dilation_h = opt.dilation_h, g.dilation_w = opt.dilation_w;
  g.pad_top = top, g.pad_left = left;
  g.out_w = OW;
  s->matmul = hint;
}

Tensor detail::depthwise_by_gather(const Tensor& padded, const Tensor& image, const Tensor& weight,
                                   ConvGather window, bool wrap_a) {
  const int64_t N = image.dim(0), C = image.dim(1), H = image.dim(2), W = image.dim(3);
  if (image.dtype() != DType::f32 || weight.dtype() != DType::f32 || !plane_fits_int(H, W)) return Tensor();
  const int64_t KH = window.kernel_h, KW = window.kernel_w;
  int64_t OH, OW;
  const Tensor win = windows_2d(padded, KH, KW, window.stride_h, window.stride_w, window.dilation_h,
                                window.dilation_w, OH, OW, "depthwise convolution", image.shape());
  // (1, C, OH, OW, KH, KW) windows times each channel's taps, summed: the
  // value as the graph states it, which autograd differentiates; the
  // scheduler computes it through the hint instead.
  const Tensor taps = weight.reshape({KH, KW, C}).permute({2, 0, 1}).reshape({1, C, 1, 1, KH, KW});
  Tensor sum = (win * taps).sum({4, 5});
  std::vector<int64_t> sa;
  auto hint = std::make_shared<MatmulHint>();
  // A[c, 0, t] = weight[t, c]; with several images, product n * C + c reads
  // plane n * C + c, and A row n * C + c is row c: read with a period of C
  // (wrap_a), or laid out once per image (a small copy kernel).
  Tensor a = weight.transpose(0, 1).unsqueeze(1);
  if (N > 1 && !wrap_a) a = a.unsqueeze(0).expand({N, C, 1, KH * KW}).contiguous().reshape({N * C, 1, KH * KW});
  if (N > 1 && wrap_a) hint->a_period = C;
  hint->a = strided_base(a, sa);
  hint->b = hint->image = image.node();
  hint->batch = N * C, hint->m = 1, hint->n = OH * OW, hint->k = KH * KW;
  for (int i = 0; i < 3; ++i) hint->a_strides[i] = sa[size_t(i)];
  hint->b_strides[0] = H * W;
  window.channels = 1, window.height = H, window.width = W;
  window.out_w = OW;
  hint->gather = window;
  hint->gather_only = true;
  sum.node()->matmul = hint;
  return sum;
}

Tensor Tensor::windows2d(int64_t kh, int64_t kw, int64_t stride_h, int64_t stride_w) const {
  if (ndim() != 4) throw ShapeError("windows2d: input " + shape_str(shape()) + " must be (N, C, H, W)");
  int64_t oh, ow;
  return windows_2d(*this, kh, kw, stride_h, stride_w, 1, 1, oh, ow, "windows2d", shape());
}

// x = y * s with s of shape (1 or N, C, 1, 1) broadcast over the plane (a
// squeeze-and-excite's scale): returns s, and y through `y`; else an
// undefined tensor.
static Tensor channel_scale(const Tensor& x, Tensor& y) {
  const Node& n = *x.node();
  // (a realized product is read as it is: its buffer holds the scaled image)
  if (n.op != Op::Mul || n.realized() || n.src.size() != 2 || n.dtype != DType::f32 || n.shape.size() != 4)
    return Tensor();
  for (int i = 0; i < 2; ++i) {
    const NodeRef& e = n.src[size_t(i)];
    const NodeRef& other = n.src[size_t(1 - i)];
    if (e->op != Op::Expand || other->op == Op::Expand || other->shape != n.shape) continue;
    const Shape& s = e->src[0]->shape;
    if (s.size() == 4 && (s[0] == 1 || s[0] == n.shape[0]) && s[1] == n.shape[1] && s[2] == 1 && s[3] == 1) {
      y = Tensor(other);
      return Tensor(e->src[0]);
    }
  }
  return Tensor();
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
  // Groups of several input channels are a batch of N x G products, one
  // GEMM: (O/G, C/G * KH * KW) @ (C/G * KH * KW, OH * OW) each. Groups of
  // one channel (depthwise) are multiply-adds over the taps, below.
  const int64_t CG = C / G;
  if (KH == 1 && KW == 1 && G == 1) {
    // A 1x1 window at a stride (ResNet's downsampling shortcuts) reads every
    // stride-th pixel: copied once into a dense image, they make it a plain
    // product, which reads B's rows as they lie instead of gathering them.
    if (opt.stride_h > 1 || opt.stride_w > 1)
      x = x.slice(2, 0, x.dim(2), opt.stride_h).slice(3, 0, x.dim(3), opt.stride_w).contiguous();
    OH = x.dim(2), OW = x.dim(3);
    // A per-channel scale of the input scales the weights' columns instead
    // (O x C products an image, not C x OH x OW): the GEMM reads the image
    // unscaled from the buffer it is in, and no pass writes the scaled copy.
    Tensor y, scale = OH * OW >= O ? channel_scale(x, y) : Tensor();
    if (scale.defined()) {
      const int64_t n = scale.dim(0);
      Tensor w = weight.reshape({1, O, C}) * scale.reshape({n, 1, C});
      out = (n == 1 ? w.reshape({O, C}) : w).matmul(y.reshape({N, C, OH * OW}));
    } else {
      out = weight.reshape({O, C}).matmul(x.reshape({N, C, OH * OW}));
    }
  } else if (KH == 1 && KW == 1 && opt.stride_h == 1 && opt.stride_w == 1 && CG > 1) {
    OH = x.dim(2), OW = x.dim(3);
    out = weight.reshape({G, O / G, CG}).matmul(x.reshape({N, G, CG, OH * OW}));
  } else {
    Tensor win = windows_2d(x, KH, KW, opt.stride_h, opt.stride_w, opt.dilation_h, opt.dilation_w, OH, OW, "conv2d",
                            shape());
    if (G == 1) {
      // (N, C, OH, OW, KH, KW) -> (N, C * KH * KW, OH * OW): im2col for one GEMM
      Tensor cols = win.permute({0, 1, 4, 5, 2, 3}).reshape({N, C * KH * KW, OH * OW});
      out = weight.reshape({O, C * KH * KW}).matmul(cols);
      describe_gather(out, x, KH, KW, opt, OW);
    } else if (CG > 1) {
      Tensor cols = win.permute({0, 1, 4, 5, 2, 3}).reshape({N, G, CG * KH * KW, OH * OW});
      out = weight.reshape({G, O / G, CG * KH * KW}).matmul(cols);  // (N, G, O/G, OH * OW)
      describe_gather(out, x, KH, KW, opt, OW, G);
    } else {
      // Depthwise (one input channel a group): multiply-adds over the taps,
      // with OH and OW kept apart so the kernel walks output rows and reads
      // input rows with unit stride instead of dividing a flattened index.
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
  // Overlapping windows read each input several times: an unmaterialised
  // input (a convolution's bias and ReLU) would be recomputed at every read,
  // and the GEMM before it could not store it in its epilogue.
  Tensor in = kernel > stride ? contiguous() : *this;
  Tensor x = padding ? in.pad({{0, 0}, {0, 0}, {padding, padding}, {padding, padding}}, -INFINITY) : in;
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
  Tensor mean_t, var_t, centred;
  std::vector<int> channels_first(static_cast<size_t>(ndim()));
  for (int i = 0; i < ndim(); ++i) channels_first[size_t(i)] = i;
  std::swap(channels_first[0], channels_first[1]);
  // Training works on the channels first, (C, N, pixels): a convolution's
  // output is laid out that way already, so each statistic is a reduction
  // along contiguous memory; the images stay an axis of their own, so a
  // kernel over the rows walks one image's pixels, contiguous in both
  // layouts, and a statistic loops over images and pixels without dividing a
  // flat index by the image size.
  Shape rows_shape = ndim() > 2 ? Shape{C, dim(0), -1} : Shape{C, -1};
  std::vector<int> stat_axes = ndim() > 2 ? std::vector<int>{1, 2} : std::vector<int>{1};
  Shape per_channel(rows_shape.size(), 1);
  per_channel[0] = C;
  if (training) {
    // The centred input is shared by the variance and the output, so the
    // mean is reduced once, and the gradient is summed over the batch three
    // times (for the mean, the scale and the bias) instead of six.
    Tensor rows = permute(channels_first).reshape(rows_shape);
    mean_t = rows.mean(stat_axes, true);
    centred = rows - mean_t;
    var_t = (centred * centred).mean(stat_axes, true);
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
  if (training) {
    Tensor scale = (var_t + eps).rsqrt();
    if (weight.defined()) scale = scale * weight.reshape(per_channel);
    Tensor y = centred * scale;
    if (bias.defined()) y = y + bias.reshape(per_channel);
    Shape permuted = shape();
    std::swap(permuted[0], permuted[1]);
    return y.reshape(permuted).permute(channels_first);
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

}  // namespace tl
