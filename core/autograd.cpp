// Reverse-mode autograd: the gradient switches of a tensor, the backward rule
// of each primitive, and backward() over the graph in topological order.
#include "core/tensor.h"

#include <unordered_map>

#include "core/error.h"
#include "core/realize.h"
#include "core/tensor_internal.h"

namespace tl {

using namespace detail;

// -------------------------------------------------------------- autograd ---

Tensor& Tensor::requires_grad(bool on) {
  need(node_)->requires_grad = on;
  return *this;
}
bool Tensor::requires_grad_enabled() const { return need(node_)->requires_grad; }
Tensor Tensor::grad() const { return need(node_)->grad ? Tensor(node_->grad) : Tensor(); }
void Tensor::zero_grad() { need(node_)->grad.reset(); }

Tensor Tensor::detach() const {
  if (!need(node_)->requires_grad) return *this;
  // a view that shares the computation but carries no gradient
  auto n = std::make_shared<Node>(*node_);
  n->id = Node::next_id();
  n->requires_grad = false;
  n->grad.reset();
  n->gradient_twin.reset();
  if (!n->realized()) {
    // keep the same value by wrapping: reshape to itself as a barrier
    n->op = Op::Reshape;
    n->src = {node_};
    n->arg.assign(n->shape.begin(), n->shape.end());
    n->matmul.reset();
  } else {
    // the value is in the buffer, and no gradient will ask how it was made:
    // holding the graph would keep every buffer in it alive
    n->src.clear();
    n->matmul.reset();
  }
  return Tensor(n);
}

Tensor Tensor::with_gradient_of(const Tensor& twin) const {
  need(node_);
  need(twin.node_);
  if (twin.shape() != shape() || twin.dtype() != dtype())
    throw ShapeError("with_gradient_of: the twin " + shape_str(twin.shape()) + " " + dtype_name(twin.dtype()) +
                     " must match the value " + shape_str(shape()) + " " + dtype_name(dtype()));
  if (twin.device() != device())
    throw DeviceError("with_gradient_of: the value lives on '" + device() + "', its twin on '" + twin.device() + "'");
  // Nothing flows through the twin: the value alone, with no gradient either.
  if (!grad_enabled() || !twin.node_->requires_grad) return detach();
  // an identity view of the value: the scheduler sees only its source
  auto n = make(Op::Reshape, {node_}, shape(), dtype(), std::vector<int64_t>(shape().begin(), shape().end()));
  n->requires_grad = true;
  n->gradient_twin = twin.node_;
  return Tensor(n);
}

namespace {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  // undo a broadcast: sum the axes that were expanded
  std::vector<int> axes;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && g.shape()[i] != 1) axes.push_back(int(i));
  return axes.empty() ? g : g.sum(axes, true);
}

// What gradients flow to: a value's gradient twin, a matmul's two operands,
// any other node's sources.
std::vector<NodeRef> grad_sources(const NodeRef& n) {
  if (n->gradient_twin) return {n->gradient_twin};
  if (n->matmul && n->matmul->a_in) return {n->matmul->a_in, n->matmul->b_in};
  return n->src;
}

// Gradients of one primitive with respect to each of its sources.
std::vector<Tensor> backward_rule(const NodeRef& node, const Tensor& g) {
  const auto& s = node->src;
  if (node->gradient_twin) return {g};
  if (node->matmul && node->matmul->a_in) {
    const MatmulHint& h = *node->matmul;
    Tensor g3 = g.reshape({h.batch, h.m, h.n});
    Tensor a(h.a_in), b(h.b_in);
    return {g3.matmul(b.detach().transpose(-1, -2)), a.detach().transpose(-1, -2).matmul(g3)};
  }
  Tensor out(node);
  auto src = [&](int i) { return Tensor(s[i]).detach(); };
  switch (node->op) {
    case Op::Neg: return {-g};
    case Op::Exp: return {g * out.detach()};
    case Op::Log: return {g / src(0)};
    case Op::Sqrt: return {g / (out.detach() * 2.0)};
    case Op::Recip: { Tensor o = out.detach(); return {-g * o * o}; }
    case Op::Sin: return {g * src(0).cos()};
    case Op::Cast: return {is_float(s[0]->dtype) ? g.cast(s[0]->dtype) : Tensor()};
    case Op::Add: return {g, g};
    case Op::Mul: return {g * src(1), g * src(0)};
    case Op::Max: {
      Tensor a = src(0), b = src(1);
      Tensor wa = a.gt(b).cast(DType::f32) + a.eq(b).cast(DType::f32) * 0.5;
      return {g * wa, g * (1.0 - wa)};
    }
    case Op::Pow: {
      Tensor a = src(0), b = src(1), o = out.detach();
      Tensor ga = g * b * a.pow(b - 1.0);
      Tensor gb = g * o * Tensor::where(a.gt(Tensor::scalar(0, DType::f32, a.device())), a, Tensor::scalar(1, DType::f32, a.device())).log();
      return {ga, gb};
    }
    case Op::CmpLt: case Op::CmpEq: return {Tensor(), Tensor()};
    case Op::Where: {
      Tensor c = src(0), z = Tensor::scalar(0, DType::f32, g.device());
      return {Tensor(), Tensor::where(c, g, z), Tensor::where(c, z, g)};
    }
    case Op::Sum: return {g.expand(s[0]->shape)};
    case Op::ReduceMax: {
      Tensor x = src(0), m = out.detach().expand(s[0]->shape);
      Tensor mask = x.eq(m).cast(DType::f32);
      std::vector<int> axes(node->arg.begin(), node->arg.end());
      Tensor count = mask.sum(axes, true);
      return {mask * (g / count).expand(s[0]->shape)};
    }
    case Op::Reshape: return {g.reshape(s[0]->shape)};
    case Op::Permute: {
      std::vector<int> inv(node->arg.size());
      for (size_t i = 0; i < inv.size(); ++i) inv[node->arg[i]] = int(i);
      return {g.permute(inv)};
    }
    case Op::Expand: return {sum_to(g, s[0]->shape)};
    case Op::Pad: {
      Tensor r = g;
      for (int i = 0; i < g.ndim(); ++i)
        r = r.slice(i, node->arg[2 * i], node->arg[2 * i] + s[0]->shape[i]);
      return {r};
    }
    case Op::Shrink: {
      std::vector<std::pair<int64_t, int64_t>> pads;
      for (size_t i = 0; i < s[0]->shape.size(); ++i)
        pads.push_back({node->arg[2 * i], s[0]->shape[i] - node->arg[2 * i + 1]});
      return {g.pad(pads)};
    }
    case Op::Flip: return {g.flip(std::vector<int>(node->arg.begin(), node->arg.end()))};
    case Op::Contiguous: return {g};
    default: return {};
  }
}

}  // namespace

void Tensor::backward() const {
  if (numel() != 1)
    throw ShapeError("backward: needs a scalar (one element), got shape " + shape_str(shape()));
  if (!node_->requires_grad) throw std::invalid_argument("backward: this tensor does not require grad");
  // topological order over nodes that need gradients
  std::vector<NodeRef> order;
  std::unordered_map<Node*, int> state;
  std::vector<std::pair<NodeRef, size_t>> stack{{node_, 0}};
  state[node_.get()] = 1;
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    auto srcs = grad_sources(n);
    if (i < srcs.size()) {
      NodeRef s = srcs[i++];
      if (s->requires_grad && !state.count(s.get())) {
        state[s.get()] = 1;
        stack.push_back({s, 0});
      }
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  NoGrad ng;
  std::unordered_map<Node*, Tensor> grads;
  grads[node_.get()] = Tensor::ones(shape(), float_type(dtype()), device());
  std::vector<NodeRef> leaves;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeRef& n = *it;
    auto g = grads.find(n.get());
    if (g == grads.end()) continue;
    Tensor gn = g->second;
    if (n->src.empty()) {
      leaves.push_back(n);
      continue;
    }
    auto gs = backward_rule(n, gn);
    auto srcs = grad_sources(n);
    for (size_t i = 0; i < gs.size() && i < srcs.size(); ++i) {
      if (!gs[i].defined() || !srcs[i]->requires_grad) continue;
      auto [slot, fresh] = grads.try_emplace(srcs[i].get(), gs[i]);
      if (!fresh) slot->second = slot->second + gs[i];
    }
    grads.erase(n.get());
  }
  std::vector<NodeRef> to_realize;
  for (auto& leaf : leaves) {
    Tensor g = grads.at(leaf.get()).reshape(leaf->shape);
    if (leaf->grad) g = Tensor(leaf->grad) + g;
    leaf->grad = g.contiguous().node();
    to_realize.push_back(leaf->grad);
  }
  realize_nodes(to_realize);
}

}  // namespace tl
