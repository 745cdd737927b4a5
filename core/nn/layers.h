// The layers the trainer's models are made of. Initialisation follows
// PyTorch's defaults (kaiming-uniform with a = sqrt(5), which is
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases alike), drawn
// from a seeded Generator so a seed fixes the whole model.
#pragma once
#include "core/nn/module.h"

namespace tl::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true, const std::string& device = "");
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  Tensor weight, bias;  // (out, in), (out)
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Generator& gen, int64_t stride = 1,
         int64_t padding = 0, bool bias = true, const std::string& device = "");
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  Tensor weight, bias;  // (out, in, k, k), (out)
  Conv2dOptions options;
};

// Training normalises with the batch's statistics and updates the running
// ones (momentum as in PyTorch; num_batches_tracked counts the updates);
// evaluation uses the running ones.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double momentum = 0.1, double eps = 1e-5, const std::string& device = "");
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d"; }
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double momentum, eps;
};

// Inverted dropout; its own seeded generator so runs repeat.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, uint64_t seed = 0) : p(p), gen_(seed) {}
  Tensor forward(const Tensor& x) override { return x.dropout(p, training(), gen_); }
  std::string type_name() const override { return "Dropout"; }
  double p;

 private:
  Generator gen_;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.relu(); }
  std::string type_name() const override { return "ReLU"; }
};

// (N, ...) -> (N, prod(...)), like torch.nn.Flatten().
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
  std::string type_name() const override { return "Flatten"; }
};

// Non-overlapping windows (stride == kernel, the usual case) are a reshape
// and a max: one view, so the rendered kernel indexes simply. Other strides
// use Tensor::max_pool2d's sliding windows.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0) : kernel(kernel), stride(stride ? stride : kernel) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  int64_t kernel, stride;
};

}  // namespace tl::nn
