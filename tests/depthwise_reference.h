// A depthwise convolution computed directly in double precision, for the
// tests of core/depthwise.h and of ONNX's depthwise Conv: zero padding,
// strides and dilations per axis.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tltest {

struct DepthwiseWindow {
  int H, W, KH, KW, SH, SW, DH, DW;
  int top, bottom, left, right;  // every zero added before the window, however the model gives it
  int out_h() const { return (H + top + bottom - (KH - 1) * DH - 1) / SH + 1; }
  int out_w() const { return (W + left + right - (KW - 1) * DW - 1) / SW + 1; }
};

// x (N, C, H, W) row-major, weight(c, ky, kx), bias (C values, or none):
// y (N, C, OH, OW) row-major.
inline std::vector<double> depthwise_reference(const std::vector<double>& x, int N, int C, const DepthwiseWindow& g,
                                               const std::function<double(int, int, int)>& weight,
                                               const std::vector<double>& bias) {
  const int OH = g.out_h(), OW = g.out_w();
  std::vector<double> y;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double s = bias.empty() ? 0.0 : bias[size_t(c)];
          for (int ky = 0; ky < g.KH; ++ky)
            for (int kx = 0; kx < g.KW; ++kx) {
              const int iy = oy * g.SH + ky * g.DH - g.top, ix = ox * g.SW + kx * g.DW - g.left;
              if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
              s += x[size_t(((n * C + c) * g.H + iy) * g.W + ix)] * weight(c, ky, kx);
            }
          y.push_back(s);
        }
  return y;
}

// The first value of `got` farther than tol * (1 + |want|) from `want`, with
// its index ("" when every value is that close); `worst` gets the largest
// relative error.
inline std::string first_mismatch(const std::vector<float>& got, const std::vector<double>& want, double tol,
                                  double& worst) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " values, the reference has " + std::to_string(want.size());
  worst = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]) / (1 + std::abs(want[i]));
    worst = std::max(worst, err);
    if (err > tol && first.empty())
      first = std::to_string(got[i]) + " != " + std::to_string(want[i]) + " at flat index " + std::to_string(i);
  }
  return first;
}

}  // namespace tltest
