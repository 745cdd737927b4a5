// Layers built from other ops: Resize (one interpolation matrix per axis),
// the recurrent layers (RNN, GRU, LSTM unrolled over the sequence) and the
// quantized ops (dequantized, computed in float32, requantized).
#include <algorithm>
#include <cmath>

#include "core/io/onnx/registry.h"
#include "core/io/onnx_shapes_only.h"

namespace tl::onnx_detail {

namespace {

// Resize / Upsample: every mode ONNX has is separable, so each resized axis
// is one matmul with an (out, in) weight matrix built on the host from the
// coordinate transformation and the 1-D kernel (nearest, linear, cubic).
// Sets the output size and scale of each of `axes` from Resize's `sizes`
// (with keep_aspect_ratio_policy) or, when there are none, its `scales`.
void resize_extent(const Ctx& c, const Tensor& x, const Ints& axes, const Ints& sizes,
                   const std::vector<double>& scales, Shape& out, std::vector<double>& scale) {
  const auto& n = c.node;
  if (!sizes.empty()) {
    if (sizes.size() != axes.size()) bad(n, "sizes has " + std::to_string(sizes.size()) + " values for " + std::to_string(axes.size()) + " axes");
    std::string policy = attr_s(n, "keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) {
        out[size_t(axes[k])] = sizes[k];
        scale[size_t(axes[k])] = double(sizes[k]) / double(x.dim(int(axes[k])));
      }
    } else {
      double s = policy == "not_larger" ? 1e300 : 0;
      for (size_t k = 0; k < axes.size(); ++k) {
        double q = double(sizes[k]) / double(x.dim(int(axes[k])));
        s = policy == "not_larger" ? std::min(s, q) : std::max(s, q);
      }
      for (auto a : axes) {
        double o = std::round(s * double(x.dim(int(a))));
        if (!(o >= 0 && o <= double(kMaxWindowValue))) bad(n, "output size " + std::to_string(o) + " is out of range");
        scale[size_t(a)] = s;
        out[size_t(a)] = int64_t(o);
      }
    }
  } else {
    if (scales.size() != axes.size()) bad(n, "needs scales or sizes for every axis");
    for (size_t k = 0; k < axes.size(); ++k) {
      scale[size_t(axes[k])] = scales[k];
      double o = std::floor(double(x.dim(int(axes[k]))) * scales[k]);
      if (!(o <= double(kMaxWindowValue))) bad(n, "output size " + std::to_string(o) + " is out of range");
      out[size_t(axes[k])] = int64_t(o);
    }
  }
}

// The input positions and weights that make output coordinate `xi` (in
// input space) along an axis scaled by `sc`.
std::vector<std::pair<int64_t, double>> resize_taps(const Ctx& c, const std::string& mode,
                                                     const std::string& nearest_mode, bool antialias, double xi,
                                                     double sc) {
  const auto& n = c.node;
  const double A = attr_f(n, "cubic_coeff_a", -0.75);
  std::vector<std::pair<int64_t, double>> taps;
  if (mode == "nearest") {
    double v;
    if (nearest_mode == "round_prefer_floor") v = (xi == std::floor(xi) + 0.5) ? std::floor(xi) : std::round(xi);
    else if (nearest_mode == "round_prefer_ceil") v = std::round(xi + (xi == std::floor(xi) + 0.5 ? 0.5 : 0));
    else if (nearest_mode == "floor") v = std::floor(xi);
    else if (nearest_mode == "ceil") v = std::ceil(xi);
    else unsupported(n, c.opset, "nearest_mode " + nearest_mode);
    if (nearest_mode == "round_prefer_ceil" && xi == std::floor(xi) + 0.5) v = std::floor(xi) + 1;
    taps.push_back({int64_t(v), 1.0});
  } else if (antialias && sc < 1) {
    // Downsampling with antialias: the kernel stretched by 1/scale, weights normalised.
    double f = std::floor(xi), t = xi - f, total = 0;
    int64_t start = int64_t(std::floor((mode == "linear" ? -1.0 : -2.0) / sc)) + 1;
    for (int64_t i = start; i <= 1 - start; ++i) {
      double d = std::fabs(sc * (double(i) - t)), w;
      if (mode == "linear") w = std::max(0.0, 1 - d);
      else w = d < 1 ? ((A + 2) * d - (A + 3)) * d * d + 1 : d < 2 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A : 0;
      taps.push_back({int64_t(f) + i, w});
      total += w;
    }
    for (auto& tw : taps) tw.second /= total;
  } else if (mode == "linear") {
    double f = std::floor(xi), t = xi - f;
    taps = {{int64_t(f), 1 - t}, {int64_t(f) + 1, t}};
  } else {
    double f = std::floor(xi), t = xi - f;
    auto k = [A](double d) {
      d = std::fabs(d);
      if (d <= 1) return (A + 2) * d * d * d - (A + 3) * d * d + 1;
      if (d < 2) return A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A;
      return 0.0;
    };
    for (int j = -1; j <= 2; ++j) taps.push_back({int64_t(f) + j, k(t - j)});
  }
  return taps;
}

Value resize(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = n.op_type();
  Tensor x = c.t(0);
  int64_t r = x.ndim();
  std::string mode = attr_s(n, "mode", "nearest");
  std::string coord = "half_pixel", nearest_mode = "round_prefer_floor";
  std::vector<double> scales, roi;
  Ints sizes;
  Ints axes;
  if (op == "Upsample" || c.opset < 11) {
    coord = "asymmetric";
    nearest_mode = "floor";
    if (op == "Upsample" && c.opset < 9) {
      auto* a = find_attr(n, "scales");
      if (a) scales.assign(a->floats().begin(), a->floats().end());
    } else {
      scales = c.h(1);
    }
  } else {
    coord = attr_s(n, "coordinate_transformation_mode", "half_pixel");
    nearest_mode = attr_s(n, "nearest_mode", "round_prefer_floor");
    if (c.has(1)) roi = c.h(1);
    if (c.has(2)) scales = c.h(2);
    if (c.has(3)) sizes = c.ints(3);
    for (auto a : attr_ints(n, "axes")) axes.push_back(norm_axis(a, r, n));
  }
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  if (mode != "nearest" && mode != "linear" && mode != "cubic") unsupported(n, c.opset, "mode " + mode);
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  std::vector<double> scale(size_t(r), 1.0), roi_start(size_t(r), 0.0), roi_end(size_t(r), 1.0);
  Shape out = x.shape();
  if (!roi.empty()) {
    if (roi.size() != 2 * axes.size()) bad(n, "roi has " + std::to_string(roi.size()) + " values");
    for (size_t k = 0; k < axes.size(); ++k) {
      roi_start[size_t(axes[k])] = roi[k];
      roi_end[size_t(axes[k])] = roi[k + axes.size()];
    }
  }
  for (auto v : scales)
    if (!(v > 0 && v <= double(kMaxWindowValue))) bad(n, "scale " + std::to_string(v) + " is not a positive finite number");
  for (auto v : sizes)
    if (v < 0 || v > kMaxWindowValue) bad(n, "size " + std::to_string(v) + " is negative or absurdly large");
  for (int64_t a = 0; a < r; ++a)
    if (x.dim(int(a)) > kMaxWindowValue) bad(n, "input dimension " + std::to_string(x.dim(int(a))) + " is too large");
  resize_extent(c, x, axes, sizes, scales, out, scale);
  c.budget(out, "the resized output");
  for (int64_t a = 0; a < r; ++a) {
    c.budget({out[size_t(a)], x.dim(int(a))}, "the interpolation matrix of axis " + std::to_string(a));
  }
  const double extrap = attr_f(n, "extrapolation_value", 0.0);
  const bool exclude = attr_i(n, "exclude_outside", 0) != 0;
  const bool antialias = op == "Resize" && c.opset >= 18 && attr_i(n, "antialias", 0) != 0;
  Tensor y = x.cast(float_type(x.dtype()));
  Tensor valid;  // tf_crop_and_resize: 1 where every coordinate fell inside
  for (int64_t a = 0; a < r; ++a) {
    int64_t I = x.dim(int(a)), O = out[size_t(a)];
    if (I == 0 && O > 0)
      bad(n, "axis " + std::to_string(a) + " has length 0: no values to resize to length " + std::to_string(O));
    double sc = scale[size_t(a)];
    if (O == I && sc == 1.0 && coord != "tf_crop_and_resize") continue;
    // An antialiased downscale by `sc` has about 4 / sc taps per output.
    if (antialias && sc < 1) c.work(double(O) * (4.0 / sc + 4.0), "the antialiased resize of axis " + std::to_string(a));
    std::vector<float> M(size_t(O * I), 0.f);
    std::vector<float> inside(size_t(O), 1.f);
    for (int64_t o = 0; o < O; ++o) {
      double xo = double(o), xi;
      if (coord == "half_pixel") xi = (xo + 0.5) / sc - 0.5;
      else if (coord == "pytorch_half_pixel") xi = O > 1 ? (xo + 0.5) / sc - 0.5 : 0;
      // align_corners uses the unrounded output length I * scale, as ONNX's reference does.
      else if (coord == "align_corners") xi = O == 1 ? 0 : xo * double(I - 1) / (double(I) * sc - 1);
      else if (coord == "asymmetric") xi = xo / sc;
      else if (coord == "tf_half_pixel_for_nn") xi = (xo + 0.5) / sc;
      else if (coord == "half_pixel_symmetric") {
        double adj = double(O) / (sc * double(I)), center = double(I) / 2;
        xi = center * (1 - adj) + (xo + 0.5) / sc - 0.5;
      } else if (coord == "tf_crop_and_resize") {
        double s0 = roi_start[size_t(a)], e0 = roi_end[size_t(a)];
        xi = O > 1 ? s0 * double(I - 1) + xo * (e0 - s0) * double(I - 1) / double(O - 1) : 0.5 * (s0 + e0) * double(I - 1);
        if (xi < 0 || xi > double(I - 1)) {
          inside[size_t(o)] = 0.f;
          continue;
        }
      } else unsupported(n, c.opset, "coordinate_transformation_mode " + coord);
      if (!(std::fabs(xi) < 1e15)) bad(n, "sampling coordinate " + std::to_string(xi) + " is not finite");
      std::vector<std::pair<int64_t, double>> taps = resize_taps(c, mode, nearest_mode, antialias, xi, sc);
      double total = 0;
      for (auto& [j, w] : taps) {
        if (exclude && (j < 0 || j >= I)) w = 0;
        total += w;
      }
      for (auto& [j, w] : taps) {
        int64_t jj = std::clamp<int64_t>(j, 0, I - 1);
        M[size_t(o * I + jj)] += float(exclude && total != 0 ? w / total : w);
      }
    }
    Tensor Mt = constant_tensor(M, {O, I}, x.device()).transpose(0, 1);  // (I, O)
    y = y.transpose(int(a), int(r - 1)).matmul(Mt).transpose(int(a), int(r - 1));
    if (coord == "tf_crop_and_resize") {
      Shape s(size_t(r), 1);
      s[size_t(a)] = O;
      Tensor m = constant_tensor(inside, s, x.device());
      valid = valid.defined() ? valid * m : m;
    }
  }
  if (valid.defined()) y = Tensor::where(valid.gt(Tensor::scalar(0.5, DType::f32, x.device())), y, Tensor::scalar(extrap, DType::f32, x.device()));
  int32_t elem = c.v(0).elem;
  if (is_int_elem(elem)) y = floor_t(y + 0.5).cast(DType::i32);
  return from_tensor(y, elem);
}

// ---- recurrent layers, unrolled over the sequence ----
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
  Tensor operator()(const Tensor& x) const {
    if (name == "Sigmoid") return x.sigmoid();
    if (name == "Tanh") return x.tanh();
    if (name == "Relu") return x.relu();
    if (name == "LeakyRelu") return x.leaky_relu(alpha);
    if (name == "HardSigmoid") return (x * alpha + beta).clip(0, 1);
    if (name == "Softsign") return x / (x.abs() + 1.0);
    if (name == "Softplus") return x.relu() + ((-x.abs()).exp() + 1.0).log();
    if (name == "Affine") return x * alpha + beta;
    if (name == "ScaledTanh") return (x * beta).tanh() * alpha;
    if (name == "ThresholdedRelu") return x * x.gt(Tensor::scalar(alpha, DType::f32, x.device())).cast(DType::f32);
    if (name == "Elu") return Tensor::where(x.gt(Tensor::scalar(0, DType::f32, x.device())), x, (x.exp() - 1.0) * alpha);
    return Tensor();
  }
};

// The activations f, g (and h for LSTM) of each direction, with the
// optional alpha/beta lists and ONNX's defaults.
std::vector<Activation> rnn_activations(const Ctx& c, int per_dir, int dirs) {
  const auto& n = c.node;
  const std::string& op = n.op_type();
  std::vector<std::string> names;
  if (auto* a = find_attr(n, "activations")) names.assign(a->strings().begin(), a->strings().end());
  std::vector<float> alphas, betas;
  if (auto* a = find_attr(n, "activation_alpha")) alphas.assign(a->floats().begin(), a->floats().end());
  if (auto* a = find_attr(n, "activation_beta")) betas.assign(a->floats().begin(), a->floats().end());
  std::vector<std::string> defaults = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                    : std::vector<std::string>{"Tanh"};
  std::vector<Activation> acts;
  for (int i = 0; i < per_dir * dirs; ++i) {
    Activation act;
    act.name = size_t(i) < names.size() ? names[size_t(i)] : defaults[size_t(i % per_dir)];
    // ONNX's default alpha/beta per activation, when the lists leave them out.
    act.alpha = size_t(i) < alphas.size() ? alphas[size_t(i)] : act.name == "LeakyRelu" ? 0.01 : act.name == "HardSigmoid" ? 0.2 : 1.0;
    act.beta = size_t(i) < betas.size() ? betas[size_t(i)] : act.name == "HardSigmoid" ? 0.5 : 0.0;
    if (!act(Tensor::zeros({1}, DType::f32, c.device)).defined()) unsupported(n, c.opset, "activation " + act.name);
    acts.push_back(act);
  }
  return acts;
}

std::vector<Value> recurrent(const Ctx& c) {
  const auto& n = c.node;
  const std::string& op = n.op_type();
  const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  Tensor X = c.t(0).cast(float_type(c.t(0).dtype())), W = c.t(1), R = c.t(2);
  const int64_t layout = attr_i(n, "layout", 0);
  if (layout) X = X.transpose(0, 1);  // work in (seq, batch, input)
  for (int i = 0; i < 3; ++i) c.ranked(i, 3, 3);
  const int64_t S = X.dim(0), B = X.dim(1), H = attr_i(n, "hidden_size", R.dim(-1));
  if (S > 16 * kMaxUnrolledTaps) unsupported(n, c.opset, "a sequence of " + std::to_string(S) + " steps (more than " + std::to_string(16 * kMaxUnrolledTaps) + ")");
  const std::string direction = attr_s(n, "direction", "forward");
  const int dirs = direction == "bidirectional" ? 2 : 1;
  if (H != R.dim(-1) || W.dim(0) != dirs || R.dim(0) != dirs || W.dim(1) != gates * H || R.dim(1) != gates * H ||
      W.dim(2) != X.dim(2))
    bad(n, "W " + shape_str(W.shape()) + " and R " + shape_str(R.shape()) + " do not fit " + std::to_string(dirs) +
               " direction(s), hidden_size " + std::to_string(H) + " and X " + shape_str(X.shape()));
  const double clip = attr_f(n, "clip", 0);
  if (op == "LSTM" && attr_i(n, "input_forget", 0)) unsupported(n, c.opset, "input_forget 1");
  const int per_dir = op == "LSTM" ? 3 : op == "GRU" ? 2 : 1;
  const std::vector<Activation> acts = rnn_activations(c, per_dir, dirs);
  Ints lens;
  if (c.has(4)) lens = c.ints(4);
  if (c.has(4) && int64_t(lens.size()) != B)
    bad(n, "sequence_lens has " + std::to_string(lens.size()) + " entries for a batch of " + std::to_string(B));
  bool ragged = false;
  for (auto l : lens) ragged |= l != S;
  Tensor init_h = c.has(5) ? c.t(5) : Tensor(), init_c = (op == "LSTM" && c.has(6)) ? c.t(6) : Tensor();
  Tensor P = (op == "LSTM" && c.has(7)) ? c.t(7) : Tensor();
  std::vector<Tensor> ys(static_cast<size_t>(dirs)), hs(static_cast<size_t>(dirs)), cs(static_cast<size_t>(dirs));
  for (int d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    if (reverse && ragged) unsupported(n, c.opset, "sequence_lens with a reverse direction");
    Tensor Wd = W.slice(0, d, d + 1).reshape({gates * H, X.dim(2)}).transpose(0, 1);  // (input, G*H)
    Tensor Rd = R.slice(0, d, d + 1).reshape({gates * H, H});
    Tensor Wb, Rb;
    if (c.has(3)) {
      Tensor Bd = c.t(3).slice(0, d, d + 1).reshape({2 * gates * H});
      Wb = Bd.slice(0, 0, gates * H);
      Rb = Bd.slice(0, gates * H, 2 * gates * H);
    } else {
      Wb = Rb = Tensor::zeros({gates * H}, DType::f32, c.device);
    }
    Tensor h = init_h.defined() ? init_h.slice(0, d, d + 1).reshape({B, H}) : Tensor::zeros({B, H}, DType::f32, c.device);
    Tensor cell = init_c.defined() ? init_c.slice(0, d, d + 1).reshape({B, H}) : Tensor::zeros({B, H}, DType::f32, c.device);
    const Activation *f = &acts[size_t(d * per_dir)], *g = per_dir > 1 ? &acts[size_t(d * per_dir + 1)] : nullptr,
                     *hh = per_dir > 2 ? &acts[size_t(d * per_dir + 2)] : nullptr;
    auto gate = [&](const Tensor& t, int k) { return t.slice(1, k * H, (k + 1) * H); };
    auto clipped = [&](const Tensor& t) { return clip > 0 ? t.clip(-clip, clip) : t; };
    // All input projections at once: (S*B, input) @ (input, G*H).
    Tensor xw = X.reshape({S * B, X.dim(2)}).matmul(Wd).reshape({S, B, gates * H}) + Wb;
    std::vector<Tensor> steps(static_cast<size_t>(S));
    for (int64_t step = 0; step < S; ++step) {
      int64_t t = reverse ? S - 1 - step : step;
      Tensor xt = xw.slice(0, t, t + 1).reshape({B, gates * H});
      Tensor hr = h.matmul(Rd.transpose(0, 1)) + Rb;  // (B, G*H)
      Tensor hn, cn;
      if (op == "RNN") {
        hn = (*f)(clipped(xt + hr));
      } else if (op == "GRU") {
        Tensor z = (*f)(clipped(gate(xt, 0) + gate(hr, 0)));
        Tensor r = (*f)(clipped(gate(xt, 1) + gate(hr, 1)));
        Tensor cand;
        if (attr_i(n, "linear_before_reset", 0)) {
          cand = (*g)(clipped(gate(xt, 2) + r * gate(hr, 2)));
        } else {
          Tensor Rh = Rd.slice(0, 2 * H, 3 * H);  // (H, H)
          cand = (*g)(clipped(gate(xt, 2) + (r * h).matmul(Rh.transpose(0, 1)) + Rb.slice(0, 2 * H, 3 * H)));
        }
        hn = (1.0 - z) * cand + z * h;
      } else {
        Tensor pre = xt + hr;
        Tensor pi = gate(pre, 0), po = gate(pre, 1), pf = gate(pre, 2), pc = gate(pre, 3);
        if (P.defined()) {
          Tensor Pd = P.slice(0, d, d + 1).reshape({3 * H});
          pi = pi + Pd.slice(0, 0, H) * cell;
          pf = pf + Pd.slice(0, 2 * H, 3 * H) * cell;
        }
        Tensor i = (*f)(clipped(pi)), fg = (*f)(clipped(pf)), cc = (*g)(clipped(pc));
        cn = fg * cell + i * cc;
        if (P.defined()) po = po + P.slice(0, d, d + 1).reshape({3 * H}).slice(0, H, 2 * H) * cn;
        Tensor o = (*f)(clipped(po));
        hn = o * (*hh)(cn);
      }
      if (ragged) {
        // Past a sequence's end: its state stays, its output is zero.
        std::vector<float> m(static_cast<size_t>(B));
        for (int64_t b = 0; b < B; ++b) m[size_t(b)] = t < lens[size_t(b)] ? 1.f : 0.f;
        Tensor mask = Tensor::from_data(m, {B, 1}, c.device);
        hn = mask * hn + (1.0 - mask) * h;
        if (cn.defined()) cn = mask * cn + (1.0 - mask) * cell;
        steps[size_t(t)] = (mask * hn).reshape({1, 1, B, H});
      } else {
        steps[size_t(t)] = hn.reshape({1, 1, B, H});
      }
      h = hn;
      if (cn.defined()) cell = cn;
      // Each step's state feeds the next: materialise it now and then so a
      // long sequence is not one chain of thousands of lazy ops.
      if (step % 16 == 15) {
        bound_chain(h);
        if (cell.defined()) bound_chain(cell);
      }
    }
    ys[size_t(d)] = S == 1 ? steps[0] : Tensor::cat(steps, 0);  // (S, 1, B, H)
    hs[size_t(d)] = h.reshape({1, B, H});
    cs[size_t(d)] = cell.reshape({1, B, H});
  }
  Tensor Y = dirs == 1 ? ys[0] : Tensor::cat(ys, 1);
  Tensor Yh = dirs == 1 ? hs[0] : Tensor::cat(hs, 0), Yc = dirs == 1 ? cs[0] : Tensor::cat(cs, 0);
  if (layout) {
    Y = Y.permute({2, 0, 1, 3});
    Yh = Yh.transpose(0, 1);
    Yc = Yc.transpose(0, 1);
  }
  const int32_t elem = c.v(0).elem;  // float or double
  std::vector<Value> out = {from_tensor(Y, elem), from_tensor(Yh, elem)};
  if (op == "LSTM") out.push_back(from_tensor(Yc, elem));
  return out;
}

// Per-axis parameters (scale, zero point) of the quantize ops brought to x's rank.
Tensor along_axis(const onnx::NodeProto& n, const Tensor& p, const Tensor& x, int64_t axis) {
  if (p.ndim() == 0 || p.numel() == 1) return p.reshape({});
  axis = norm_axis(axis, x.ndim(), n);
  if (p.numel() != x.dim(int(axis)))
    bad(n, "a per-axis parameter of " + std::to_string(p.numel()) + " values for axis " + std::to_string(axis) + " of " +
               shape_str(x.shape()));
  Shape s(size_t(x.ndim()), 1);
  s[size_t(axis)] = p.numel();
  return p.reshape(s);
}

Tensor saturate(const Tensor& q, int32_t elem) {
  double lo = elem == TP::INT8 ? -128 : 0, hi = elem == TP::INT8 ? 127 : 255;
  if (elem == TP::INT32) { lo = -2147483648.0; hi = 2147483520.0; }
  return q.clip(lo, hi);
}

Value quantize(const Ctx& c) {
  Tensor x = c.t(0).cast(DType::f32);
  int64_t axis = attr_i(c.node, "axis", 1);
  Tensor scale = along_axis(c.node, c.t(1).cast(DType::f32), x, axis);
  int32_t elem = c.has(2) ? c.v(2).elem : int32_t(TP::UINT8);
  Tensor zp = c.has(2) ? along_axis(c.node, c.t(2).cast(DType::f32), x, axis) : Tensor::scalar(0, DType::f32, x.device());
  return from_tensor(saturate(round_even(divide(x, scale)) + zp, elem).cast(DType::i32), elem);
}

Value dequantize(const Ctx& c) {
  Tensor x = c.t(0).cast(DType::f32);
  int64_t axis = attr_i(c.node, "axis", 1);
  Tensor scale = along_axis(c.node, c.t(1).cast(DType::f32), x, axis);
  Tensor zp = c.has(2) ? along_axis(c.node, c.t(2).cast(DType::f32), x, axis) : Tensor::scalar(0, DType::f32, x.device());
  return from_tensor((x - zp) * scale, TP::FLOAT);
}

// y = saturate(round(x / scale) + zero_point) with scale and zero point from
// the range of x (widened to hold 0), as uint8.
std::vector<Value> dynamic_quantize(const Ctx& c) {
  Tensor x = c.t(0).cast(DType::f32);
  Tensor zero = Tensor::scalar(0, DType::f32, c.device);
  Tensor lo = x.min().minimum(zero), hi = x.max().maximum(zero);
  Tensor scale = (hi - lo) / 255.0;
  Tensor zp = saturate(round_even(zero - divide(lo, scale)), TP::UINT8);
  Tensor y = saturate(round_even(divide(x, scale)) + zp, TP::UINT8);
  return {from_tensor(y.cast(DType::i32), TP::UINT8), from_tensor(scale, TP::FLOAT),
          from_tensor(zp.cast(DType::i32), TP::UINT8)};
}

// ---- integer / quantized linear algebra: dequantize, compute in float32 ----
// (exact while the integer sums stay below 2^24, which holds for 8-bit data
// and the sizes quantized layers use)
Tensor zero_shifted(const Ctx& c, size_t x, size_t zp, int64_t zp_axis) {
  Tensor t = c.t(x).cast(DType::f32);
  if (!c.has(zp)) return t;
  Tensor z = c.t(zp).cast(DType::f32);
  if (z.numel() == 1) return t - z.reshape({});
  Shape s(size_t(t.ndim()), 1);
  s[size_t(norm_axis(zp_axis, t.ndim(), c.node))] = z.numel();
  return t - z.reshape(s);
}

Value conv_on(const Ctx& c, const Tensor& x, const Tensor& w, const Tensor& bias) {
  Value xv = from_tensor(x, TP::FLOAT), wv = from_tensor(w, TP::FLOAT), bv;
  std::vector<Value*> ins = {&xv, &wv};
  if (bias.defined()) {
    bv = from_tensor(bias, TP::FLOAT);
    ins.push_back(&bv);
  }
  Ctx sub{c.node, ins, c.opset, c.device, c.max_elements};
  return from_tensor(conv_of(sub), TP::FLOAT);
}

Value quantized_linear(const Ctx& c) {
  const std::string& op = c.node.op_type();
  if (op == "MatMulInteger") {
    // zero points: a's per row (axis 0 of a 2-D A), b's per column
    Tensor y = zero_shifted(c, 0, 2, 0).matmul(zero_shifted(c, 1, 3, -1));
    return from_tensor(y.cast(DType::i32), TP::INT32);
  }
  if (op == "ConvInteger") {
    Value y = conv_on(c, zero_shifted(c, 0, 2, 1), zero_shifted(c, 1, 3, 0), Tensor());
    return from_tensor(y.tensor.cast(DType::i32), TP::INT32);
  }
  auto scale_of = [&](size_t i, int64_t rank, int64_t axis) {
    Tensor s = c.t(i).cast(DType::f32);
    if (s.numel() == 1) return s.reshape({});
    Shape sh(size_t(rank), 1);
    sh[size_t(norm_axis(axis, rank, c.node))] = s.numel();
    return s.reshape(sh);
  };
  int32_t out_elem = c.has(7) ? c.v(7).elem : int32_t(TP::UINT8);
  Tensor y;
  if (op == "QLinearMatMul") {
    Tensor a = zero_shifted(c, 0, 2, 0) * scale_of(1, c.rank(0), 0);
    Tensor b = zero_shifted(c, 3, 5, -1) * scale_of(4, c.rank(3), -1);
    y = a.matmul(b);
  } else {  // QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B
    Tensor x = zero_shifted(c, 0, 2, 1) * scale_of(1, c.rank(0), 1);
    Tensor w = zero_shifted(c, 3, 5, 0) * scale_of(4, c.rank(3), 0);
    Tensor bias;
    if (c.has(8)) bias = c.t(8).cast(DType::f32) * (c.t(1).cast(DType::f32).reshape({}) * c.t(4).cast(DType::f32).reshape({-1}));
    y = conv_on(c, x, w, bias).tensor;
  }
  Tensor ys = c.t(6).cast(DType::f32).reshape({});
  Tensor yz = c.has(7) ? c.t(7).cast(DType::f32).reshape({}) : Tensor::scalar(0, DType::f32, c.device);
  return from_tensor(saturate(round_even(divide(y, ys)) + yz, out_elem).cast(DType::i32), out_elem);
}

}  // namespace

std::vector<OpDef> nn_layer_ops() {
  using namespace types;
  const auto D = Placement::Device;
  return {
      {"Resize", 10, kNumeric, D, resize}, {"Upsample", 7, kNumeric, D, resize},
      {"RNN", 1, kFloat, D, recurrent}, {"GRU", 1, kFloat, D, recurrent}, {"LSTM", 1, kFloat, D, recurrent},
      {"QuantizeLinear", 10, kFloat | kInt, D, quantize}, {"DequantizeLinear", 10, kInt, D, dequantize},
      {"DynamicQuantizeLinear", 11, kFloat, D, dynamic_quantize},
      {"MatMulInteger", 10, kInt, D, quantized_linear}, {"ConvInteger", 10, kInt, D, quantized_linear},
      {"QLinearMatMul", 10, kInt, D, quantized_linear}, {"QLinearConv", 10, kInt, D, quantized_linear},
  };
}

}  // namespace tl::onnx_detail
