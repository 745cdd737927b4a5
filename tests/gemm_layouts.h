// Matmuls over the shapes and layouts that take every path of a GPU GEMM
// template (float4 loads along either axis of either operand, scalar loads,
// ragged tile edges, batches, a fused bias + ReLU epilogue), each run on a
// device and on the CPU device and compared; on the CPU device itself,
// against double precision on the host. Used by test_cuda and by
// `tinylens-cli selftest` (the GPU machine has no Qt).
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "tests/compare.h"
#include "core/tensor.h"

namespace tlops {

struct GemmLayout {
  int64_t b, m, n, k;
  bool ta, tb;  // operand stored transposed (read through a transposed view)
  std::string label() const {
    return std::to_string(b) + "x" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           (ta ? " A^T" : "") + (tb ? " B^T" : "");
  }
};

inline const std::vector<GemmLayout>& gemm_layouts() {
  static const std::vector<GemmLayout> cases = {
      {1, 128, 128, 64, false, false}, {1, 1, 1, 1, false, false},     {1, 3, 5, 7, false, false},
      {1, 129, 257, 33, false, false}, {1, 64, 96, 128, true, false},  {1, 64, 96, 128, false, true},
      {1, 132, 68, 20, true, true},    {3, 40, 50, 60, false, false},  {2, 256, 8, 1152, false, true},
      {1, 16, 12544, 32, false, false}, {1, 1000, 1, 1280, false, false}, {4, 512, 512, 512, false, false},
      // B^T with K in whole and ragged blocks of 16 and of 8 rows (the C
      // device turns VW x VW blocks of it in registers, 16 on AVX-512 and 8
      // on AVX2): a weight gradient's shapes
      {1, 32, 288, 1000, false, true}, {1, 20, 100, 77, false, true},
      // a few columns, which the C device computes transposed (C^T = B^T A^T)
      {1, 240, 1, 960, false, false}, {1, 130, 7, 300, true, false},
      // ... with few rows too (squeeze-and-excite products: 28 x 672 by a pixel)
      {1, 28, 1, 672, false, false}, {1, 6, 1, 144, true, false}};
  return cases;
}

// relu(A @ B + bias) of one layout's random operands (seed 7), on `on`.
struct GemmLayoutData {
  tl::Tensor a, b, bias;
  explicit GemmLayoutData(const GemmLayout& c) {
    tl::Generator gen(7);
    a = tl::Tensor::randn(c.ta ? tl::Shape{c.b, c.k, c.m} : tl::Shape{c.b, c.m, c.k}, gen);
    b = tl::Tensor::randn(c.tb ? tl::Shape{c.b, c.n, c.k} : tl::Shape{c.b, c.k, c.n}, gen);
    bias = tl::Tensor::randn({c.n}, gen);
  }
  std::vector<float> run(const GemmLayout& c, const std::string& on) const {
    tl::Tensor x = a.to(on), y = b.to(on);
    if (c.ta) x = x.transpose();
    if (c.tb) y = y.transpose();
    return (x.matmul(y) + bias.to(on)).relu().to_vector();
  }
};

// "" when relu(A @ B + bias) on `device` matches the same computed in double
// precision on the host, else why: the check of the CPU device's own layouts.
inline std::string check_gemm_layout_reference(const GemmLayout& c, const std::string& device) {
  const GemmLayoutData d(c);
  const std::vector<float> av = d.a.to_vector(), bv = d.b.to_vector(), biasv = d.bias.to_vector();
  std::vector<float> want(size_t(c.b * c.m * c.n));
  for (int64_t q = 0; q < c.b; ++q)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = biasv[size_t(j)];
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = av[size_t(c.ta ? (q * c.k + p) * c.m + i : (q * c.m + i) * c.k + p)];
          const double y = bv[size_t(c.tb ? (q * c.n + j) * c.k + p : (q * c.k + p) * c.n + j)];
          s += x * y;
        }
        want[size_t((q * c.m + i) * c.n + j)] = float(s > 0 ? s : 0);
      }
  std::string why;
  if (tltest::all_close(d.run(c, device), want, 1e-4, 1e-4 * std::sqrt(double(c.k)), &why)) return "";
  return c.label() + ": " + why;
}

// "" when relu(A @ B + bias) on `device` matches the CPU device, else why.
inline std::string check_gemm_layout(const GemmLayout& c, const std::string& device) {
  const GemmLayoutData d(c);
  std::string why;
  if (tltest::all_close(d.run(c, device), d.run(c, "cpu"), 1e-4, 1e-4 * std::sqrt(double(c.k)), &why)) return "";
  return c.label() + ": " + why;
}

}  // namespace tlops
