#include "core/io/onnx/depth.h"

#include <algorithm>
#include <vector>

namespace tl::onnx_detail {

bool too_deep(const LazyDepth& d, int64_t limit) { return d.ops > limit || d.nodes > kViewsPerOp * limit; }
LazyDepth lazy_depth(const NodeRef& root, DepthMemo& memo) {
  auto known = [&](const NodeRef& n) { return n->realized() || memo.count(n.get()) > 0; };
  auto depth_of = [&](const NodeRef& n) { return n->realized() ? LazyDepth{} : memo.at(n.get()).first; };
  auto reads = [](const Node& n) -> std::vector<NodeRef> {
    if (n.matmul && n.matmul->gather_only) return {n.matmul->a, n.matmul->image};
    return n.src;
  };
  if (known(root)) return depth_of(root);
  std::vector<std::pair<NodeRef, size_t>> stack = {{root, 0}};  // node, next source to visit
  while (!stack.empty()) {
    NodeRef n = stack.back().first;
    size_t& next = stack.back().second;
    const std::vector<NodeRef> src = reads(*n);
    if (next < src.size()) {
      const NodeRef s = src[next++];
      if (!known(s)) stack.push_back({s, 0});
      continue;
    }
    LazyDepth d;
    for (const auto& s : src) {
      const LazyDepth ds = depth_of(s);
      d.ops = std::max(d.ops, ds.ops), d.nodes = std::max(d.nodes, ds.nodes);
    }
    d.ops = is_reduce(n->op) ? 1 : d.ops + (is_movement(n->op) ? 0 : 1);
    d.nodes += 1;
    memo[n.get()] = {d, n};
    stack.pop_back();
  }
  return depth_of(root);
}

}  // namespace tl::onnx_detail
