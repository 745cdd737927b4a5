#include "core/assemble.h"

#include <algorithm>
#include <memory>

#include "core/profile.h"
#include "core/runtime/device.h"

namespace tl {

namespace {

// One piece of a concatenation: the input it copies and where, in elements,
// it starts in the output.
struct Slab {
  const Node* input;
  int64_t offset;
};

// The index of `n` in the plan's inputs, or -1.
int input_index(const KernelPlan& p, const Node* n) {
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (p.inputs[i].get() == n) return int(i);
  return -1;
}

// Where the Pad `n` of `out`'s shape puts its input: the one axis it grows
// (-1 when it grows none or several, or crops) and the elements before it.
int pad_axis(const Node& n, const Node& out, int64_t& offset) {
  int axis = -1;
  for (size_t d = 0; d < out.shape.size(); ++d) {
    const int64_t before = n.arg[2 * d], after = n.arg[2 * d + 1];
    if (before < 0 || after < 0) return -1;
    if (before == 0 && after == 0) continue;
    if (axis >= 0) return -1;
    axis = int(d);
  }
  if (axis < 0) return -1;
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  offset = n.arg[2 * size_t(axis)] * inner;
  return axis;
}

// The pieces of `p` when all it computes is a concatenation of its inputs
// along one axis with only unit axes before it: a tree of Adds over Pads
// with zeros of distinct inputs that tile the output (maybe under a
// Contiguous), each piece then a contiguous part of the output's memory.
// Empty otherwise.
std::vector<Slab> concat_slabs(const KernelPlan& p) {
  if (p.kind != KernelPlan::Kind::Elementwise) return {};
  const Node& out = *p.output;
  std::vector<Slab> slabs;
  int axis = -1;
  size_t nodes = 0;
  std::vector<const Node*> stack{&out};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    ++nodes;
    if (n->dtype != out.dtype || n->shape != out.shape) return {};
    if (n->op == Op::Add && n->src.size() == 2) {
      for (auto& s : n->src) stack.push_back(s.get());
      continue;
    }
    if (n->op == Op::Contiguous && n->src.size() == 1) {  // a copy as it is (a pool's input)
      stack.push_back(n->src[0].get());
      continue;
    }
    if (n->op != Op::Pad || n->value != 0 || n->src.size() != 1 || n->arg.size() != 2 * out.shape.size()) return {};
    // A Reshape of an input (a convolution's output without an epilogue is
    // its GEMM's, reshaped) lies in the input's memory as it is.
    const Node* in = n->src[0].get();
    for (; in->op == Op::Reshape && input_index(p, in) < 0; in = in->src[0].get()) ++nodes;
    int64_t offset = 0;
    const int a = pad_axis(*n, out, offset);
    if (in->dtype != out.dtype || input_index(p, in) < 0 || a < 0 || (axis >= 0 && a != axis)) return {};
    axis = a;
    slabs.push_back({in, offset});
  }
  if (axis < 0 || nodes != p.fused.size()) return {};
  for (int d = 0; d < axis; ++d)
    if (out.shape[size_t(d)] != 1) return {};
  std::sort(slabs.begin(), slabs.end(), [](const Slab& a, const Slab& b) { return a.offset < b.offset; });
  int64_t next = 0;
  for (size_t i = 0; i < slabs.size(); ++i) {
    if (slabs[i].offset != next) return {};
    next += numel(slabs[i].input->shape);
  }
  for (size_t i = 0; i < slabs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (slabs[i].input == slabs[j].input) return {};
  if (next != numel(out.shape)) return {};
  return slabs;
}

// The kernel after whose launch each kernel's buffer is free (Plan::Kernel::
// frees), or -1.
std::vector<int> freed_after(const Plan& plan) {
  std::vector<int> at(plan.kernels.size(), -1);
  for (size_t r = 0; r < plan.kernels.size(); ++r)
    for (int f : plan.kernels[r].frees) at[size_t(f)] = int(r);
  return at;
}

// A concatenation's buffer holds its pieces: it is free for other kernels
// only once the last reader of it and of every piece has been launched.
void free_after_its_pieces(Plan& plan, int cat, const std::vector<std::pair<int, size_t>>& parts) {
  const std::vector<int> at = freed_after(plan);
  if (at[size_t(cat)] < 0) return;  // kept
  int last = at[size_t(cat)];
  for (auto& [q, offset] : parts) last = std::max(last, at[size_t(q)]);
  if (last == at[size_t(cat)]) return;
  auto& frees = plan.kernels[size_t(at[size_t(cat)])].frees;
  frees.erase(std::find(frees.begin(), frees.end(), cat));
  plan.kernels[size_t(last)].frees.push_back(cat);
}

}  // namespace

void assemble_concatenations(Plan& plan, const std::vector<KernelPlan>& plans, Device& device) {
  if (!device.makes_views()) return;
  for (size_t p = 0; p < plans.size(); ++p) {
    const std::vector<Slab> slabs = concat_slabs(plans[p]);
    if (slabs.empty()) continue;
    Plan::Kernel& cat = plan.kernels[p];
    // Each piece must be an earlier kernel's output that nothing else keeps
    // and that is not already a part of another buffer. It may be an
    // assembled concatenation itself (DenseNet's chained Concats), whose
    // pieces then write into their part of its part of this one.
    std::vector<std::pair<int, size_t>> parts;
    for (const Slab& s : slabs) {
      const int q = cat.args[size_t(input_index(plans[p], s.input))];
      if (q < 0) break;
      const Plan::Kernel& k = plan.kernels[size_t(q)];
      if (k.keep || k.empty || k.into >= 0) break;
      parts.emplace_back(q, size_t(s.offset) * dtype_size(plans[p].output->dtype));
    }
    if (parts.size() != slabs.size()) continue;
    for (auto& [q, offset] : parts) plan.kernels[size_t(q)].into = int(p), plan.kernels[size_t(q)].into_offset = offset;
    free_after_its_pieces(plan, int(p), parts);
    auto info = std::make_shared<KernelInfo>(*cat.info);
    info->assembled = true;
    cat.info = std::move(info);
  }
}

}  // namespace tl
