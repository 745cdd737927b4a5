// Neural-network ops: convolutions and pools (windows unrolled one lazy op
// per kernel tap), normalizations, softmax and its relatives, losses, PRelu
// and Dropout (inference: the identity).
#include <algorithm>
#include <cmath>

#include "core/depthwise.h"
#include "core/io/onnx/registry.h"

namespace tl::onnx_detail {

namespace {

// A huge finite number: -inf would have to survive every renderer's literal
// printing; nothing real gets near this.
constexpr double kMaxPoolFill = -3.0e38;

struct PoolGeometry {
  Ints kernel, strides, dilations, pad_begin, pad_end, extra_end, out;
};

// ONNX pads: [x1_begin, x2_begin, ..., x1_end, x2_end]; auto_pad SAME_* / VALID.
// `separable`: the window is folded one axis at a time (a max or average
// pool), so it unrolls the sum of the kernel's sides, not their product.
PoolGeometry geometry(const Ctx& c, const Shape& in_spatial, const Ints& kernel, bool ceil_mode,
                      bool separable = false) {
  const auto& n = c.node;
  size_t d = in_spatial.size();
  PoolGeometry g;
  g.kernel = kernel;
  g.strides = attr_ints_in(n, "strides", Ints(d, 1), 1, kMaxWindowValue);
  g.dilations = attr_ints_in(n, "dilations", Ints(d, 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(n, "pads", Ints(2 * d, 0), 0, kMaxWindowValue);
  if (g.strides.size() != d || g.dilations.size() != d || pads.size() != 2 * d || kernel.size() != d)
    bad(n, "strides/dilations/pads/kernel_shape do not match " + std::to_string(d) + " spatial dims");
  for (auto k : kernel)
    if (k < 1 || k > kMaxWindowValue)
      bad(n, "kernel_shape holds " + std::to_string(k) + ", outside [1, " + std::to_string(kMaxWindowValue) + "]");
  for (auto i : in_spatial)
    if (i > kMaxWindowValue) bad(n, "spatial size " + std::to_string(i) + " is too large");
  std::string autopad = attr_s(n, "auto_pad", "NOTSET");
  g.pad_begin.assign(pads.begin(), pads.begin() + int64_t(d));
  g.pad_end.assign(pads.begin() + int64_t(d), pads.end());
  g.out.resize(d);
  g.extra_end.assign(d, 0);
  for (size_t i = 0; i < d; ++i) {
    int64_t eff = (kernel[i] - 1) * g.dilations[i] + 1, in = in_spatial[i], s = g.strides[i];
    if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>((out - 1) * s + eff - in, 0);
      g.pad_begin[i] = autopad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
    } else if (autopad == "VALID") {
      g.pad_begin[i] = g.pad_end[i] = 0;
    } else if (autopad != "NOTSET") {
      unsupported(n, c.opset, "auto_pad " + autopad);
    }
    int64_t span = in + g.pad_begin[i] + g.pad_end[i] - eff;
    if (span < 0) bad(n, "kernel larger than the padded input");
    int64_t out = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
    // A last window that would start inside the end padding is dropped (as PyTorch and ONNX's reference).
    if (ceil_mode && (out - 1) * s >= in + g.pad_begin[i]) --out;
    g.out[i] = out;
    g.extra_end[i] = std::max<int64_t>(0, (out - 1) * s + eff - (in + g.pad_begin[i] + g.pad_end[i]));
  }
  // Windows are unrolled one lazy op per tap.
  Shape padded(d), kshape(kernel.begin(), kernel.end());
  for (size_t i = 0; i < d; ++i) padded[i] = in_spatial[i] + g.pad_begin[i] + g.pad_end[i] + g.extra_end[i];
  c.budget(padded, "the padded input");
  c.budget(g.out, "the output");
  int64_t unrolled = 0;
  if (separable)
    for (int64_t k : kernel) unrolled += k;  // each side is at most kMaxWindowValue: no overflow
  else
    unrolled = checked_numel(n, kshape, c.max_elements, "the kernel");
  if (unrolled > kMaxUnrolledTaps)
    unsupported(n, c.opset, "a window of " + std::to_string(unrolled) + " taps (kernel_shape " + shape_str(kshape) +
                                "), more than the " + std::to_string(kMaxUnrolledTaps) + " this runtime unrolls");
  return g;
}

// Every kernel tap of x (padded already) as a (N, C, *out) strided view.
template <class F>
void for_each_tap(const Tensor& xp, const PoolGeometry& g, F f) {
  size_t d = g.kernel.size();
  Ints tap(d, 0);
  if (numel(g.kernel) == 0) return;
  do {
    Tensor v = xp;
    for (size_t i = 0; i < d; ++i) {
      int64_t start = tap[i] * g.dilations[i];
      v = v.slice(int(2 + i), start, start + (g.out[i] - 1) * g.strides[i] + 1, g.strides[i]);
    }
    f(v, tap);
  } while (next_index(tap, g.kernel));
}

std::vector<std::pair<int64_t, int64_t>> spatial_pads(const PoolGeometry& g, bool with_extra) {
  std::vector<std::pair<int64_t, int64_t>> p = {{0, 0}, {0, 0}};
  for (size_t i = 0; i < g.kernel.size(); ++i)
    p.push_back({g.pad_begin[i], g.pad_end[i] + (with_extra ? g.extra_end[i] : 0)});
  return p;
}

// A 2-D geometry as core/depthwise.h's window; `with_extra`: the ceil_mode
// overhang joins the end padding.
Window2d window_2d(const PoolGeometry& g, bool with_extra) {
  Window2d w;
  w.kernel_h = g.kernel[0], w.kernel_w = g.kernel[1], w.stride_h = g.strides[0], w.stride_w = g.strides[1];
  w.dilation_h = g.dilations[0], w.dilation_w = g.dilations[1];
  w.pad_h = {g.pad_begin[0], g.pad_end[0] + (with_extra ? g.extra_end[0] : 0)};
  w.pad_w = {g.pad_begin[1], g.pad_end[1] + (with_extra ? g.extra_end[1] : 0)};
  return w;
}

bool overlapping(const PoolGeometry& g) {
  for (size_t i = 0; i < g.kernel.size(); ++i)
    if ((g.kernel[i] - 1) * g.dilations[i] + 1 > g.strides[i]) return true;
  return false;
}

// The windows of x (padded already) folded with `fold` (an empty tree).
// Overlapping windows fold along one spatial axis at a time, each pass but
// the last stored: a 3x3 window then costs 3 + 3 reads instead of 9, and the
// first pass (along H) reads whole rows with unit stride.
Tensor fold_windows(Tensor xp, const PoolGeometry& g, bool overlaps, const TreeReduce& fold) {
  if (!overlaps) {
    TreeReduce acc = fold;
    for_each_tap(xp, g, [&](const Tensor& v, const Ints&) { acc.add(v); });
    return acc.result();
  }
  for (size_t i = 0; i < g.kernel.size(); ++i) {
    TreeReduce acc = fold;
    for (int64_t t = 0; t < g.kernel[i]; ++t) {
      const int64_t start = t * g.dilations[i];
      acc.add(xp.slice(int(2 + i), start, start + (g.out[i] - 1) * g.strides[i] + 1, g.strides[i]));
    }
    xp = i + 1 < g.kernel.size() ? acc.result().contiguous() : acc.result();
  }
  return xp;
}

Tensor pool(const Ctx& c, bool is_max) {
  Tensor x = c.t(0);
  if (x.ndim() < 3) bad(c.node, "pooling needs (N, C, spatial...) input, got " + shape_str(x.shape()));
  Shape spatial(x.shape().begin() + 2, x.shape().end());
  Ints kernel = attr_ints(c.node, "kernel_shape");
  if (kernel.empty()) bad(c.node, "kernel_shape is required");
  bool ceil_mode = attr_i(c.node, "ceil_mode", 0) != 0;
  if (!is_max && find_attr(c.node, "dilations") && c.opset < 19) {
    // dilations on AveragePool arrived in opset 19; earlier models never set them.
  }
  PoolGeometry g = geometry(c, spatial, kernel, ceil_mode, true);
  // Overlapping windows read each input several times: an unmaterialised
  // input (a convolution's bias and ReLU, a Concat) would be recomputed at
  // every read, and the GEMM before it could not store it in its epilogue.
  // A window of more taps than one node unrolls (a dilated 60x80 pool) is
  // folded one axis at a time too, as overlapping ones are.
  bool large = false;
  for (int64_t k = 1; int64_t side : kernel) large = large || (k *= side) > kMaxUnrolledTaps;  // sides <= 4096: no overflow
  const bool overlaps = overlapping(g) || large;
  if (overlaps) x = x.contiguous();
  // ... and its result is stored too: a consumer then reads one value per
  // element, not a window. A Concat (Inception's reduction blocks join a
  // pool to convolutions) would otherwise compute the pool inside its own
  // kernel, reading every piece's branch at every element, and could not be
  // assembled in place (core/assemble.h); a convolution stores its input
  // anyway.
  auto stored = [&](const Tensor& y) { return overlaps ? y.contiguous() : y; };
  if (is_max) {
    if (attr_i(c.node, "storage_order", 0) != 0) unsupported(c.node, c.opset, "storage_order 1");
    // A 2-D pool in one kernel where the device can (core/depthwise.h); the
    // ceil_mode overhang is padding there too, and left out like it.
    if (g.kernel.size() == 2 && !large)
      if (Tensor y = max_pool_by_gather(x, window_2d(g, true)); y.defined()) return y;
    return stored(fold_windows(x.pad(spatial_pads(g, true), kMaxPoolFill), g, overlaps,
                               TreeReduce{[](const Tensor& a, const Tensor& b) { return a.maximum(b); }, {}}));
  }
  bool include_pad = attr_i(c.node, "count_include_pad", 0) != 0;
  Tensor acc = fold_windows(x.pad(spatial_pads(g, true), 0), g, overlaps, sum_tree());
  bool any_pad = false;
  for (size_t i = 0; i < g.kernel.size(); ++i) any_pad |= g.pad_begin[i] || g.pad_end[i] || g.extra_end[i];
  if (!any_pad) return stored(acc * (1.0 / double(numel(g.kernel))));
  // The divisor counts the cells each window covers: real ones, plus the
  // explicit padding when count_include_pad, never the ceil_mode overhang.
  // A window is a box, so its count is a product of one count per axis,
  // known here: no kernel adds up a map of ones.
  Tensor count;
  for (size_t i = 0; i < g.kernel.size(); ++i) {
    const int64_t lo = include_pad ? -g.pad_begin[i] : 0;
    const int64_t hi = spatial[i] + (include_pad ? g.pad_end[i] : 0);
    std::vector<float> cells(size_t(g.out[i]), 0.f);
    for (int64_t o = 0; o < g.out[i]; ++o)
      for (int64_t t = 0; t < g.kernel[i]; ++t) {
        const int64_t at = o * g.strides[i] + t * g.dilations[i] - g.pad_begin[i];
        cells[size_t(o)] += at >= lo && at < hi ? 1.f : 0.f;
      }
    Shape axis(spatial.size() + 2, 1);
    axis[i + 2] = g.out[i];
    const Tensor along = constant_tensor(cells, axis, x.device());
    count = count.defined() ? count * along : along;
  }
  return stored(acc / count);
}

// Convolution of padded X (N, C, ...) with W (O, C/groups, k...) as a sum over
// the taps of one (O/g, C/g) x (C/g, positions) product per group; used for
// the ranks Tensor::conv2d does not cover. `g` gives strides, dilations, the
// kernel and the output size.
Tensor tap_sum_conv(const onnx::NodeProto& node, const Tensor& xp, const Tensor& w, const Tensor& bias, int64_t groups,
                    const PoolGeometry& g) {
  int64_t N = xp.dim(0), O = w.dim(0), Cg = w.dim(1), Og = O / groups, P = numel(g.out);
  // One lazy product per group and tap.
  if (groups * numel(g.kernel) > 16 * kMaxUnrolledTaps)
    throw OnnxUnsupported("unsupported ONNX op 'ai.onnx::" + node.op_type() + "': " + std::to_string(groups) +
                              " groups of " + std::to_string(numel(g.kernel)) + " taps, more than this runtime unrolls",
                          "ai.onnx::" + node.op_type());
  std::vector<Tensor> outs;
  for (int64_t gi = 0; gi < groups; ++gi) {
    Tensor xg = groups == 1 ? xp : xp.slice(1, gi * Cg, (gi + 1) * Cg);
    Tensor wg = groups == 1 ? w : w.slice(0, gi * Og, (gi + 1) * Og);
    Tensor wflat = wg.reshape({Og, Cg, numel(g.kernel)});
    TreeReduce acc = sum_tree();
    int64_t t = 0;
    for_each_tap(xg, g, [&](const Tensor& v, const Ints&) {
      acc.add(wflat.slice(2, t, t + 1).reshape({Og, Cg}).matmul(v.reshape({N, Cg, P})));
      ++t;
    });
    outs.push_back(acc.result());
  }
  Tensor y = groups == 1 ? outs[0] : Tensor::cat(outs, 1);
  Shape s = {N, O};
  s.insert(s.end(), g.out.begin(), g.out.end());
  y = y.reshape(s);
  if (bias.defined()) y = y + per_channel(node, bias, s, "bias");
  return y;
}

// N-d convolution as a sum over kernel taps of (O, C) x (C, positions)
// products; 2-D goes to Tensor::conv2d.
Tensor conv(const Ctx& c) {
  Tensor x = c.t(0), w = c.t(1);
  if (x.ndim() < 3 || w.ndim() != x.ndim())
    bad(c.node, "Conv needs X (N, C, ...) and W of the same rank, got " + shape_str(x.shape()) + " and " + shape_str(w.shape()));
  int64_t groups = attr_i_in(c.node, "group", 1, 1, std::max<int64_t>(x.dim(1), 1));
  if (w.dim(0) % groups) bad(c.node, "group " + std::to_string(groups) + " does not divide the " + std::to_string(w.dim(0)) + " output channels");
  Shape spatial(x.shape().begin() + 2, x.shape().end());
  Ints kernel = attr_ints(c.node, "kernel_shape", Ints(w.shape().begin() + 2, w.shape().end()));
  if (kernel != Ints(w.shape().begin() + 2, w.shape().end()))
    bad(c.node, "kernel_shape " + shape_str(kernel) + " differs from the weights' " + shape_str(w.shape()));
  PoolGeometry g = geometry(c, spatial, kernel, false);
  Tensor xp = x.pad(spatial_pads(g, false), 0);
  Tensor bias = c.has(2) ? c.t(2) : Tensor();
  if (x.dim(1) != w.dim(1) * groups)
    bad(c.node, "X has " + std::to_string(x.dim(1)) + " channels, W expects " + std::to_string(w.dim(1) * groups));
  if (groups > 1 && groups == x.dim(1) && w.dim(1) == 1 && w.dim(0) == groups) {
    // Depthwise: one elementwise kernel of multiply-adds over views of the
    // input (the grouped conv2d path reduces per channel). 2-D is
    // core/depthwise.h's; other ranks sum strided views of a padded copy.
    Tensor wt = w.reshape({groups, numel(g.kernel)}).transpose(0, 1);  // tap-major
    if (bias.defined()) bias = per_channel(c.node, bias, x.shape(), "bias");
    if (x.ndim() == 4) return depthwise_conv2d(x, wt, bias, window_2d(g, false));
    xp = xp.contiguous();
    Shape ws(size_t(x.ndim()), 1);
    ws[1] = groups;
    TreeReduce taps = sum_tree();
    int64_t t = 0;
    for_each_tap(xp, g, [&](const Tensor& v, const Ints&) {
      taps.add(v * wt.slice(0, t, t + 1).reshape(ws));
      ++t;
    });
    return bias.defined() ? taps.result() + bias : taps.result();
  }
  if (x.ndim() == 4) {
    Conv2dOptions o;
    o.stride_h = g.strides[0];
    o.stride_w = g.strides[1];
    o.dilation_h = g.dilations[0];
    o.dilation_w = g.dilations[1];
    o.groups = groups;
    return xp.conv2d(w, bias, o);
  }
  return tap_sum_conv(c.node, xp, w, bias, groups, g);
}

Tensor softmax_like(const Ctx& c, int kind) {  // 0 softmax, 1 log-softmax, 2 hardmax
  Tensor x = c.t(0);
  int64_t r = x.ndim();
  auto apply = [&](const Tensor& t, int axis) {
    if (kind == 0) return t.softmax(axis);
    if (kind == 1) return t.log_softmax(axis);
    Tensor m = t.argmax(axis, true);
    Shape s(size_t(t.ndim()), 1);
    s[size_t(axis)] = t.dim(axis);
    Tensor idx = Tensor::arange(0, double(t.dim(axis)), 1, DType::i32, t.device()).reshape(s);
    return idx.eq(m).cast(DType::f32);
  };
  if (c.opset < 13) {
    int64_t axis = norm_axis(attr_i(c.node, "axis", 1), r, c.node);
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.dim(int(i));
    return apply(x.reshape({outer, x.numel() / std::max<int64_t>(outer, 1)}), 1).reshape(x.shape());
  }
  return apply(x, int(norm_axis(attr_i(c.node, "axis", -1), r, c.node)));
}

// -log p[target] per element, weighted, with ignore_index; mean divides by
// the total weight of the counted targets (ONNX and PyTorch agree on this).
Tensor nll(const Ctx& c, const Tensor& logp, const Tensor& target, const Tensor& weight) {
  const auto& n = c.node;
  int64_t C = logp.dim(1), r = logp.ndim();
  Shape cls_shape(size_t(r), 1);
  cls_shape[1] = C;
  Tensor cls = Tensor::arange(0, double(C), 1, DType::f32, logp.device()).reshape(cls_shape);
  Tensor tf = target.cast(DType::f32).unsqueeze(1);
  Tensor onehot = tf.eq(cls).cast(DType::f32);
  if (auto* a = find_attr(n, "ignore_index")) {
    Tensor keep = tf.ne(Tensor::scalar(double(a->i()), DType::f32, logp.device())).cast(DType::f32);
    onehot = onehot * keep;
  }
  Tensor wc = weight.defined() ? per_channel(n, weight, logp.shape(), "class weights") : Tensor();
  Tensor w = weight.defined() ? (onehot * wc).sum({1}) : onehot.sum({1});
  Tensor loss = -(logp * onehot * (weight.defined() ? wc : Tensor::scalar(1, DType::f32, logp.device()))).sum({1});
  std::string red = attr_s(n, "reduction", "mean");
  if (red == "none") return loss;
  if (red == "sum") return loss.sum();
  if (red == "mean") return loss.sum() / w.sum();
  unsupported(n, c.opset, "reduction " + red);
}

// Transposed convolution as a plain convolution of the stride-dilated input
// with the flipped, in/out-swapped kernel.
Value conv_transpose(const Ctx& c) {
  const auto& n = c.node;
  Tensor x = c.t(0), w = c.t(1);
  int64_t r = x.ndim(), d = r - 2;
  if (d < 1 || w.ndim() != r)
    bad(n, "ConvTranspose needs X (N, C, ...) and W of the same rank, got " + shape_str(x.shape()) + " and " + shape_str(w.shape()));
  if (x.dim(1) != w.dim(0))
    bad(n, "X has " + std::to_string(x.dim(1)) + " channels, W " + shape_str(w.shape()) + " expects " + std::to_string(w.dim(0)));
  const int64_t groups = attr_i_in(n, "group", 1, 1, std::max<int64_t>(w.dim(0), 1));
  if (w.dim(0) % groups) bad(n, "group " + std::to_string(groups) + " does not divide " + std::to_string(w.dim(0)) + " channels");
  Ints kernel = attr_ints(n, "kernel_shape", Ints(w.shape().begin() + 2, w.shape().end()));
  if (kernel != Ints(w.shape().begin() + 2, w.shape().end()))
    bad(n, "kernel_shape " + shape_str(kernel) + " differs from the weights' " + shape_str(w.shape()));
  Ints strides = attr_ints_in(n, "strides", Ints(size_t(d), 1), 1, kMaxWindowValue);
  Ints dil = attr_ints_in(n, "dilations", Ints(size_t(d), 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(n, "pads", Ints(size_t(2 * d), 0), 0, kMaxWindowValue);
  Ints outpad = attr_ints_in(n, "output_padding", Ints(size_t(d), 0), 0, kMaxWindowValue);
  Ints out_shape = attr_ints_in(n, "output_shape", {}, 0, kMaxWindowValue);
  require_count(n, strides, size_t(d), "strides");
  require_count(n, dil, size_t(d), "dilations");
  require_count(n, pads, size_t(2 * d), "pads");
  require_count(n, outpad, size_t(d), "output_padding");
  if (!out_shape.empty() && out_shape.size() < size_t(d)) require_count(n, out_shape, size_t(d), "output_shape");
  for (int64_t i = 0; i < d; ++i) {
    if (kernel[size_t(i)] < 1 || kernel[size_t(i)] > kMaxWindowValue) bad(n, "kernel size " + std::to_string(kernel[size_t(i)]));
    if (x.dim(int(2 + i)) > kMaxWindowValue) bad(n, "input size " + std::to_string(x.dim(int(2 + i))) + " is too large");
  }
  {
    Shape dilated = {x.dim(0), x.dim(1)};
    for (int64_t i = 0; i < d; ++i)
      dilated.push_back(x.dim(int(2 + i)) * strides[size_t(i)] + (kernel[size_t(i)] - 1) * dil[size_t(i)] * 2 + outpad[size_t(i)]);
    c.budget(dilated, "the stride-dilated input");
  }
  std::string autopad = attr_s(n, "auto_pad", "NOTSET");
  for (int64_t i = 0; i < d; ++i) {
    int64_t in = x.dim(int(2 + i)), eff = (kernel[size_t(i)] - 1) * dil[size_t(i)] + 1;
    int64_t full = strides[size_t(i)] * (in - 1) + outpad[size_t(i)] + eff;
    if (!out_shape.empty() || autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      int64_t target = !out_shape.empty() ? out_shape[size_t(out_shape.size() - size_t(d) + size_t(i))] : in * strides[size_t(i)];
      // Negative totals (output_shape larger than the natural size) grow the end.
      int64_t total = full - target;
      bool lower = autopad == "SAME_LOWER";
      // output_shape follows SAME_UPPER's split unless SAME_LOWER asks otherwise.
      pads[size_t(i)] = lower ? total - total / 2 : total / 2;
      pads[size_t(i + d)] = total - pads[size_t(i)];
    } else if (autopad == "VALID") {
      pads[size_t(i)] = pads[size_t(i + d)] = 0;
    }
  }
  // Zero-insert the input: (.., H, ..) -> (.., H, s) -> (.., H*s) minus the tail.
  Tensor xd = x;
  for (int64_t i = 0; i < d; ++i) {
    int64_t s = strides[size_t(i)];
    if (s == 1) continue;
    int ax = int(2 + i);
    int64_t in = xd.dim(ax);
    Tensor u = xd.unsqueeze(ax + 1);
    std::vector<std::pair<int64_t, int64_t>> p(size_t(u.ndim()), {0, 0});
    p[size_t(ax + 1)] = {0, s - 1};
    Shape merged = xd.shape();
    merged[size_t(ax)] = in * s;
    xd = u.pad(p, 0).reshape(merged).slice(ax, 0, (in - 1) * s + 1);
  }
  std::vector<std::pair<int64_t, int64_t>> p = {{0, 0}, {0, 0}};
  for (int64_t i = 0; i < d; ++i) {
    int64_t eff = (kernel[size_t(i)] - 1) * dil[size_t(i)];
    p.push_back({eff - pads[size_t(i)], eff - pads[size_t(i + d)] + outpad[size_t(i)]});
  }
  xd = xd.pad(p, 0);
  // W: (C_in, C_out/g, k...) -> (C_out, C_in/g, k...), flipped in space.
  int64_t Cin = w.dim(0), Cog = w.dim(1);
  Shape ws = {groups, Cin / groups, Cog};
  ws.insert(ws.end(), w.shape().begin() + 2, w.shape().end());
  std::vector<int> perm = {0, 2, 1};
  for (int64_t i = 0; i < d; ++i) perm.push_back(int(3 + i));
  Shape wf = {groups * Cog, Cin / groups};
  wf.insert(wf.end(), w.shape().begin() + 2, w.shape().end());
  std::vector<int> flip_axes;
  for (int64_t i = 0; i < d; ++i) flip_axes.push_back(int(2 + i));
  Tensor wt = w.reshape(ws).permute(perm).reshape(wf).flip(flip_axes);
  Tensor bias = c.has(2) ? c.t(2) : Tensor();
  // Conv's limit on the taps one output sums (each a gathered input element).
  if (checked_numel(n, Shape(kernel.begin(), kernel.end()), c.max_elements, "the kernel") > kMaxUnrolledTaps)
    unsupported(n, c.opset, "a kernel of more than " + std::to_string(kMaxUnrolledTaps) + " taps");
  if (d == 2) {
    Conv2dOptions o;
    o.dilation_h = dil[0];
    o.dilation_w = dil[1];
    o.groups = groups;
    return from_tensor(xd.conv2d(wt, bias, o), c.v(0).elem);
  }
  // 1-D and 3-D: the tap-sum convolution of Conv with unit strides.
  PoolGeometry g;
  g.kernel = kernel;
  g.strides = Ints(size_t(d), 1);
  g.dilations = dil;
  g.out.resize(size_t(d));
  for (int64_t i = 0; i < d; ++i) g.out[size_t(i)] = xd.dim(int(2 + i)) - (kernel[size_t(i)] - 1) * dil[size_t(i)];
  return from_tensor(tap_sum_conv(n, xd, wt, bias, groups, g), c.v(0).elem);
}

Value group_norm(const Ctx& c) {
  Tensor x = c.t(0);
  c.ranked(0, 2);
  int64_t G = attr_i(c.node, "num_groups", 0), N = x.dim(0), C = x.dim(1);
  if (G <= 0 || C % G) bad(c.node, "num_groups must divide the channels");
  double eps = attr_f(c.node, "epsilon", 1e-5);
  Tensor g = x.reshape({N, G, -1});
  Tensor cen = g - g.mean({2}, true);
  Tensor y = (cen * ((cen * cen).mean({2}, true) + eps).rsqrt()).reshape(x.shape());
  auto per_c = [&](Tensor p) {
    if (p.numel() == G && G != C) p = p.reshape({G, 1}).expand({G, C / G}).reshape({C});
    return per_channel(c.node, p, x.shape(), "scale/bias");
  };
  return from_tensor(y * per_c(c.t(1)) + per_c(c.t(2)), c.v(0).elem);
}

// MaxPool's second output: the flat (n, c, h, w) index of each window's
// first maximum (storage_order 0), tracked tap by tap.
std::vector<Value> max_pool_with_indices(const Ctx& c) {
  const bool column_major = attr_i(c.node, "storage_order", 0) != 0;
  Tensor x = c.t(0);
  if (x.ndim() != 4) unsupported(c.node, c.opset, "Indices output for a non-2-D pool");
  int64_t N = x.dim(0), C = x.dim(1), Hh = x.dim(2), Ww = x.dim(3);
  Shape spatial = {Hh, Ww};
  PoolGeometry g = geometry(c, spatial, attr_ints(c.node, "kernel_shape"), attr_i(c.node, "ceil_mode", 0) != 0);
  Tensor xp = x.pad(spatial_pads(g, true), kMaxPoolFill);
  std::vector<float> base(size_t(N * C));
  for (int64_t i = 0; i < N * C; ++i) base[size_t(i)] = float(i * Hh * Ww);
  Tensor plane = constant_tensor(base, {N, C, 1, 1}, x.device());
  Tensor best, where_at;
  for_each_tap(xp, g, [&](const Tensor& v, const Ints& tap) {
    std::vector<float> pos(size_t(g.out[0] * g.out[1]));
    for (int64_t oh = 0; oh < g.out[0]; ++oh)
      for (int64_t ow = 0; ow < g.out[1]; ++ow) {
        int64_t h = oh * g.strides[0] + tap[0] * g.dilations[0] - g.pad_begin[0];
        int64_t w = ow * g.strides[1] + tap[1] * g.dilations[1] - g.pad_begin[1];
        h = std::clamp<int64_t>(h, 0, Hh - 1);
        w = std::clamp<int64_t>(w, 0, Ww - 1);
        pos[size_t(oh * g.out[1] + ow)] = float(column_major ? w * Hh + h : h * Ww + w);
      }
    Tensor idx = constant_tensor(pos, {1, 1, g.out[0], g.out[1]}, x.device()) + plane;
    if (!best.defined()) {
      best = v;
      where_at = idx;
      return;
    }
    Tensor better = v.gt(best);
    best = Tensor::where(better, v, best);
    where_at = Tensor::where(better, idx, where_at);
  });
  return {from_tensor(best, c.v(0).elem), from_tensor(where_at.cast(DType::i32), TP::INT64)};
}

// MaxUnpool on the host: zeros with each value put back at its flat index.
Value max_unpool(const Ctx& c) {
  auto x = c.h(0);
  Ints idx = c.ints(1);
  const Shape& xs = c.shape(0);
  // Indices address the natural unpooled shape; output_shape only pads its ends.
  Ints k = attr_ints_in(c.node, "kernel_shape", {}, 1, kMaxWindowValue);
  Ints st = attr_ints_in(c.node, "strides", Ints(k.size(), 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(c.node, "pads", Ints(2 * k.size(), 0), 0, kMaxWindowValue);
  if (k.empty() || xs.size() != k.size() + 2 || st.size() != k.size() || pads.size() != 2 * k.size())
    bad(c.node, "kernel_shape/strides/pads do not match the input rank of " + shape_str(xs));
  Shape natural = {xs[0], xs[1]};
  for (size_t i = 0; i < k.size(); ++i) {
    if (xs[2 + i] < 1 || xs[2 + i] > kMaxWindowValue) bad(c.node, "input " + shape_str(xs) + " has an empty or huge spatial axis");
    natural.push_back((xs[2 + i] - 1) * st[i] + k[i] - pads[i] - pads[i + k.size()]);
  }
  c.budget(natural, "the unpooled output");
  if (c.has(2)) {
    const Ints want = c.ints(2);
    c.budget(Shape(want.begin(), want.end()), "output_shape");
  }
  std::vector<double> y(size_t(numel(natural)), 0.0);
  for (size_t i = 0; i < x.size() && i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= int64_t(y.size())) bad(c.node, "index " + std::to_string(idx[i]) + " out of range");
    y[size_t(idx[i])] = x[i];
  }
  Value v = from_host(natural, c.v(0).elem, y);
  if (!c.has(2)) return v;
  Ints want = c.ints(2);
  if (want.size() != natural.size()) bad(c.node, "output_shape has the wrong rank");
  std::vector<std::pair<int64_t, int64_t>> p;
  for (size_t i = 0; i < want.size(); ++i) p.push_back({0, want[i] - natural[i]});
  return from_tensor(device_tensor(v, c.device).pad(p, 0), c.v(0).elem);
}

Value op_conv(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  return same(conv(c));
}

std::vector<Value> op_max_pool(const Ctx& c) {
  const auto& n = c.node;
  if (n.output_size() > 1 && !n.output(1).empty()) return max_pool_with_indices(c);
  return {from_tensor(pool(c, true), c.v(0).elem)};
}

Value op_average_pool(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  return same(pool(c, false));
}

Value op_global_average_pool(const Ctx& c) {
  const std::string& op = c.node.op_type();
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  std::vector<int> axes;
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  return same(op == "GlobalAveragePool" ? x.mean(axes, true) : x.max(axes, true));
}

// Whether the mean is all 0 and the variance plus eps all 1, read from host
// values: then the normalisation is x * scale + B (the form the loader gives
// a batch norm of constant parameters, core/io/onnx/fold.h).
bool unit_normalisation(const Ctx& c, double eps) {
  if (!c.v(3).host || !c.v(4).host) return false;
  for (double m : c.v(3).data)
    if (m != 0) return false;
  for (double v : c.v(4).data)
    if (v + eps != 1) return false;
  return true;
}

// Inference uses the running statistics; training_mode uses the batch's and
// also returns the running ones blended in with `momentum`.
std::vector<Value> op_batch_normalization(const Ctx& c) {
  const auto& n = c.node;
  Tensor x = c.t(0);
  double eps = attr_f(n, "epsilon", 1e-5);
  const Shape& xs = x.shape();
  if (attr_i(n, "training_mode", 0) == 0 && unit_normalisation(c, eps))
    return {from_tensor(x * per_channel(n, c.t(1), xs, "scale") + per_channel(n, c.t(2), xs, "bias"), c.v(0).elem)};
  if (attr_i(n, "training_mode", 0) == 0) {
    Tensor inv = (c.t(4) + eps).rsqrt() * c.t(1);
    Tensor y = (x - per_channel(n, c.t(3), xs, "mean")) * per_channel(n, inv, xs, "scale") +
               per_channel(n, c.t(2), xs, "bias");
    return {from_tensor(y, c.v(0).elem)};
  }
  std::vector<int> axes = {0};
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  double mom = attr_f(n, "momentum", 0.9);
  Tensor mean = x.mean(axes, true), cen = x - mean, var = (cen * cen).mean(axes, true);
  Tensor y = cen * (var + eps).rsqrt() * per_channel(n, c.t(1), xs, "scale") + per_channel(n, c.t(2), xs, "bias");
  Shape cs = {x.dim(1)};
  Tensor rm = c.t(3) * mom + mean.reshape(cs) * (1 - mom), rv = c.t(4) * mom + var.reshape(cs) * (1 - mom);
  return {from_tensor(y, c.v(0).elem), from_tensor(rm, c.v(3).elem), from_tensor(rv, c.v(4).elem)};
}

Value op_instance_normalization(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  std::vector<int> axes;
  for (int i = 2; i < x.ndim(); ++i) axes.push_back(i);
  double eps = attr_f(n, "epsilon", 1e-5);
  Tensor mean = x.mean(axes, true), cen = x - mean;
  Tensor var = (cen * cen).mean(axes, true);
  return same(cen * (var + eps).rsqrt() * per_channel(n, c.t(1), x.shape(), "scale") + per_channel(n, c.t(2), x.shape(), "bias"));
}

Value op_mean_variance_normalization(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  Ints ax = attr_ints(n, "axes", {0, 2, 3});
  std::vector<int> axes;
  for (auto a : ax) axes.push_back(int(norm_axis(a, x.ndim(), n)));
  Tensor cen = x - x.mean(axes, true);
  return same(cen * ((cen * cen).mean(axes, true) + 1e-9).rsqrt());
}

Value op_lp_normalization(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  int axis = int(norm_axis(attr_i(n, "axis", -1), x.ndim(), n));
  int64_t p = attr_i(n, "p", 2);
  Tensor norm = p == 1 ? x.abs().sum({axis}, true) : (x * x).sum({axis}, true).sqrt();
  return same(x / norm);
}

Value op_lrn(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0);
  c.ranked(0, 2);
  int64_t size = attr_i(n, "size", 0);
  if (size <= 0) bad(n, "size is required");
  if (size > kMaxUnrolledTaps) unsupported(n, c.opset, "size " + std::to_string(size) + " (more than " + std::to_string(kMaxUnrolledTaps) + ")");
  double alpha = attr_f(n, "alpha", 1e-4), beta = attr_f(n, "beta", 0.75), bias = attr_f(n, "bias", 1.0);
  // x is read at `size` channels for each output: read it from a buffer
  // (free when it has one anyway), not by recomputing the max pool or
  // convolution epilogue it often is.
  x = x.contiguous();
  std::vector<std::pair<int64_t, int64_t>> p(size_t(x.ndim()), {0, 0});
  p[1] = {(size - 1) / 2, size - 1 - (size - 1) / 2};
  Tensor sq = (x * x).pad(p, 0);
  TreeReduce window = sum_tree();
  for (int64_t k = 0; k < size; ++k) window.add(sq.slice(1, k, k + x.dim(1)));
  Tensor base = window.result() * (alpha / double(size)) + bias;
  // The usual beta of 0.75 (AlexNet, GoogLeNet) as square roots, which
  // vectorise, where pow() is a scalar library call per element: b^0.75 is
  // sqrt(b) * sqrt(sqrt(b)). Exact in the same cases as pow for b >= 0
  // (bias > 0, alpha >= 0: b is positive, +inf or NaN).
  if (beta == 0.75 && bias > 0 && alpha >= 0) {
    Tensor root = base.sqrt();
    return same(x / (root * root.sqrt()));
  }
  return same(x / base.pow(beta));
}

Value op_softmax(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  return same(softmax_like(c, 0));
}

Value op_log_softmax(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  return same(softmax_like(c, 1));
}

Value op_hardmax(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  return same(softmax_like(c, 2));
}

Value op_p_relu(const Ctx& c) {
  const auto& n = c.node;
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  Tensor x = c.t(0), slope = c.t(1);
  // Opset 6 and PyTorch's per-channel slopes: a (C) slope means channel 1.
  if (slope.ndim() == 1 && x.ndim() >= 3 && slope.numel() == x.dim(1) && slope.numel() > 1 &&
      (c.opset < 7 || x.dim(-1) != slope.numel()))
    slope = per_channel(n, slope, x.shape(), "slope");
  return same(Tensor::where(x.lt(Tensor::scalar(0, DType::f32, x.device())), x * slope, x));
}

// Y, and the Mean and InvStdDev outputs when asked for.
std::vector<Value> op_layer_normalization(const Ctx& c) {
  const auto& n = c.node;
  Tensor x = c.t(0);
  int64_t axis = norm_axis(attr_i(n, "axis", -1), x.ndim(), n);
  std::vector<int> axes;
  for (int64_t i = axis; i < x.ndim(); ++i) axes.push_back(int(i));
  double eps = attr_f(n, "epsilon", 1e-5);
  Tensor mean = x.mean(axes, true), cen = x - mean;
  Tensor inv = ((cen * cen).mean(axes, true) + eps).rsqrt();
  Tensor y = cen * inv * c.t(1);
  if (c.has(2)) y = y + c.t(2);
  std::vector<Value> out = {from_tensor(y, c.v(0).elem)};
  if (n.output_size() > 1) out.push_back(from_tensor(mean, TP::FLOAT));
  if (n.output_size() > 2) out.push_back(from_tensor(inv, TP::FLOAT));
  return out;
}

Value op_negative_log_likelihood_loss(const Ctx& c) {
  auto same = [&](Tensor t) { return from_tensor(std::move(t), c.v(0).elem); };
  return same(nll(c, c.t(0).cast(float_type(c.t(0).dtype())), c.t(1), c.has(2) ? c.t(2) : Tensor()));
}

// The loss, and the log-probabilities when asked for.
std::vector<Value> op_softmax_cross_entropy_loss(const Ctx& c) {
  Tensor logp = c.t(0).cast(float_type(c.t(0).dtype())).log_softmax(1);
  std::vector<Value> out = {from_tensor(nll(c, logp, c.t(1), c.has(2) ? c.t(2) : Tensor()), c.v(0).elem)};
  if (c.node.output_size() > 1) out.push_back(from_tensor(logp, c.v(0).elem));
  return out;
}

// Inference: the identity and a mask of every element kept. Training mode
// (opset 12's training_mode input) only with ratio 0: the rest is random.
std::vector<Value> op_dropout(const Ctx& c) {
  const auto& n = c.node;
  if (c.opset >= 12 && c.has(2) && c.first_int(2) != 0) {
    double ratio = c.has(1) ? c.first(1) : 0.5;
    if (ratio != 0) unsupported(n, c.opset, "Dropout in training mode with ratio " + std::to_string(ratio) + " (random)");
  }
  std::vector<Value> out = {c.v(0)};
  if (n.output_size() > 1) out.push_back(from_tensor(Tensor::full(c.shape(0), 1, DType::boolean, c.device), TP::BOOL));
  return out;
}

}  // namespace

Tensor conv_of(const Ctx& c) { return conv(c); }

std::vector<OpDef> nn_ops() {
  using namespace types;
  const auto D = Placement::Device;
  return {
      {"Conv", 1, kFloat, D, op_conv}, {"ConvTranspose", 1, kFloat, D, conv_transpose},
      {"MaxPool", 1, kNumeric, D, op_max_pool}, {"AveragePool", 1, kFloat, D, op_average_pool},
      {"GlobalAveragePool", 1, kFloat, D, op_global_average_pool},
      {"GlobalMaxPool", 1, kFloat, D, op_global_average_pool}, {"MaxUnpool", 9, kFloat, Placement::Host, max_unpool},
      {"BatchNormalization", 1, kFloat, D, op_batch_normalization},
      {"InstanceNormalization", 1, kFloat, D, op_instance_normalization},
      {"LayerNormalization", 17, kFloat, D, op_layer_normalization},
      {"GroupNormalization", 18, kFloat, D, group_norm},
      {"MeanVarianceNormalization", 9, kFloat, D, op_mean_variance_normalization},
      {"LpNormalization", 1, kFloat, D, op_lp_normalization}, {"LRN", 1, kFloat, D, op_lrn},
      {"Softmax", 1, kFloat, D, op_softmax}, {"LogSoftmax", 1, kFloat, D, op_log_softmax},
      {"Hardmax", 1, kFloat, D, op_hardmax}, {"PRelu", 1, kNumeric, D, op_p_relu},
      {"NegativeLogLikelihoodLoss", 12, kFloat, D, op_negative_log_likelihood_loss},
      {"SoftmaxCrossEntropyLoss", 12, kFloat, D, op_softmax_cross_entropy_loss},
      {"Dropout", 1, kAll, D, op_dropout},
  };
}

}  // namespace tl::onnx_detail
