// Hand-written kernel templates (kernels/) specialised with constants at run
// time. The scheduler uses them where a generic kernel would be slow (GEMM).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/runtime/device.h"
#include "core/runtime/kernel_files.h"

namespace tl {

// Elementwise ops applied to each element of C as it is stored, rendered by
// the generic renderer (render.cpp): after `statements`, `value` is the
// element to store, an expression of `acc` (the sum) and C's position
// `batch`, `row`, `col`. It may read the kernel's buffers b1, b2, ... whose
// element types `buffers` lists (b1 and b2 are A and B). Empty: store acc.
// With `flat`, the template also passes C's flat index (batch*M + row)*N
// + col as `flat`, and the epilogue reads whole tensors through it: its text
// then names no size of C, so it fits a template sized at run time.
struct GemmEpilogue {
  std::string statements, value = "acc";
  std::vector<std::string> buffers;
  bool flat = false;
  // Set where `value` is clamp(acc + b<bias>[row], lo, hi) with NaN kept
  // (bias -1: none; lo, hi possibly infinite): a conv's bias and ReLU or
  // ReLU6. A template may then apply it in registers (the C device's
  // micro-kernel) instead of rendering `value`.
  bool row_bias_clamp = false;
  // The same clamp with the bias read at [batch] instead (bias >= 0): a
  // depthwise convolution's, whose channels are the product's batch.
  bool batch_bias_clamp = false;
  int bias = -1;
  double lo = -INFINITY, hi = INFINITY;
};

// C[b, m, n] = epilogue(sum_k A[b*sa[0] + m*sa[1] + k*sa[2]] * B[b*sb[0] + k*sb[1] + n*sb[2]])
// Buffers in launch order: C (contiguous batch x m x n), A, B, then the
// epilogue's other inputs.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t a_strides[3] = {0, 0, 0};
  int64_t a_period = 0;  // MatmulHint::a_period: A's batch index wraps (gemm_template_wraps_a)
  int64_t b_strides[3] = {0, 0, 0};
  GemmEpilogue epilogue;
  // A (B) is a constant (a weight realized before this graph runs): a
  // template may then read it from a copy in its own layout, made once
  // (PackedOperand).
  bool a_constant = false, b_constant = false;
  // Active: B is a convolution's image, read through this gather (the
  // template said it can, gemm_template_gathers); b_strides are then unused.
  ConvGather gather;
  // Active: C's planes (one per batch item and row, gather.out_w wide) are
  // max-pooled through this window (ConvGather::max) as they are computed,
  // into pool_h x pool.out_w planes; C itself is not stored
  // (KernelPlan::pool: the C device's template, with an epilogue in
  // registers or none).
  ConvGather pool;
  int64_t pool_h = 0;
};

// A constant operand (a weight) that a kernel reads from a copy in its own
// layout: the kernel takes one more buffer, which it fills on first use.
// Realize keeps that buffer with the operand's (Buffer::derived under `key`,
// which names the layout), so it is packed once per weight, not per call.
struct PackedOperand {
  int operand = 1;  // the launch buffer it is a copy of: 1 = A, 2 = B
  int64_t bytes = 0;
  std::string key;
};

struct TemplateKernel {
  std::string source;
  // The kernel's function name in `source` when it is not the GEMM's own
  // name: a template sized at run time is named after its options, so that
  // every GEMM those options fit shares one compiled kernel.
  std::string entry;
  // Integer arguments after the buffers (LaunchArgs::ints): the sizes and
  // strides of a template sized at run time, int or long (int_bytes).
  std::vector<int64_t> ints;
  int int_bytes = 4;
  int64_t global[3] = {1, 1, 1};
  int64_t local[3] = {0, 0, 0};
  // Each packed operand is one more buffer after the others, in this order.
  std::vector<PackedOperand> packed;
  // Other renderings of the same kernel that the tuner may time instead
  // (core/tune.h): the same arguments, the same result up to float rounding.
  // `label` names this rendering's options ("default", "split=cols kc=576").
  std::string label;
  std::vector<TemplateKernel> candidates;
};

// Whether the device names a GEMM template (DeviceInfo::gemm_template) that
// was built in; the scheduler then plans matmuls as GEMM kernels.
bool has_gemm_template(const Device& device);
// Whether that template reads a convolution's B from its image (ConvGather)
// rather than from materialised im2col columns.
bool gemm_template_gathers(const Device& device);
// Whether it also computes products over one channel's plane per batch
// item (a depthwise convolution, a max pool: MatmulHint::gather_only).
bool gemm_template_gathers_planes(const Device& device);
// Whether a product is one row over one channel's plane per batch item (M =
// 1, a gather of one channel): a depthwise convolution or a max pool.
bool gemm_over_planes(const GemmShape& s);
// Whether its products over planes read A through MatmulHint::a_period
// (CUDA's kernels/depthwise.cu); any other product with a period is a logic
// error at render time.
bool gemm_template_wraps_a(const Device& device);
// Whether it computes a max pool of a product as the product is computed
// (GemmShape::pool): the C device's.
bool gemm_template_pools(const Device& device);

// Whether the device's template computes this product faster on its own
// than with a max pool of its result (GemmShape::pool): the C device's
// Winograd, which a pooled product does not take, where it is the default.
bool gemm_faster_unpooled(const Device& device, const GemmShape& shape);

// Whether the device's GEMM template passes C's flat index to its epilogue
// (GemmEpilogue::flat).
bool gemm_epilogue_takes_flat(const Device& device);

// Rendered for the device's dialect; returns false when the device has no
// GEMM template (the scheduler then emits a generic reduce kernel).
bool render_gemm(const Device& device, const GemmShape& shape, const std::string& name, TemplateKernel& out);

// ShapeError on a negative size.
void check_gemm_shape(const GemmShape& s);
// Whether index math needs 64 bits with tiles of tm x tn x tk.
bool gemm_needs_wide_index(const GemmShape& s, int64_t tm, int64_t tn, int64_t tk);
// The placeholders every template fills the same way (NAME, M, N, K, the
// strides, IDX, EPILOGUE), spelled in `d`.
std::map<std::string, std::string> gemm_values(const GemmShape& s, const std::string& name, bool wide,
                                               const Dialect& d);

// The GPU templates (gemm.cl, gemm.cu) are one description in two dialects:
// a work-group (block) computes a tm x tn tile of C, tk rows of K a step,
// each of its (tm/wm) x (tn/wn) items (threads) a wm x wn block.
struct GpuTiles {
  int tm, tn, tk, wm, wn;
  int threads() const { return (tm / wm) * (tn / wn); }
  std::string label() const;  // "TMxTNxTK/WMxWN", as the tuner's table names them
  bool operator==(const GpuTiles&) const = default;
};
// Among `tiles` (largest first), the first that suits the product's shape
// (not smaller than 32 x 32, not taller or wider than the product rounded up
// to 32, no larger than 32 x 32 when K is under 128) and still gives every
// compute unit four work-groups: a smaller tile keeps more units busy and
// gives each others to switch to while one waits on memory. Failing that,
// the 32 x 32 tile, or the last.
GpuTiles pick_gpu_tiles(const GemmShape& s, const DeviceInfo& info, const std::vector<GpuTiles>& tiles);
// `file` specialised with gemm_values (named `name`), the tiles' TM, TN, TK,
// WM, WN and the template's own `values`, launched as one work-group per
// tile of C and one z slice per batch; labelled "tile=..." for the tuner.
TemplateKernel render_gpu_tiles(const char* file, const GemmShape& s, const std::string& name, const Dialect& d,
                                const GpuTiles& t, std::map<std::string, std::string> values);

// The C device's, calling its GEMM library (runtime/kernel_files.h).
TemplateKernel render_gemm_c(const GemmShape& shape, const std::string& name);  // gemm_c.cpp
bool gemm_c_winograd_by_default(const GemmShape& shape);                       // gemm_c.cpp
TemplateKernel render_gemm_opencl(const GemmShape& shape, const std::string& name, const DeviceInfo& info,
                                  const Dialect& d);  // gemm_opencl.cpp
TemplateKernel render_gemm_cuda(const GemmShape& shape, const std::string& name, const DeviceInfo& info,
                                const Dialect& d);  // gemm_cuda.cpp

}  // namespace tl
