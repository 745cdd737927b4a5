#include "core/graph.h"

#include <algorithm>
#include <unordered_set>

namespace tl {

static std::string describe(const Node& n) {
  auto list = [](const std::vector<int64_t>& v) {
    std::string s = "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + ")";
  };
  auto pairs = [](const std::vector<int64_t>& v) {
    std::string s = "(";
    for (size_t i = 0; i + 1 < v.size(); i += 2)
      s += (i ? ", (" : "(") + std::to_string(v[i]) + ", " + std::to_string(v[i + 1]) + ")";
    return s + ")";
  };
  switch (n.op) {
    case Op::Const: return "value " + std::to_string(n.value);
    case Op::Sum: case Op::ReduceMax: return "axes " + list(n.arg);
    case Op::Permute: return "order " + list(n.arg);
    case Op::Reshape: case Op::Expand: return "to " + shape_str(n.shape);
    case Op::Pad: return "pad " + pairs(n.arg) + " with " + std::to_string(n.value);
    case Op::Shrink: return "ranges " + pairs(n.arg);
    case Op::Flip: return "axes " + list(n.arg);
    case Op::Cast: return std::string("to ") + dtype_name(n.dtype);
    default: return n.matmul ? "matmul " + std::to_string(n.matmul->batch) + "x" + std::to_string(n.matmul->m) + "x" +
                                   std::to_string(n.matmul->n) + "x" + std::to_string(n.matmul->k)
                             : "";
  }
}

// A GEMM's operands are contiguous copies the scheduler reads through the
// matmul hint, not through src; their kernels must still find their nodes.
static std::vector<const Node*> inputs_of(const Node& n) {
  std::vector<const Node*> in;
  for (auto& s : n.src) in.push_back(s.get());
  if (n.matmul)
    for (const Node* extra : {n.matmul->a.get(), n.matmul->b.get()})
      if (extra && std::find(in.begin(), in.end(), extra) == in.end()) in.push_back(extra);
  return in;
}

std::vector<GraphNode> snapshot_graph(const std::vector<NodeRef>& roots) {
  std::vector<GraphNode> out;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<const Node*, size_t>> stack;
  for (auto& r : roots) {
    if (!r || !seen.insert(r.get()).second) continue;
    stack.push_back({r.get(), 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      const std::vector<const Node*> in = inputs_of(*n);
      if (i < in.size()) {
        const Node* s = in[i++];
        if (seen.insert(s).second) stack.push_back({s, 0});
        continue;
      }
      GraphNode g;
      g.id = n->id;
      g.op = n->realized() && !n->src.empty() ? op_name(n->op) : (n->realized() ? "BUFFER" : op_name(n->op));
      g.scope = n->scope;
      g.shape = n->shape;
      g.dtype = n->dtype;
      g.detail = describe(*n);
      for (const Node* s : in) g.inputs.push_back(s->id);
      g.realized = n->realized();
      out.push_back(std::move(g));
      stack.pop_back();
    }
  }
  return out;  // sources before their consumers
}

double lazy_flops(const std::vector<NodeRef>& roots, std::unordered_set<uint64_t>& seen) {
  double flops = 0;
  std::vector<NodeRef> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    NodeRef n = std::move(stack.back());
    stack.pop_back();
    if (!n || n->realized() || !seen.insert(n->id).second) continue;
    if (is_elementwise(n->op) || n->op == Op::Cast) flops += double(numel(n->shape));
    else if (is_reduce(n->op) && !n->src.empty()) flops += double(numel(n->src[0]->shape));
    for (const auto& s : n->src) stack.push_back(s);
  }
  return flops;
}

}  // namespace tl
