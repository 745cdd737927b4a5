// Optimizers with PyTorch's update rules (torch.optim.SGD, Adam, AdamW), so
// a step here and a step there give the same numbers. Each step computes the
// new values under NoGrad, realizes them, and puts fresh leaves back into the
// module's slots: the graph never grows across steps.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tl::nn {

class Optimizer {
 public:
  // The pointers are the module's parameter slots (Module::parameters()).
  Optimizer(std::vector<Tensor*> params, double lr);
  virtual ~Optimizer() = default;
  // Drops every accumulated gradient; backward() adds to what is there.
  void zero_grad();
  // Parameters without a gradient (unused in the forward pass) are skipped.
  virtual void step() = 0;
  virtual std::string name() const = 0;
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }

 protected:
  using Updates = std::vector<std::pair<Tensor*, Tensor>>;
  // One step of an update rule over every parameter that has a gradient: the
  // rule gets the parameter's index, its detached value and its gradient,
  // adds its own state to `state` and returns the new value. All new values
  // are realized together (one schedule), then installed as parameters.
  void update_each(const std::function<Tensor(size_t i, Tensor w, Tensor g, Updates& state)>& rule);
  Tensor runtime_scalar(double v) const;
  std::vector<Tensor*> params_;
  double lr_;
  int64_t steps_ = 0;
};

struct SGDOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, double lr, SGDOptions options = {});
  void step() override;
  std::string name() const override { return "sgd"; }
  SGDOptions options;

 private:
  std::vector<Tensor> momentum_;  // zeros from the first step (undefined until then, and with dampening)
};

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0;  // Adam: added to the gradient; AdamW: decoupled
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor*> params, double lr = 1e-3, AdamOptions options = {});
  void step() override;
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  AdamOptions options;

 protected:
  bool decoupled_ = false;

 private:
  std::vector<Tensor> m_, v_;
};

// Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the
// Adam step (torch.optim.AdamW, whose default weight_decay is 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor*> params, double lr = 1e-3, AdamOptions options = {0.9, 0.999, 1e-8, 0.01});
};

// Learning-rate schedules as functions of the epoch (PyTorch's StepLR and
// CosineAnnealingLR closed forms).
double step_lr(double base_lr, int epoch, int step_size, double gamma);
double cosine_lr(double base_lr, int epoch, int total_epochs, double min_lr = 0);

}  // namespace tl::nn
