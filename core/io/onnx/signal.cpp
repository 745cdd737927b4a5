// Signal and host-only ops: window functions, DFT and STFT, detection
// (NonMaxSuppression, RoiAlign), GridSample, Col2Im, and the integer bit ops,
// scatters and Unique. They read their inputs back and compute on the host
// in double precision; only their results go to the device.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/io/onnx/registry.h"

namespace tl::onnx_detail {

namespace {

Value window(const Ctx& c) {
  const std::string& op = c.node.op_type();
  int64_t N = c.first_int(0);
  if (N < 0 || N > (1 << 24)) bad(c.node, "window size " + std::to_string(N));
  c.budget({N}, "the window");
  bool periodic = attr_i(c.node, "periodic", 1) != 0;
  int32_t elem = int32_t(attr_i(c.node, "output_datatype", TP::FLOAT));
  double den = periodic ? double(N) : double(N - 1);
  std::vector<double> w(static_cast<size_t>(std::max<int64_t>(N, 0)));
  for (int64_t i = 0; i < N; ++i) {
    double a = 2 * M_PI * double(i) / den;
    if (op == "HannWindow") w[size_t(i)] = 0.5 - 0.5 * std::cos(a);
    else if (op == "HammingWindow") w[size_t(i)] = 25.0 / 46 - (1 - 25.0 / 46) * std::cos(a);
    else w[size_t(i)] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    w[size_t(i)] = store_as(w[size_t(i)], elem);
  }
  return from_host({N}, elem, w);
}

// DFT on the host (O(n^2) per signal; the signals of models and tests are short).
Value dft(const Ctx& c) {
  auto x = c.h(0);
  const Shape& S = c.shape(0);
  int64_t r = int64_t(S.size());
  if (r < 2 || (S.back() != 1 && S.back() != 2)) bad(c.node, "input must end in a dimension of 1 (real) or 2 (complex)");
  int64_t axis = attr_i(c.node, "axis", 1);
  if (axis < 0) axis += r;
  if (axis <= 0 || axis >= r - 1) bad(c.node, "axis " + std::to_string(axis) + " is not a signal axis");
  bool inverse = attr_i(c.node, "inverse", 0) != 0, onesided = attr_i(c.node, "onesided", 0) != 0;
  int64_t N = S[size_t(axis)], L = c.has(1) ? c.first_int(1) : N;
  if (L <= 0 || L > (1 << 20)) bad(c.node, "dft_length " + std::to_string(L));
  int64_t K = onesided ? L / 2 + 1 : L, cpx = S.back();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= S[size_t(i)];
  for (int64_t i = axis + 1; i < r - 1; ++i) inner *= S[size_t(i)];
  Shape out = S;
  out[size_t(axis)] = K;
  out.back() = 2;
  c.budget(out, "the DFT output");
  c.work(double(outer) * double(inner) * double(K) * double(std::min(N, L)), "the DFT");
  std::vector<double> y(size_t(numel(out)), 0.0);
  const double sign = inverse ? 1 : -1;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in)
      for (int64_t k = 0; k < K; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < std::min(N, L); ++n) {
          size_t at = size_t(((o * N + n) * inner + in) * cpx);
          double xr = x[at], xi = cpx == 2 ? x[at + 1] : 0;
          double ang = sign * 2 * M_PI * double(k * n % L) / double(L);
          re += xr * std::cos(ang) - xi * std::sin(ang);
          im += xr * std::sin(ang) + xi * std::cos(ang);
        }
        if (inverse) {
          re /= double(L);
          im /= double(L);
        }
        size_t at = size_t(((o * K + k) * inner + in) * 2);
        y[at] = re;
        y[at + 1] = im;
      }
  return from_host(out, c.v(0).elem, y);
}

// STFT on the host: windowed frames, each through the DFT of frame_length.
Value stft(const Ctx& c) {
  auto x = c.h(0);
  const Shape& S = c.shape(0);
  if (S.size() != 3 || (S[2] != 1 && S[2] != 2)) bad(c.node, "signal must be (batch, length, 1 or 2)");
  int64_t step = c.first_int(1);
  std::vector<double> window;
  if (c.has(2)) window = c.h(2);
  int64_t L = c.has(3) ? c.first_int(3) : int64_t(window.size());
  if (window.empty()) window.assign(static_cast<size_t>(std::max<int64_t>(L, 0)), 1.0);
  if (L <= 0 || step <= 0 || int64_t(window.size()) != L || L > S[1]) bad(c.node, "bad frame_length / frame_step / window");
  bool onesided = attr_i(c.node, "onesided", 1) != 0;
  int64_t B = S[0], N = S[1], cpx = S[2], frames = (N - L) / step + 1, K = onesided ? L / 2 + 1 : L;
  c.budget({B, frames, K, 2}, "the STFT output");
  c.work(double(B) * double(frames) * double(K) * double(L), "the STFT");
  std::vector<double> y(size_t(B * frames * K * 2), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t k = 0; k < K; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < L; ++n) {
          size_t at = size_t((b * N + f * step + n) * cpx);
          double xr = x[at] * window[size_t(n)], xi = cpx == 2 ? x[at + 1] * window[size_t(n)] : 0;
          double ang = -2 * M_PI * double(k * n % L) / double(L);
          re += xr * std::cos(ang) - xi * std::sin(ang);
          im += xr * std::sin(ang) + xi * std::cos(ang);
        }
        size_t at = size_t(((b * frames + f) * K + k) * 2);
        y[at] = re;
        y[at + 1] = im;
      }
  return from_host({B, frames, K, 2}, c.v(0).elem, y);
}

// NonMaxSuppression on the host: greedy per batch and class, best score first.
Value non_max_suppression(const Ctx& c) {
  auto boxes = c.h(0), scores = c.h(1);
  const Shape &bs = c.shape(0), &ss = c.shape(1);
  if (bs.size() != 3 || bs[2] != 4 || ss.size() != 3 || ss[0] != bs[0] || ss[2] != bs[1])
    bad(c.node, "boxes (B, N, 4) and scores (B, C, N) expected, got " + shape_str(bs) + " and " + shape_str(ss));
  int64_t max_out = c.has(2) ? c.first_int(2) : 0;
  double iou_t = c.has(3) ? c.first(3) : 0, score_t = c.has(4) ? c.first(4) : -INFINITY;
  bool center = attr_i(c.node, "center_point_box", 0) != 0;
  int64_t B = bs[0], N = bs[1], C = ss[1];
  auto corners = [&](int64_t b, int64_t i) {
    const double* p = &boxes[size_t((b * N + i) * 4)];
    std::array<double, 4> r;  // y1 x1 y2 x2
    if (center) r = {p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    else r = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
    return r;
  };
  auto iou = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double ih = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    double iw = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    double inter = ih * iw, uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<double> out;
  int64_t count = 0;
  for (int64_t b = 0; b < B && max_out > 0; ++b)
    for (int64_t k = 0; k < C; ++k) {
      std::vector<int64_t> order;
      for (int64_t i = 0; i < N; ++i)
        if (scores[size_t((b * C + k) * N + i)] > score_t) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return scores[size_t((b * C + k) * N + x)] > scores[size_t((b * C + k) * N + y)];
      });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_out) break;
        bool ok = true;
        for (int64_t j : kept) ok = ok && iou(corners(b, i), corners(b, j)) <= iou_t;
        if (!ok) continue;
        kept.push_back(i);
        out.insert(out.end(), {double(b), double(k), double(i)});
        ++count;
      }
    }
  return from_host({count, 3}, TP::INT64, out);
}

// RoiAlign on the host, sampling as ONNX's reference and ONNX Runtime do
// (including max mode's max over the four weighted corners).
Value roi_align(const Ctx& c) {
  auto x = c.h(0), rois = c.h(1);
  Ints bidx = c.ints(2);
  const Shape& xs = c.shape(0);
  if (xs.size() != 4 || c.shape(1).size() != 2 || c.shape(1)[1] != 4 || int64_t(bidx.size()) != c.shape(1)[0])
    bad(c.node, "X (N, C, H, W), rois (R, 4) and batch_indices (R) expected");
  const int64_t C = xs[1], H = xs[2], W = xs[3], R = c.shape(1)[0];
  if (H < 1 || W < 1) bad(c.node, "X " + shape_str(xs) + " has an empty image");
  const int64_t oh = attr_i_in(c.node, "output_height", 1, 1, kMaxWindowValue);
  const int64_t ow = attr_i_in(c.node, "output_width", 1, 1, kMaxWindowValue);
  const int64_t ratio = attr_i_in(c.node, "sampling_ratio", 0, 0, 1024);
  c.budget({R, C, oh, ow}, "the pooled output");
  const double scale = attr_f(c.node, "spatial_scale", 1.0);
  const bool half = attr_s(c.node, "coordinate_transformation_mode", c.opset >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  const bool is_max = attr_s(c.node, "mode", "avg") == "max";
  std::vector<double> y(size_t(R * C * oh * ow), 0.0);
  for (int64_t r = 0; r < R; ++r) {
    int64_t n = bidx[size_t(r)];
    if (n < 0 || n >= xs[0]) bad(c.node, "batch index " + std::to_string(n) + " out of range");
    const double off = half ? 0.5 : 0;
    double sw = rois[size_t(r * 4)] * scale - off, sh = rois[size_t(r * 4 + 1)] * scale - off;
    double rw = rois[size_t(r * 4 + 2)] * scale - off - sw, rh = rois[size_t(r * 4 + 3)] * scale - off - sh;
    if (!half) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bh = rh / double(oh), bw = rw / double(ow);
    // An adaptive grid follows the box's size, which comes from the file.
    double agh = std::ceil(rh / double(oh)), agw = std::ceil(rw / double(ow));
    if (ratio == 0 && !(agh <= 1024 && agw <= 1024 && agh > -1024 && agw > -1024))
      bad(c.node, "region " + std::to_string(r) + " is not a finite box of reasonable size");
    int64_t gh = ratio > 0 ? ratio : int64_t(agh), gw = ratio > 0 ? ratio : int64_t(agw);
    c.work(double(C) * double(oh) * double(ow) * double(std::max<int64_t>(gh, 1)) * double(std::max<int64_t>(gw, 1)) * double(R),
           "RoiAlign");
    double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < C; ++ch) {
      const double* plane = &x[size_t((n * C + ch) * H * W)];
      for (int64_t ph = 0; ph < oh; ++ph)
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0, best = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double yy = sh + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
              double xx = sw + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v = 0, vmax = 0;
              if (std::isfinite(yy) && std::isfinite(xx) && !(yy < -1.0 || yy > double(H) || xx < -1.0 || xx > double(W))) {
                yy = std::max(yy, 0.0);
                xx = std::max(xx, 0.0);
                int64_t yl = int64_t(yy), xl = int64_t(xx), yh, xh;
                if (yl >= H - 1) { yh = yl = H - 1; yy = double(yl); } else yh = yl + 1;
                if (xl >= W - 1) { xh = xl = W - 1; xx = double(xl); } else xh = xl + 1;
                double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
                double a = hy * hx * plane[yl * W + xl], b = hy * lx * plane[yl * W + xh];
                double cc = ly * hx * plane[yh * W + xl], d = ly * lx * plane[yh * W + xh];
                v = a + b + cc + d;
                vmax = std::max(std::max(a, b), std::max(cc, d));
              }
              acc += v;
              best = first ? vmax : std::max(best, vmax);
              first = false;
            }
          y[size_t(((r * C + ch) * oh + ph) * ow + pw)] = is_max ? best : acc / count;
        }
    }
  }
  return from_host({R, C, oh, ow}, c.v(0).elem, y);
}

// GridSample on the host, with PyTorch's (and ONNX's reference) rules for
// unnormalising, padding and the three modes.
Value grid_sample(const Ctx& c) {
  auto x = c.h(0), grid = c.h(1);
  const Shape &xs = c.shape(0), &gs = c.shape(1);
  if (xs.size() != 4 || gs.size() != 4 || gs[3] != 2 || gs[0] != xs[0])
    unsupported(c.node, c.opset, "only 2-D sampling: X (N, C, H, W) and grid (N, H_out, W_out, 2)");
  const bool align = attr_i(c.node, "align_corners", 0) != 0;
  const std::string mode = attr_s(c.node, "mode", "bilinear"), pad = attr_s(c.node, "padding_mode", "zeros");
  if ((mode != "bilinear" && mode != "nearest" && mode != "bicubic" && mode != "linear" && mode != "cubic") ||
      (pad != "zeros" && pad != "border" && pad != "reflection"))
    unsupported(c.node, c.opset, "mode " + mode + " / padding_mode " + pad);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], Ho = gs[1], Wo = gs[2];
  if (H < 1 || W < 1) bad(c.node, "X " + shape_str(xs) + " has an empty image");
  c.budget({N, C, Ho, Wo}, "the sampled output");
  c.work(double(N) * double(C) * double(Ho) * double(Wo) * 16, "GridSample");
  auto unnormalize = [&](double g, int64_t size) { return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2; };
  auto reflect = [](double v, double twice_low, double twice_high) {
    if (twice_low == twice_high) return 0.0;
    double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
    v = std::fabs(v - lo);
    double extra = std::fmod(v, span);
    // The parity of the number of flips, without converting a huge double to an integer.
    bool even = std::fmod(std::floor(v / span), 2.0) == 0;
    return even ? extra + lo : span - extra + lo;
  };
  auto padded = [&](double v, int64_t size) {
    if (pad == "border") return std::clamp(v, 0.0, double(size - 1));
    if (pad == "reflection") {
      v = align ? reflect(v, 0, 2.0 * double(size - 1)) : reflect(v, -1, 2.0 * double(size) - 1);
      return std::clamp(v, 0.0, double(size - 1));
    }
    return v;
  };
  // Coordinates are doubles from the grid: NaN, infinities and values beyond
  // the image read as padding, never as an integer conversion out of range.
  auto pixel = [&](int64_t n, int64_t ch, double yd, double xd) {
    if (!(yd > -1 && yd < double(H) && xd > -1 && xd < double(W))) return 0.0;  // truncation lands in [0, size)
    int64_t yy = int64_t(yd), xx = int64_t(xd);
    return x[size_t(((n * C + ch) * H + yy) * W + xx)];
  };
  auto cubic = [](double d) {
    const double A = -0.75;
    d = std::fabs(d);
    if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
    if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
    return 0.0;
  };
  std::vector<double> y(size_t(N * C * Ho * Wo));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        size_t g = size_t(((n * Ho + i) * Wo + j) * 2);
        double fx = unnormalize(grid[g], W), fy = unnormalize(grid[g + 1], H);
        for (int64_t ch = 0; ch < C; ++ch) {
          double v = 0;
          if (mode == "bicubic" || mode == "cubic") {
            double x0 = std::floor(fx), y0 = std::floor(fy), tx = fx - x0, ty = fy - y0;
            for (int dy = -1; dy <= 2; ++dy)
              for (int dx = -1; dx <= 2; ++dx) {
                // Each tap is padded on its own (PyTorch's get_value_bounded).
                double px = padded(x0 + dx, W), py = padded(y0 + dy, H);
                v += cubic(tx - dx) * cubic(ty - dy) * pixel(n, ch, py, px);
              }
          } else {
            double px = padded(fx, W), py = padded(fy, H);
            if (mode == "nearest") {
              v = pixel(n, ch, std::nearbyint(py), std::nearbyint(px));
            } else {
              double x0 = std::floor(px), y0 = std::floor(py), tx = px - x0, ty = py - y0;
              v = pixel(n, ch, y0, x0) * (1 - tx) * (1 - ty) + pixel(n, ch, y0, x0 + 1) * tx * (1 - ty) +
                  pixel(n, ch, y0 + 1, x0) * (1 - tx) * ty + pixel(n, ch, y0 + 1, x0 + 1) * tx * ty;
            }
          }
          y[size_t(((n * C + ch) * Ho + i) * Wo + j)] = v;
        }
      }
  return from_host({N, C, Ho, Wo}, c.v(0).elem, y);
}

// Col2Im on the host: every column of the (N, C*prod(block), L) input adds its
// block back into the image (overlaps sum).
Value col2im(const Ctx& c) {
  auto x = c.h(0);
  const Shape& xs = c.shape(0);
  Ints image = c.ints(1), block = c.ints(2);
  size_t d = image.size();
  if (xs.size() != 3 || block.size() != d || d == 0) bad(c.node, "input (N, C*prod(block), L) and matching image/block shapes expected");
  Ints dil = attr_ints_in(c.node, "dilations", Ints(d, 1), 1, kMaxWindowValue);
  Ints st = attr_ints_in(c.node, "strides", Ints(d, 1), 1, kMaxWindowValue);
  Ints pads = attr_ints_in(c.node, "pads", Ints(2 * d, 0), 0, kMaxWindowValue);
  if (dil.size() != d || st.size() != d || pads.size() != 2 * d) bad(c.node, "dilations/strides/pads do not match the image rank");
  for (size_t i = 0; i < d; ++i)
    if (image[i] < 1 || image[i] > kMaxWindowValue || block[i] < 1 || block[i] > kMaxWindowValue)
      bad(c.node, "image shape " + shape_str(image) + " and block shape " + shape_str(block) + " must be positive");
  int64_t kprod = c.budget(Shape(block.begin(), block.end()), "the block");
  {
    Shape out = {xs[0], std::max<int64_t>(xs[1] / kprod, 1)};
    out.insert(out.end(), image.begin(), image.end());
    c.budget(out, "the image");
  }
  int64_t N = xs[0], C = xs[1] / std::max<int64_t>(kprod, 1), L = xs[2];
  Ints blocks(d);  // block positions per axis
  int64_t total = 1;
  for (size_t i = 0; i < d; ++i) {
    int64_t span = image[i] + pads[i] + pads[i + d] - (dil[i] * (block[i] - 1) + 1);
    if (span < 0) bad(c.node, "block larger than the padded image on axis " + std::to_string(i));
    blocks[i] = span / st[i] + 1;
    total *= blocks[i];
  }
  if (total != L || C * kprod != xs[1]) bad(c.node, "input shape " + shape_str(xs) + " does not match the image and block shapes");
  Shape out = {N, C};
  out.insert(out.end(), image.begin(), image.end());
  int64_t img = numel(Shape(image.begin(), image.end()));
  std::vector<double> y(size_t(numel(out)), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch) {
      Ints k(d, 0);
      int64_t kflat = 0;
      do {
        Ints b(d, 0);
        int64_t l = 0;
        do {
          int64_t off = 0;
          bool inside = true;
          for (size_t i = 0; i < d; ++i) {
            int64_t p = b[i] * st[i] + k[i] * dil[i] - pads[i];
            inside = inside && p >= 0 && p < image[i];
            off = off * image[i] + p;
          }
          if (inside) y[size_t((n * C + ch) * img + off)] += x[size_t(((n * C + ch) * kprod + kflat) * L + l)];
          ++l;
        } while (next_index(b, Shape(blocks.begin(), blocks.end())));
        ++kflat;
      } while (next_index(k, Shape(block.begin(), block.end())));
    }
  return from_host(out, c.v(0).elem, y);
}

// ---- host fallbacks: integer bit ops and scatters run on host copies ----
// (read back once; their results are small index tensors or one-off updates)
Value& hosted(const Ctx& c, size_t i) {
  Value& v = c.v(i);
  if (!v.host) {
    v.data = c.h(i);
    v.host = true;
  }
  return v;
}

uint64_t type_mask(int32_t elem) {
  switch (elem) {
    case TP::UINT8: case TP::INT8: return 0xffull;
    case TP::UINT16: case TP::INT16: return 0xffffull;
    case TP::UINT32: case TP::INT32: return 0xffffffffull;
    default: return ~0ull;
  }
}

double from_bits(uint64_t b, int32_t elem) {
  b &= type_mask(elem);
  switch (elem) {
    case TP::INT8: return double(int8_t(b));
    case TP::INT16: return double(int16_t(b));
    case TP::INT32: return double(int32_t(b));
    case TP::INT64: return double(int64_t(b));
    default: return double(b);
  }
}

Value bitwise(const Ctx& c) {
  const std::string& op = c.node.op_type();
  int32_t elem = c.v(0).elem;
  if (!is_int_elem(elem)) bad(c.node, "bit ops need integer inputs");
  hosted(c, 0);
  auto bits = [](double v) { return uint64_t(clamp_i64(v)); };
  if (op == "BitwiseNot") {
    std::vector<double> d = c.v(0).data;
    for (auto& x : d) x = from_bits(~bits(x), elem);
    return from_host(c.shape(0), elem, d);
  }
  hosted(c, 1);
  std::function<double(double, double)> f;
  if (op == "BitwiseAnd") f = [&](double a, double b) { return from_bits(bits(a) & bits(b), elem); };
  else if (op == "BitwiseOr") f = [&](double a, double b) { return from_bits(bits(a) | bits(b), elem); };
  else if (op == "BitwiseXor") f = [&](double a, double b) { return from_bits(bits(a) ^ bits(b), elem); };
  else {
    bool left = attr_s(c.node, "direction", "") == "LEFT";
    f = [&, left](double a, double b) {
      uint64_t sh = bits(b);
      if (sh >= 64) return 0.0;
      return from_bits(left ? bits(a) << sh : bits(a) >> sh, elem);
    };
  }
  return host_binary(c, f, elem);
}

// ScatterElements (and the old Scatter) and ScatterND with their reductions.
Value scatter(const Ctx& c) {
  const std::string& op = c.node.op_type();
  Value& data = hosted(c, 0);
  Ints idx = c.ints(1);
  Value& upd = hosted(c, 2);
  std::string red = attr_s(c.node, "reduction", "none");
  std::vector<double> out = data.data;
  auto apply = [&](double& dst, double v) {
    if (red == "none") dst = v;
    else if (red == "add") dst += v;
    else if (red == "mul") dst *= v;
    else if (red == "max") dst = std::max(dst, v);
    else if (red == "min") dst = std::min(dst, v);
    else unsupported(c.node, c.opset, "reduction " + red);
  };
  const Shape& D = data.shape;
  int64_t r = int64_t(D.size());
  const Shape& U = upd.shape;
  if (op == "ScatterND") {
    const Shape& I = c.ranked(1, 1);
    int64_t L = I.back(), inner = 1;
    if (L < 1 || L > r)
      bad(c.node, "index tuples of length " + std::to_string(L) + " for data of rank " + std::to_string(r) + " " + shape_str(D));
    Shape want(I.begin(), I.end() - 1);
    want.insert(want.end(), D.begin() + L, D.end());
    if (U != want)
      bad(c.node, "updates have shape " + shape_str(U) + ", indices " + shape_str(I) + " and data " + shape_str(D) +
                      " need " + shape_str(want));
    for (size_t i = size_t(L); i < D.size(); ++i) inner *= D[i];
    int64_t tuples = numel(I) / std::max<int64_t>(L, 1);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t row = 0;
      for (int64_t l = 0; l < L; ++l) {
        int64_t v = idx[size_t(t * L + l)], dim = D[size_t(l)];
        if (v < 0) v += dim;
        if (v < 0 || v >= dim) bad(c.node, "index out of range");
        row = row * dim + v;
      }
      for (int64_t k = 0; k < inner; ++k) apply(out[size_t(row * inner + k)], upd.data[size_t(t * inner + k)]);
    }
    return from_host(D, data.elem, out);
  }
  int64_t axis = norm_axis(attr_i(c.node, "axis", 0), r, c.node);
  const Shape& I = c.shape(1);
  if (int64_t(I.size()) != r || U != I)
    bad(c.node, "indices " + shape_str(I) + " and updates " + shape_str(U) + " must have one shape, of the data's rank " +
                    std::to_string(r));
  Ints pos(I.size(), 0);
  size_t k = 0;
  if (numel(I) > 0) do {
      int64_t off = 0;
      for (int64_t a = 0; a < r; ++a) {
        int64_t v = a == axis ? idx[k] : pos[size_t(a)];
        if (a == axis && v < 0) v += D[size_t(a)];
        if (v < 0 || v >= D[size_t(a)]) bad(c.node, "index out of range");
        off = off * D[size_t(a)] + v;
      }
      apply(out[size_t(off)], upd.data[k]);
      ++k;
    } while (next_index(pos, I));
  return from_host(D, data.elem, out);
}

// Unique on the host: values (or slices along `axis`), first indices,
// inverse indices and counts.
std::vector<Value> unique(const Ctx& c) {
  auto x = c.h(0);
  Shape S = c.shape(0);
  auto* ax = find_attr(c.node, "axis");
  int64_t axis = 0;
  if (ax) axis = norm_axis(ax->i(), int64_t(S.size()), c.node);
  else S = {int64_t(x.size())};
  int64_t outer = 1, inner = 1, D = S[size_t(axis)];
  for (int64_t i = 0; i < axis; ++i) outer *= S[size_t(i)];
  for (size_t i = size_t(axis) + 1; i < S.size(); ++i) inner *= S[i];
  // Each slice is compared with every distinct one found so far.
  c.work(double(D) * double(D) * double(std::max<int64_t>(outer * inner, 1)), "Unique");
  auto slice_of = [&](int64_t d) {
    std::vector<double> v;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) v.push_back(x[size_t((o * D + d) * inner + i)]);
    return v;
  };
  std::vector<std::vector<double>> uniq;
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) {
    auto v = slice_of(d);
    auto it = std::find(uniq.begin(), uniq.end(), v);
    if (it == uniq.end()) {
      uniq.push_back(v);
      first.push_back(d);
      counts.push_back(0);
      it = uniq.end() - 1;
    }
    size_t u = size_t(it - uniq.begin());
    ++counts[u];
    inverse[size_t(d)] = int64_t(u);
  }
  std::vector<size_t> order(uniq.size());
  std::iota(order.begin(), order.end(), 0);
  if (attr_i(c.node, "sorted", 1)) std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return uniq[a] < uniq[b]; });
  std::vector<int64_t> rank(uniq.size());
  for (size_t k = 0; k < order.size(); ++k) rank[order[k]] = int64_t(k);
  int64_t U = int64_t(uniq.size());
  Shape ys = S;
  ys[size_t(axis)] = U;
  std::vector<double> y(size_t(numel(ys)));
  for (int64_t k = 0; k < U; ++k) {
    const auto& v = uniq[order[size_t(k)]];
    size_t j = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) y[size_t((o * U + k) * inner + i)] = v[j++];
  }
  std::vector<double> fi, inv, cnt;
  for (int64_t k = 0; k < U; ++k) {
    fi.push_back(double(first[order[size_t(k)]]));
    cnt.push_back(double(counts[order[size_t(k)]]));
  }
  for (auto u : inverse) inv.push_back(double(rank[size_t(u)]));
  return {from_host(ys, c.v(0).elem, y), from_host({U}, TP::INT64, fi), from_host({D}, TP::INT64, inv),
          from_host({U}, TP::INT64, cnt)};
}

}  // namespace

std::vector<OpDef> signal_ops() {
  using namespace types;
  const auto H = Placement::Host;
  return {
      {"HannWindow", 17, kInt, H, window}, {"HammingWindow", 17, kInt, H, window},
      {"BlackmanWindow", 17, kInt, H, window}, {"DFT", 17, kFloat, H, dft}, {"STFT", 17, kFloat, H, stft},
      {"NonMaxSuppression", 10, kFloat, H, non_max_suppression}, {"RoiAlign", 10, kFloat, H, roi_align},
      {"GridSample", 16, kNumeric, H, grid_sample}, {"Col2Im", 18, kAll, H, col2im},
      {"BitwiseAnd", 18, kInt, H, bitwise}, {"BitwiseOr", 18, kInt, H, bitwise},
      {"BitwiseXor", 18, kInt, H, bitwise}, {"BitwiseNot", 18, kInt, H, bitwise},
      {"BitShift", 11, kInt, H, bitwise}, {"Scatter", 9, kAll, H, scatter, 10},
      {"ScatterElements", 11, kAll, H, scatter}, {"ScatterND", 11, kAll, H, scatter},
      {"Unique", 11, kAll, H, unique},
  };
}

}  // namespace tl::onnx_detail
