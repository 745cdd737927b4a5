#include "core/io/onnx/depth.h"

#include <algorithm>
#include <vector>

namespace tl::onnx_detail {

namespace {

// What a realize of n reads: a node that only a gathering GEMM computes reads
// its weights and image; any other, its sources. Counted and indexed, so the
// walk allocates nothing per step.
bool gather_only(const Node& n) { return n.matmul && n.matmul->gather_only; }
size_t read_count(const Node& n) { return gather_only(n) ? 2 : n.src.size(); }
const NodeRef& read(const Node& n, size_t i) {
  return gather_only(n) ? (i == 0 ? n.matmul->a : n.matmul->image) : n.src[i];
}

}  // namespace

bool too_deep(const LazyDepth& d, int64_t limit) {
  return d.ops > limit || d.views > kViewsPerOp * limit || d.nodes > kNodesPerOp * limit;
}
LazyDepth lazy_depth(const NodeRef& root, DepthMemo& memo) {
  auto known = [&](const NodeRef& n) { return n->realized() || memo.count(n.get()) > 0; };
  auto depth_of = [&](const NodeRef& n) { return n->realized() ? LazyDepth{} : memo.at(n.get()).first; };
  if (known(root)) return depth_of(root);
  std::vector<std::pair<NodeRef, size_t>> stack = {{root, 0}};  // node, next source to visit
  while (!stack.empty()) {
    NodeRef n = stack.back().first;
    size_t& next = stack.back().second;
    if (next < read_count(*n)) {
      const NodeRef& s = read(*n, next++);
      if (!known(s)) stack.push_back({s, 0});
      continue;
    }
    LazyDepth d;
    for (size_t i = 0; i < read_count(*n); ++i) {
      const LazyDepth ds = depth_of(read(*n, i));
      d.ops = std::max(d.ops, ds.ops), d.views = std::max(d.views, ds.views), d.nodes = std::max(d.nodes, ds.nodes);
    }
    const bool reduce = is_reduce(n->op);
    d.ops = reduce ? 1 : d.ops + (is_movement(n->op) ? 0 : 1);
    d.views = reduce ? 1 : d.views + 1;
    d.nodes += 1;
    memo[n.get()] = {d, n};
    stack.pop_back();
  }
  return depth_of(root);
}

}  // namespace tl::onnx_detail
