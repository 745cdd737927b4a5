#include "core/nn/optim.h"

#include <cmath>
#include <stdexcept>

#include "core/realize.h"

namespace tl::nn {

Optimizer::Optimizer(std::vector<Tensor*> params, double lr) : params_(std::move(params)), lr_(lr) {
  for (auto* p : params_)
    if (!p || !p->defined()) throw std::invalid_argument("optimizer: a parameter slot is empty");
  if (!(lr >= 0)) throw std::invalid_argument("optimizer: learning rate must be >= 0, got " + std::to_string(lr));
}

// Values that change from step to step (bias corrections, a scheduled lr)
// enter kernels as one-element buffers rather than literals: a literal would
// change the kernel's source and cost a compile on every step.
Tensor Optimizer::runtime_scalar(double v) const {
  return Tensor::from_data({float(v)}, {}, params_.empty() ? "" : params_[0]->device());
}

// Optimizer state that starts at zero is created as a realized buffer of
// zeros before the first step (x * beta + g * c equals g * c exactly when
// x = 0), so the first step has the structure of every later one and the
// second step already replays the first one's plan.
static Tensor zero_state(const Tensor& like) {
  return Tensor::from_data(std::vector<float>(size_t(like.numel()), 0.f), like.shape(), like.device());
}

void Optimizer::zero_grad() {
  for (auto* p : params_) p->zero_grad();
}

void Optimizer::update_each(const std::function<Tensor(size_t i, Tensor w, Tensor g, Updates& state)>& rule) {
  NoGrad ng;
  Updates updates;
  // Shared so that the slots `updates` points at stay put wherever the
  // action below is copied to.
  auto fresh = std::make_shared<std::vector<Tensor>>(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i]->grad();
    if (!g.defined()) continue;
    updates.push_back({&(*fresh)[i], rule(i, params_[i]->detach(), g, updates)});
  }
  std::vector<NodeRef> roots;
  for (auto& [slot, value] : updates) {
    value = value.contiguous();
    roots.push_back(value.node());
  }
  // Inside a RealizeTogether (Trainer::step) this waits for the whole step's
  // realize: weights and optimizer state change only once it succeeded.
  realize_then(roots, [this, updates = std::move(updates), fresh] {
    for (auto& [slot, value] : updates) *slot = value;
    for (size_t i = 0; i < params_.size(); ++i)
      if ((*fresh)[i].defined()) *params_[i] = (*fresh)[i].detach().requires_grad(true);
  });
}

SGD::SGD(std::vector<Tensor*> params, double lr, SGDOptions o) : Optimizer(std::move(params), lr), options(o) {
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw std::invalid_argument("SGD: Nesterov momentum requires a momentum > 0 and zero dampening");
  momentum_.resize(params_.size());
}

void SGD::step() {
  Tensor lr = runtime_scalar(lr_);
  update_each([&](size_t i, Tensor w, Tensor g, Updates& state) {
    if (options.weight_decay != 0) g = g + w * options.weight_decay;
    if (options.momentum != 0) {
      // torch's first buffer is g, not g * (1 - dampening): zeros only when the two agree
      if (!momentum_[i].defined() && options.dampening == 0) momentum_[i] = zero_state(w);
      Tensor buf = momentum_[i].defined() ? momentum_[i] * options.momentum + g * (1 - options.dampening) : g;
      state.push_back({&momentum_[i], buf});
      g = options.nesterov ? g + buf * options.momentum : buf;
    }
    return w - g * lr;
  });
  ++steps_;
}

Adam::Adam(std::vector<Tensor*> params, double lr, AdamOptions o) : Optimizer(std::move(params), lr), options(o) {
  m_.resize(params_.size());
  v_.resize(params_.size());
}

AdamW::AdamW(std::vector<Tensor*> params, double lr, AdamOptions o) : Adam(std::move(params), lr, o) {
  decoupled_ = true;
}

void Adam::step() {
  ++steps_;
  double bc1 = 1 - std::pow(options.beta1, double(steps_));
  double bc2 = 1 - std::pow(options.beta2, double(steps_));
  Tensor step_size = runtime_scalar(lr_ / bc1), inv_sqrt_bc2 = runtime_scalar(1 / std::sqrt(bc2));
  Tensor decay = runtime_scalar(1 - lr_ * options.weight_decay);
  update_each([&](size_t i, Tensor w, Tensor g, Updates& state) {
    if (options.weight_decay != 0) {
      if (decoupled_) w = w * decay;
      else g = g + w * options.weight_decay;
    }
    if (!m_[i].defined()) m_[i] = zero_state(w), v_[i] = zero_state(w);
    Tensor m = m_[i].defined() ? m_[i] * options.beta1 + g * (1 - options.beta1) : g * (1 - options.beta1);
    Tensor v = v_[i].defined() ? v_[i] * options.beta2 + g * g * (1 - options.beta2) : g * g * (1 - options.beta2);
    state.push_back({&m_[i], m});
    state.push_back({&v_[i], v});
    Tensor denom = v.sqrt() * inv_sqrt_bc2 + options.eps;
    return w - m / denom * step_size;
  });
}

double step_lr(double base_lr, int epoch, int step_size, double gamma) {
  if (step_size < 1) throw std::invalid_argument("step_lr: step_size must be >= 1");
  return base_lr * std::pow(gamma, double(epoch / step_size));
}

double cosine_lr(double base_lr, int epoch, int total_epochs, double min_lr) {
  if (total_epochs < 1) throw std::invalid_argument("cosine_lr: total_epochs must be >= 1");
  const double pi = 3.14159265358979323846;
  return min_lr + (base_lr - min_lr) * (1 + std::cos(pi * double(epoch) / double(total_epochs))) / 2;
}

}  // namespace tl::nn
