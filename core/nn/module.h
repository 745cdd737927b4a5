// Layers as objects that own named parameters and buffers, in the spirit of
// torch.nn.Module: the names ("0.weight", "features.3.running_mean") are the
// keys of the state dict, so checkpoints line up with PyTorch's.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/io/host_tensor.h"
#include "core/tensor.h"

namespace tl::nn {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Optimizers keep pointers to the parameter slots, so a module stays where
  // it was built: hold it by shared_ptr, never copy or move it.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
  virtual std::string type_name() const = 0;

  // Propagates to every child (dropout and batch norm behave differently).
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }

  // Depth-first, in registration order, prefixed by the child's name.
  std::vector<std::pair<std::string, Tensor*>> named_parameters();
  std::vector<std::pair<std::string, Tensor*>> named_buffers();
  std::vector<Tensor*> parameters();
  int64_t parameter_count();

  // Parameters and buffers by name, as host tensors ready for
  // save_safetensors. Values are read back from the device.
  StateDict state_dict();
  // Every key must be present with the right shape (one IOError lists every
  // problem); loaded parameters keep requires_grad.
  void load_state_dict(const StateDict& state);
  void save(const std::string& path);  // safetensors
  void load(const std::string& path);

  // Moves every parameter and buffer to a device (realizes and copies).
  void to(const std::string& device);

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 protected:
  // The slot must be a member of the derived module: it is updated in place.
  void register_parameter(const std::string& name, Tensor& slot);
  void register_buffer(const std::string& name, Tensor& slot);
  void register_module(const std::string& name, std::shared_ptr<Module> child);

 private:
  void collect(const std::string& prefix, bool parameters, std::vector<std::pair<std::string, Tensor*>>& out);

  bool training_ = true;
  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// A Module that runs its children in order; children are named "0", "1", ...
// like torch.nn.Sequential, so state dict keys read "0.weight".
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential& add(std::shared_ptr<Module> m);
  template <class M, class... A>
  Sequential& emplace(A&&... args) {
    return add(std::make_shared<M>(std::forward<A>(args)...));
  }
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  size_t size() const { return children().size(); }
};

// One line per layer with its parameter count, for the CLI.
std::string describe(Module& m);

}  // namespace tl::nn
