// Lowers a planned kernel to the IR and renders it in a device's dialect.
// One renderer serves C, OpenCL C and CUDA C; their differences are data
// (dialect.h).
#pragma once
#include <string>
#include <vector>

#include "../runtime/device.h"
#include "../schedule.h"

namespace tl {

struct RenderedKernel {
  std::string name;    // readable: E_32_112_112, R_1000_1280, GEMM_1_1000_1280
  std::string source;
  std::vector<std::string> ops;
  int64_t global[3] = {1, 1, 1}, local[3] = {0, 0, 0};
  double flops = 0, bytes = 0;
};

RenderedKernel render_kernel(const KernelPlan& plan, const Device& device);

}  // namespace tl
