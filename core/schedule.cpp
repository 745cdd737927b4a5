#include "core/schedule.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace tl {

namespace {

// A value read by several consumers is recomputed in each of them when its
// fused expression is at most this many ops and reads at most this many
// buffers; above that it gets a buffer. (A transformer's residual stream is
// one add per block over the last: recomputed, every LayerNorm of block k
// read k + 2 buffers, one of them the patch embedding through a transpose.)
// A load through a permutation reads across rows (it does not vectorise):
// it counts as this many.
constexpr int kRecomputeLimit = 8;
constexpr int kRecomputeLoads = 4;
constexpr int kPermutedLoad = 4;
constexpr int kLoadsCap = 1 << 20;  // loads are counted up to this (20000 transposes in a row)
// An exp, log, sin or pow is a polynomial of a dozen operations on the C
// device (kernels/c_math.h), not one.
constexpr int kTranscendentalCost = 4;
// A GEMM's epilogue read by a reduction and by other kernels is stored by
// the GEMM (which writes C anyway) when it is more than this many ops: SiLU
// after a depthwise convolution, read by a squeeze-and-excite's mean and by
// its scale, is computed once instead of by both. A bias and ReLU stay
// recomputed, and so does a value only one kernel reads twice (SiLU's x).
constexpr int kCheapEpilogue = 2;
// The longest row whose reductions fuse_rows computes in the kernel that
// reads them (a softmax over a 16k vocabulary; longer rows want more than
// one work-group each).
constexpr int64_t kRowsMax = 16384;

int op_cost(Op op) {
  if (op == Op::Exp || op == Op::Log || op == Op::Sin || op == Op::Pow) return kTranscendentalCost;
  return is_elementwise(op) ? 1 : 0;
}

struct Planner {
  bool gemm;
  bool gather;  // the GEMM template reads a convolution's B from its image
  std::vector<Node*> order;  // unrealized nodes, sources first
  std::unordered_map<Node*, std::vector<Node*>> consumers;
  std::unordered_set<Node*> visited, materialised;
  // Kept only because several ops read them and they cost too much to
  // compute at each (decide's first rule), sources first.
  std::vector<Node*> shared_only;

  // The GEMM templates are float32 only. A gather-only hint (a depthwise
  // convolution, a max pool: core/depthwise.h) is made only where the
  // template gathers planes (gemm_template_gathers_planes).
  bool is_gemm(Node* n) const {
    return gemm && n->matmul && n->dtype == DType::f32 && (n->matmul->gather_only ? gather : n->op == Op::Sum);
  }
  // A GEMM's B operand: the im2col columns, or the image they gather from.
  Node* b_operand(Node* n) const { return gather && n->matmul->image ? n->matmul->image.get() : n->matmul->b.get(); }

  // The edges the scheduler follows: a GEMM reads its two operands, not the
  // generic multiply-and-sum graph kept for autograd.
  std::vector<Node*> inputs_of(Node* n) const {
    std::vector<Node*> out;
    if (is_gemm(n)) {
      out = {n->matmul->a.get(), b_operand(n)};
    } else {
      for (auto& s : n->src) out.push_back(s.get());
    }
    return out;
  }

  void visit(Node* root) {
    // iterative DFS: model graphs are deep enough to make recursion risky
    std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
    if (root->realized() || !visited.insert(root).second) return;
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      auto ins = inputs_of(n);
      if (i < ins.size()) {
        Node* s = ins[i++];
        if (!s->realized()) {
          consumers[s].push_back(n);
          if (visited.insert(s).second) stack.push_back({s, 0});
        }
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }

  // The one kernel that computes every read of n, if they all are: n's
  // readers, and theirs, are elementwise ops (same position) up to outputs
  // that are one stored value.
  Node* sole_reader(Node* n) {
    Node* kernel = nullptr;
    std::vector<Node*> stack{n};
    std::unordered_set<Node*> seen{n};
    while (!stack.empty()) {
      Node* v = stack.back();
      stack.pop_back();
      for (Node* c : consumers[v]) {
        if (!is_elementwise(c->op)) return nullptr;
        if (materialised.count(c)) {
          if (kernel && kernel != c) return nullptr;
          kernel = c;
        } else if (seen.insert(c).second) {
          stack.push_back(c);
        }
      }
    }
    return kernel;
  }

  void decide(const std::vector<NodeRef>& roots) {
    std::unordered_map<Node*, int> effective, cost, loads;
    // Read through an Expand: each element is read several times (a 3x3
    // convolution's im2col reads it 9 times).
    std::unordered_map<Node*, bool> expanded;
    // The GEMM product that n's fused expression reads, if any, and the one
    // it reads in place (through elementwise ops and reshapes only).
    std::unordered_map<Node*, Node*> product, in_place;
    // The product that a stored value n's expression reads was computed from
    // (a softmax's maximum, a LayerNorm's mean): an expression of a product
    // that also reads such a value cannot be computed by the GEMM's store.
    std::unordered_map<Node*, Node*> after;
    for (auto& r : roots)
      if (!r->realized()) effective[r.get()] += 1;
    // consumers come after their sources in `order`, so walk it backwards
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      for (Node* c : consumers[n]) {
        effective[n] += is_movement(c->op) ? effective[c] : 1;
        if (c->op == Op::Expand || (is_movement(c->op) && expanded[c])) expanded[n] = true;
      }
    }
    std::unordered_set<Node*> root_set;
    for (auto& r : roots) root_set.insert(r.get());
    for (Node* n : order) {
      bool m = root_set.count(n) || is_reduce(n->op) || n->op == Op::Contiguous || is_gemm(n);
      if (is_gemm(n)) {
        materialised.insert(n->matmul->a.get());
        materialised.insert(b_operand(n));
      }
      const std::vector<Node*> ins = inputs_of(n);
      bool aligned = is_elementwise(n->op) || n->op == Op::Reshape;
      Node* reads = nullptr;
      for (Node* s : ins) {
        Node* r = is_gemm(s) ? s : (s->realized() || materialised.count(s)) ? nullptr : product[s];
        if (!r) continue;
        const auto ip = in_place.find(s);
        aligned = aligned && (s == r || (ip != in_place.end() && ip->second == r)) && (!reads || reads == r);
        reads = r;
      }
      if (aligned && reads) in_place[n] = reads;
      int c = op_cost(n->op), l = 0;
      for (Node* s : ins) {
        if (is_gemm(s)) product[n] = s;
        if (s->realized() || materialised.count(s)) {
          l += s->op == Op::Const ? 0 : 1;
          continue;
        }
        c += cost[s];
        l = std::min(l + loads[s], kLoadsCap);
        if (product[s]) product[n] = product[s];
      }
      for (Node* s : ins)
        if (!is_gemm(s)) {
          Node* from = s->realized() ? nullptr : materialised.count(s) ? product[s] : after[s];
          if (from) after[n] = from;
        }
      cost[n] = c;
      loads[n] = n->op == Op::Permute ? std::min(l * kPermutedLoad, kLoadsCap) : l;
      const bool shared = is_elementwise(n->op) && effective[n] > 1 && (c > kRecomputeLimit || l > kRecomputeLoads);
      // An expression read through an Expand is computed once, not at each
      // read, when it is costly, or when it is a GEMM's epilogue however
      // cheap: the GEMM stores C anyway, and fuse_epilogues has the store
      // write this value instead (ResNet-50's bias and ReLU before each 3x3
      // convolution). Several reads of one position in one kernel (SiLU's)
      // cost nothing: the renderer computes the value once there.
      const Node* p = product[n];
      const bool epilogue = p && !p->requires_grad && consumers[product[n]].size() == 1 && n->dtype == DType::f32;
      bool later = is_elementwise(n->op) && expanded[n] && (c > kRecomputeLimit || epilogue);
      if (is_elementwise(n->op) && effective[n] > 1 && epilogue && after[n] != p && c > kCheapEpilogue &&
          std::any_of(consumers[n].begin(), consumers[n].end(), [](Node* u) { return is_reduce(u->op); }))
        later = true;
      // The same for an epilogue that is then moved (padded into a
      // concatenation, permuted): the GEMM's store computes it once, and the
      // kernel that moves it reads one value instead of recomputing a
      // batch-norm and activation at every read (Inception's concatenations).
      if (is_elementwise(n->op) && epilogue && in_place.count(n) && in_place.at(n) == p)
        for (Node* user : consumers[n])
          if (is_movement(user->op) && user->op != Op::Reshape) later = true;
      if (m || shared || later) materialised.insert(n);
      if (shared && !m && !later) shared_only.push_back(n);
    }
    // operands marked after their own visit still need to count
    std::unordered_set<Node*> operands;
    for (Node* n : order)
      if (is_gemm(n)) {
        operands.insert({n->matmul->a.get(), b_operand(n)});
        materialised.insert(n->matmul->a.get());
        materialised.insert(b_operand(n));
      }
    // A value kept for its several readers needs no buffer when all of them
    // end in one kernel at its own position (GELU's x / sqrt(2), read five
    // times by Erf's polynomial and its sign, then once more by the product):
    // that kernel computes it once per element. Walked from the outputs
    // back, so a chain of such values folds into the one kernel.
    for (auto it = shared_only.rbegin(); it != shared_only.rend(); ++it)
      if (!operands.count(*it) && sole_reader(*it)) materialised.erase(*it);
    // A Contiguous of a value that has a buffer anyway would only copy it:
    // its readers read that buffer instead (an Inception block's max pool of
    // the Concat that its 1x1 convolutions read too). Roots and GEMM
    // operands keep their own buffer.
    for (Node* n : order) {
      if (n->op != Op::Contiguous || root_set.count(n) || operands.count(n)) continue;
      Node* s = n->src[0].get();
      if (s->realized() || materialised.count(s)) materialised.erase(n);
    }
  }

  KernelPlan plan_for(Node* out, const std::unordered_map<Node*, NodeRef>& refs) {
    KernelPlan p;
    p.output = refs.at(out);
    if (is_gemm(out)) {
      p.kind = KernelPlan::Kind::Gemm;
      p.inputs = {out->matmul->a, gather && out->matmul->image ? out->matmul->image : out->matmul->b};
      p.fused = {p.output};
      return p;
    }
    p.kind = is_reduce(out->op) ? KernelPlan::Kind::Reduce : KernelPlan::Kind::Elementwise;
    std::unordered_set<Node*> seen;
    std::function<void(const NodeRef&)> walk = [&](const NodeRef& n) {
      if (!seen.insert(n.get()).second) return;
      bool leaf = n.get() != out && (n->realized() || materialised.count(n.get()));
      if (leaf) {
        p.inputs.push_back(n);
        return;
      }
      for (auto& s : n->src) walk(s);
      p.fused.push_back(n);
    };
    walk(p.output);
    return p;
  }
};

// True when every read of `product` inside `plan` is at the position the plan
// writes: the paths from its output down to the product pass only through
// elementwise ops and reshapes (which keep the flat order).
bool reads_in_place(const KernelPlan& plan, const Node* product) {
  std::unordered_set<const Node*> inside;
  for (auto& n : plan.fused) inside.insert(n.get());
  std::unordered_map<const Node*, bool> reaches;  // fused node -> depends on product
  for (auto& n : plan.fused) {                    // sources first
    bool r = false;
    for (auto& s : n->src) r = r || s.get() == product || (inside.count(s.get()) && reaches[s.get()]);
    reaches[n.get()] = r;
    bool aligned = is_elementwise(n->op) || n->op == Op::Reshape || n->op == Op::Contiguous;
    if (r && !aligned) return false;
  }
  return reaches[plan.output.get()];
}

// The GEMM plans by the node each writes.
std::unordered_map<const Node*, int> gemm_plans(const std::vector<KernelPlan>& plans) {
  std::unordered_map<const Node*, int> out;
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].kind == KernelPlan::Kind::Gemm) out[plans[i].output.get()] = int(i);
  return out;
}

// Removes the plans that were merged into others (merged[i]), keeping the order.
void drop_merged(std::vector<KernelPlan>& plans, const std::vector<bool>& merged) {
  std::vector<KernelPlan> kept;
  for (size_t i = 0; i < plans.size(); ++i)
    if (!merged[i]) kept.push_back(std::move(plans[i]));
  plans = std::move(kept);
}

// Hands each elementwise kernel that is the only reader of a GEMM's result,
// and reads it in place, to that GEMM's store: one kernel instead of two, and
// the product never makes a round trip through memory. The merged kernel
// takes the elementwise kernel's place in the order, after all its inputs.
void fuse_epilogues(std::vector<KernelPlan>& plans, const std::vector<NodeRef>& roots) {
  std::unordered_map<const Node*, int> readers;
  for (auto& p : plans)
    for (auto& in : p.inputs) readers[in.get()] += 1;
  for (auto& r : roots) readers[r.get()] += 1;  // the caller reads roots too
  const std::unordered_map<const Node*, int> gemm_plan = gemm_plans(plans);
  std::vector<bool> merged(plans.size(), false);
  for (auto& p : plans) {
    if (p.kind != KernelPlan::Kind::Elementwise || p.output->dtype != DType::f32) continue;
    for (auto& in : p.inputs) {
      auto g = gemm_plan.find(in.get());
      // A product that gradients will flow through keeps its buffer: the
      // backward pass reads it, and would otherwise run the GEMM again.
      if (g == gemm_plan.end() || merged[g->second] || readers[in.get()] != 1 || in->dtype != DType::f32 ||
          in->requires_grad || !reads_in_place(p, in.get()))
        continue;
      KernelPlan fused = plans[g->second];  // the product's plan: inputs {A, B}, fused {product}
      for (auto& extra : p.inputs)
        if (extra != in && std::find(fused.inputs.begin(), fused.inputs.end(), extra) == fused.inputs.end())
          fused.inputs.push_back(extra);
      fused.fused.insert(fused.fused.end(), p.fused.begin(), p.fused.end());
      fused.output = p.output;
      merged[g->second] = true;
      p = std::move(fused);
      break;
    }
  }
  drop_merged(plans, merged);
}

// Hands each max pool (a GEMM plan whose hint has ConvGather::max) whose
// image is a convolution's result, read by nothing else, to that
// convolution's kernel (KernelPlan::pool) where `pools` accepts the merged
// plan: the convolution's output, the largest tensor of many networks'
// first layers, is then pooled while the cache holds it and never stored.
// The merged kernel takes the pool's place in the order.
void fuse_pools(std::vector<KernelPlan>& plans, const std::vector<NodeRef>& roots,
                const std::function<bool(const KernelPlan&)>& pools) {
  std::unordered_map<const Node*, int> readers;
  for (auto& p : plans) {
    std::unordered_set<const Node*> read(p.inputs.size());
    for (auto& in : p.inputs)
      if (read.insert(in.get()).second) readers[in.get()] += 1;  // a pool reads its image as A and B
  }
  for (auto& r : roots) readers[r.get()] += 1;
  const std::unordered_map<const Node*, int> gemm_plan = gemm_plans(plans);
  std::vector<bool> merged(plans.size(), false);
  for (auto& p : plans) {
    if (p.kind != KernelPlan::Kind::Gemm || !p.gemm().matmul->gather.max || p.output->requires_grad) continue;
    const MatmulHint& pool = *p.gemm().matmul;
    const Node* image = pool.image.get();
    auto g = gemm_plan.find(image);
    if (g == gemm_plan.end() || merged[g->second] || readers[image] != 1 || image->requires_grad) continue;
    const KernelPlan& conv = plans[g->second];
    const MatmulHint& h = *conv.gemm().matmul;
    // A convolution (B gathered from an image) whose planes are the pool's:
    // the pool's batch items are its batch x rows, each an out_w-wide plane.
    if (conv.pool || !h.gather.active() || h.gather.max || conv.inputs[1] != h.image || h.batch * h.m != pool.batch ||
        pool.gather.height * pool.gather.width != h.n || pool.gather.width != h.gather.out_w)
      continue;
    KernelPlan both = conv;
    both.fused.push_back(p.output);
    both.output = p.output;
    both.pool = p.output;
    if (!pools(both)) continue;
    merged[g->second] = true;
    p = std::move(both);
  }
  drop_merged(plans, merged);
}

// Whether every read of the reductions `rows` inside `plan` is at the row
// of `shape` that the kernel computes: through elementwise ops on their own
// shape (`row`), an Expand from it to `shape`, then elementwise ops on
// `shape`; or as the input of a reduction in `rows` itself.
bool reads_at_row(const KernelPlan& plan, const std::unordered_set<const Node*>& rows, const Shape& shape,
                  const Shape& row) {
  std::unordered_map<const Node*, bool> depends;
  for (auto& n : plan.fused) {  // sources first
    bool d = false;
    for (auto& s : n->src) d = d || rows.count(s.get()) || depends[s.get()];
    depends[n.get()] = d;
    if (!d) continue;
    if (rows.count(n.get())) {
      if (n->src[0]->shape != shape) return false;
      continue;
    }
    if (n->op == Op::Expand && n->shape == shape && n->src[0]->shape == row) continue;
    if (!is_elementwise(n->op) || (n->shape != shape && n->shape != row)) return false;
    for (auto& s : n->src)
      if ((rows.count(s.get()) || depends[s.get()]) && s->shape != n->shape) return false;
  }
  return true;
}

// Hands the reductions over an elementwise kernel's trailing axes that only
// it reads (a softmax's maximum and sum, a LayerNorm's mean and variance,
// one reading the other) to that kernel: it computes them for one row of
// those axes at a time, then the row's outputs (codegen/reduce.cpp's rows_body). The
// statistics never make a round trip through memory, the row is read while
// the cache holds it, and three or four launches become one (ViT-B/16 at
// batch 64 on an H100: its softmax 316 us a layer in three kernels). Each
// reduction must be read where the kernel's row is (reads_at_row), by this
// kernel and the reductions merged with it alone; and `accept`, where
// given, must take the merged plan (the device computes it reading memory
// in order: render.h's rows_in_kernel).
void fuse_rows(std::vector<KernelPlan>& plans, const std::vector<NodeRef>& roots,
               const std::function<bool(const KernelPlan&)>& accept) {
  std::unordered_map<const Node*, int> readers, reduce_plan;
  for (auto& p : plans) {
    std::unordered_set<const Node*> read;
    for (auto& in : p.inputs)
      if (read.insert(in.get()).second) readers[in.get()] += 1;
  }
  for (auto& r : roots) readers[r.get()] += 1;
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].kind == KernelPlan::Kind::Reduce) reduce_plan[plans[i].output.get()] = int(i);
  std::vector<bool> merged(plans.size(), false);
  for (auto& p : plans) {
    const Shape& shape = p.output->shape;
    if (p.kind != KernelPlan::Kind::Elementwise || p.output->dtype != DType::f32 || shape.empty() ||
        numel(shape) == 0 || numel(shape) >= (int64_t(1) << 31))
      continue;
    // The reductions this kernel reads, and those they read, over the same trailing axes.
    std::vector<int> set;
    std::unordered_set<const Node*> rows;
    Shape row;
    std::vector<const KernelPlan*> readers_of = {&p};
    for (size_t next = 0; next < readers_of.size(); ++next)
      for (auto& in : readers_of[next]->inputs) {
        auto q = reduce_plan.find(in.get());
        if (q == reduce_plan.end() || merged[q->second] || rows.count(in.get())) continue;
        const Node& r = *in;
        if ((r.op != Op::Sum && r.op != Op::ReduceMax) || r.dtype != DType::f32 || r.requires_grad ||
            r.src[0]->shape != shape || r.shape.size() != shape.size())
          continue;
        size_t a = shape.size();
        while (a > 0 && r.shape[a - 1] == 1) --a;
        Shape r_row(shape.begin(), shape.begin() + long(a));
        r_row.resize(shape.size(), 1);
        // Over the last axis only, of at most kRowsMax elements: a row is then
        // one loop (or one work-group's) of neighbouring elements, and the
        // output's other axes give the kernel its parallel items. A batch
        // norm's statistics over images and pixels (a few channels' rows of
        // thousands) stay reductions of their own.
        const int64_t length = numel(shape) / std::max<int64_t>(numel(r_row), 1);
        if (r.shape != r_row || length == 1 || length != shape.back() || length > kRowsMax ||
            (!row.empty() && r_row != row))
          continue;
        row = r_row;
        rows.insert(in.get());
        set.push_back(q->second);
        readers_of.push_back(&plans[size_t(q->second)]);
      }
    if (set.empty()) continue;
    std::sort(set.begin(), set.end());
    // Read by these kernels alone, each where its row is.
    bool ok = true;
    for (const Node* r : rows) {
      int inside = 0;
      for (auto* k : readers_of)
        inside += std::any_of(k->inputs.begin(), k->inputs.end(), [&](auto& in) { return in.get() == r; });
      ok = ok && readers[r] == inside;
    }
    for (auto* k : readers_of) ok = ok && reads_at_row(*k, rows, shape, row);
    if (!ok) continue;
    // The reductions' plans in order, then this one: sources first.
    std::vector<const KernelPlan*> parts;
    for (int q : set) parts.push_back(&plans[size_t(q)]);
    parts.push_back(&p);
    KernelPlan both;
    both.kind = KernelPlan::Kind::Elementwise;
    both.output = p.output;
    for (const KernelPlan* k : parts) {
      both.fused.insert(both.fused.end(), k->fused.begin(), k->fused.end());
      for (auto& in : k->inputs)
        if (!rows.count(in.get()) && std::find(both.inputs.begin(), both.inputs.end(), in) == both.inputs.end())
          both.inputs.push_back(in);
    }
    if (accept && !accept(both)) continue;
    for (int q : set) merged[size_t(q)] = true;
    p = std::move(both);
  }
  drop_merged(plans, merged);
}

}  // namespace

std::vector<KernelPlan> schedule(const std::vector<NodeRef>& roots, bool gemm, bool gather,
                                 const std::function<bool(const KernelPlan&)>& pools,
                                 const std::function<bool(const KernelPlan&)>& rows) {
  Planner planner{gemm, gemm && gather, {}, {}, {}, {}, {}};
  for (auto& r : roots) planner.visit(r.get());
  planner.decide(roots);
  std::unordered_map<Node*, NodeRef> refs;
  std::function<void(const NodeRef&)> index = [&](const NodeRef& n) {
    if (n->realized() || refs.count(n.get())) return;
    refs[n.get()] = n;
    for (auto& s : n->src) index(s);
    if (n->matmul) {
      index(n->matmul->a);
      index(n->matmul->b);
      if (n->matmul->image) index(n->matmul->image);
    }
  };
  for (auto& r : roots) index(r);
  std::vector<KernelPlan> plans;
  for (Node* n : planner.order)
    if (planner.materialised.count(n) && !n->realized()) plans.push_back(planner.plan_for(n, refs));
  if (gemm) fuse_epilogues(plans, roots);
  if (gemm && gather && pools) fuse_pools(plans, roots, pools);
  fuse_rows(plans, roots, rows);
  return plans;
}

}  // namespace tl
