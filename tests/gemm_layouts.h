// Matmuls over the shapes and layouts that take every path of a GPU GEMM
// template (float4 loads along either axis of either operand, scalar loads,
// ragged tile edges, batches, a fused bias + ReLU epilogue), each run on a
// device and on the CPU device and compared. Used by test_cuda and by
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
      {1, 16, 12544, 32, false, false}, {1, 1000, 1, 1280, false, false}, {4, 512, 512, 512, false, false}};
  return cases;
}

// "" when relu(A @ B + bias) on `device` matches the CPU device, else why.
inline std::string check_gemm_layout(const GemmLayout& c, const std::string& device) {
  tl::Generator gen(7);
  tl::Tensor a = tl::Tensor::randn(c.ta ? tl::Shape{c.b, c.k, c.m} : tl::Shape{c.b, c.m, c.k}, gen);
  tl::Tensor b = tl::Tensor::randn(c.tb ? tl::Shape{c.b, c.n, c.k} : tl::Shape{c.b, c.k, c.n}, gen);
  tl::Tensor bias = tl::Tensor::randn({c.n}, gen);
  auto run = [&](const std::string& on) {
    tl::Tensor x = a.to(on), y = b.to(on);
    if (c.ta) x = x.transpose();
    if (c.tb) y = y.transpose();
    return (x.matmul(y) + bias.to(on)).relu().to_vector();
  };
  std::string why;
  if (tltest::all_close(run(device), run("cpu"), 1e-4, 1e-4 * std::sqrt(double(c.k)), &why)) return "";
  return c.label() + ": " + why;
}

}  // namespace tlops
