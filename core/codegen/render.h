// Lowers a planned kernel to the IR and renders it in a device's dialect.
// One renderer serves C, OpenCL C and CUDA C; their differences are data
// (dialect.h).
#pragma once
#include <string>
#include <vector>

#include "core/codegen/templates.h"
#include "core/runtime/device.h"
#include "core/schedule.h"

namespace tl {

// A kernel is a TemplateKernel (its source, entry, launch sizes, and for a
// GEMM its ints, packed operands and candidates for core/tune.h) with a
// name, its ops and its counts.
struct RenderedKernel : TemplateKernel {
  std::string name;  // readable: E_32_112_112, R_1000_1280, GEMM_1_1000_1280
  std::vector<std::string> ops;
  double flops = 0, bytes = 0;
};

RenderedKernel render_kernel(const KernelPlan& plan, const Device& device);
// Whether a GEMM plan's epilogue is the form a template may apply in
// registers (GemmEpilogue::row_bias_clamp), or there is none.
bool gemm_epilogue_in_registers(const KernelPlan& plan, const Device& device);
// Whether a convolution merged with the max pool that alone reads it
// (KernelPlan::pool) is computed so: its epilogue in registers, and a
// product no faster without the pool (gemm_faster_unpooled).
bool gemm_pools_in_kernel(const KernelPlan& plan, const Device& device);
// Whether an elementwise plan that computes the reductions it reads
// (schedule.cpp's fuse_rows) reads memory in order on this device: rows of
// neighbouring elements, or on the C device blocks of neighbouring rows.
bool rows_in_kernel(const KernelPlan& plan, const Device& device);

// The name of r's function in its source.
inline const std::string& entry_of(const RenderedKernel& r) { return r.entry.empty() ? r.name : r.entry; }

// The work-group size L with which a reduction of `outputs` outputs, each
// over `count` elements accumulated in `acc`, is rendered in the grouped form
// (dialect.h), or 0 for the serial form; render.cpp says why the rule is what
// it is. TINYLENS_REDUCE=serial makes render_kernel use the serial form
// everywhere, to measure one against the other; realize keeps rendered
// kernels for the life of the process, so set it before the process starts.
int64_t reduce_group_size(const Dialect& dialect, const DeviceInfo& info, int64_t outputs, int64_t count, DType acc);

}  // namespace tl
