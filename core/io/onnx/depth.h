// How far a lazy value stands from computed data: what OnnxModel::run
// measures to compute long chains before they grow too deep (onnx.cpp).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "core/ops.h"

namespace tl::onnx_detail {

// How far `root` stands from computed data, along the longest path. `ops`:
// the compute ops one kernel would fuse, which is what makes a long chain
// slow to fuse; views move no data and do not count, and a reduction (a
// GEMM among them) ends a kernel, so the count starts again after it.
// `views`: nodes of any kind since the last reduction, which the renderer
// lowers recursively into one kernel's index expressions (a node that only
// a gathering GEMM computes, a depthwise convolution's gather-only hint,
// reads just its weights and image); bounded at kViewsPerOp times the ops'
// limit. `nodes`: the same along the whole path, reductions included, which
// freeing the graph unwinds recursively; bounded at kNodesPerOp times.
// Found without recursion; `memo` remembers nodes already measured during
// one run (and keeps them alive, so an address is never reused for another
// node meanwhile).
struct LazyDepth {
  int64_t ops = 0, views = 0, nodes = 0;
};
using DepthMemo = std::unordered_map<const Node*, std::pair<LazyDepth, NodeRef>>;
constexpr int64_t kViewsPerOp = 4;
constexpr int64_t kNodesPerOp = 32;
bool too_deep(const LazyDepth& d, int64_t limit);
LazyDepth lazy_depth(const NodeRef& root, DepthMemo& memo);

}  // namespace tl::onnx_detail
