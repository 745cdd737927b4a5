// A function from one tensor to one tensor, run once and then replayed: the
// next call with an input of the same shape, dtype and device launches
// the kernels the first call planned, with the new input bound in, without
// calling the function again (no graph is built, no key is computed). This
// is the replay of replay.h one level up, as tinygrad's TinyJit captures a
// Python function.
//
// Only pure functions qualify: the result must depend on the input and on
// tensors that existed before the first call (a model's weights), and the
// function must realize nothing else. A call that breaks this (it realized
// or read back anything, its result needs a gradient, or it launched no
// kernels) is not captured, and the next call runs the function and tries
// again (a first call that uploads weights or folds constants is followed
// by one that does not). TINYLENS_NOREPLAY=1 turns capturing off. A capture
// replays only under the settings generation it was made at
// (settings_generation(): a SettingOverride made or ended, tuning choices
// committed), so a thread whose settings changed plans and captures again.
#pragma once
#include <functional>
#include <memory>

#include "core/tensor.h"

namespace tl {

class Jit {
 public:
  using Fn = std::function<Tensor(const Tensor&)>;
  explicit Jit(Fn fn) : fn_(std::move(fn)) {}
  // fn(input), realized.
  Tensor operator()(const Tensor& input);
  bool captured() const { return captured_ != nullptr; }

 private:
  struct Captured;
  Fn fn_;
  std::shared_ptr<const Captured> captured_;
};

}  // namespace tl
