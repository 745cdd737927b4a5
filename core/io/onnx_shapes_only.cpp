#include "core/io/onnx_shapes_only.h"

#include "core/graph.h"

namespace tl::onnx_detail {

namespace {
thread_local ShapesOnly* current = nullptr;
}

ShapesOnly::ShapesOnly()
    : outer_(current), refuse_([this](const std::vector<NodeRef>& roots) { allow_small(roots); }) {
  current = this;
}

ShapesOnly::~ShapesOnly() { current = outer_; }

bool ShapesOnly::active() { return current != nullptr; }

void ShapesOnly::count(const std::vector<Tensor>& ts) {
  if (!current) return;
  std::vector<NodeRef> roots;
  for (const auto& t : ts)
    if (t.defined()) roots.push_back(t.node());
  current->flops_ += lazy_flops(roots, current->counted_);
}

void ShapesOnly::allow_small(const std::vector<NodeRef>& roots) const {
  double work = 0;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const auto& r : roots) stack.push_back(r.get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!n || n->realized() || !seen.insert(n).second) continue;
    for (const ShapesOnly* s = this; s; s = s->outer_)
      if (s->stand_ins_.count(n)) throw NeedsValues();  // its values are not the model's
    work += double(numel(n->shape));
    if (work > kMaxShapeWork) throw NeedsValues();
    for (const auto& src : n->src) stack.push_back(src.get());
  }
}

Tensor stand_in(const Shape& shape, DType dtype, const std::string& device) {
  Tensor t = Tensor::zeros(shape, dtype, device);
  if (current) {
    current->stand_ins_.insert(t.node().get());
    current->kept_.push_back(t.node());
  }
  return t;
}

void bound_chain(Tensor& t) {
  if (!current) {
    t.realize();
    return;
  }
  ShapesOnly::count({t});
  t = stand_in(t.shape(), t.dtype(), t.device());
}

void bound_chains(std::vector<Tensor>& ts) {
  if (!current) {
    Tensor::realize_all(ts);
    return;
  }
  for (auto& t : ts) bound_chain(t);
}

}  // namespace tl::onnx_detail
