// Graph -> kernels. Elementwise chains fuse into one kernel; elementwise
// producers fuse into the reduction that consumes them; movement ops become
// index arithmetic. A node gets its own buffer (is "materialised") when it is
// a root, a reduction, a Contiguous, a GEMM operand, or an expensive value
// read by several consumers. A GEMM's elementwise consumers (bias, batch-norm,
// activation, residual add) are written by the GEMM's own store.
#pragma once
#include <functional>
#include <vector>

#include "core/ops.h"

namespace tl {

struct KernelPlan {
  enum class Kind { Elementwise, Reduce, Gemm } kind = Kind::Elementwise;
  NodeRef output;               // the node whose buffer the kernel writes
  std::vector<NodeRef> inputs;  // nodes with buffers by the time it runs; parameters 1..n
  std::vector<NodeRef> fused;   // nodes computed inside, sources first
  // Kind::Gemm: inputs are the two operands (B may be a convolution's image,
  // when inputs[1] is its MatmulHint's `image`), then what the epilogue reads;
  // fused[0] is the product, the rest its epilogue, applied as C is stored.
  const Node& gemm() const { return *fused.front(); }
  // Kind::Gemm: a max pool of the epilogue's result (a node whose hint has
  // ConvGather::max) computed by the same kernel, or null. The epilogue then
  // ends at the pool's image, and `output` is the pool, the last of `fused`:
  // C itself is never stored.
  NodeRef pool;
  const NodeRef& epilogue_end() const { return pool ? pool->matmul->image : output; }
};

// Kernels in execution order. `gemm` says whether the target device has a
// GEMM template; without one, matmuls stay generic reductions. `gather` says
// whether that template reads a convolution's B from its image (ConvGather):
// the GEMM's inputs are then A and the image, and no im2col copy is made.
// `pools`, where given, says whether the template computes a convolution
// with a max pool of its result (KernelPlan::pool) as that merged plan asks;
// a convolution whose only reader is a max pool is then merged with it.
// `rows`, where given, says whether a device computes an elementwise kernel
// with the reductions over its last axis that only it reads (a softmax's, a
// LayerNorm's) as the merged plan asks: those reductions' nodes are then
// among its fused nodes; without it they merge wherever the graph allows.
std::vector<KernelPlan> schedule(const std::vector<NodeRef>& roots, bool gemm, bool gather = false,
                                 const std::function<bool(const KernelPlan&)>& pools = {},
                                 const std::function<bool(const KernelPlan&)>& rows = {});

}  // namespace tl
