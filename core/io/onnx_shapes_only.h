// Shape inference without kernels: infer_onnx_shapes walks the model's graph
// under a ShapesOnly scope, which needs no value on the device. Where a run
// would compute a value to keep lazy chains short (a value more than
// kMaxLazyDepth ops deep, TopK's rounds, a recurrent state), bound_chain
// stands a fresh lazy tensor of the same shape and type in for it; large
// initializers are stand-ins too. A shape that depends on a computed value
// (Reshape to the contents of a device tensor) cannot be found that way: any
// realize inside the scope throws NeedsValues before a kernel is compiled,
// and the caller walks the graph again for real.
#pragma once
#include <stdexcept>

#include "core/realize.h"
#include "core/tensor.h"

namespace tl::onnx_detail {

struct NeedsValues : std::runtime_error {
  NeedsValues() : std::runtime_error("shape inference needs the values of a computed tensor") {}
};

class ShapesOnly {
 public:
  ShapesOnly();
  ~ShapesOnly();
  ShapesOnly(const ShapesOnly&) = delete;
  ShapesOnly& operator=(const ShapesOnly&) = delete;
  static bool active();  // on this thread

 private:
  bool outer_;
  RealizeObserver refuse_;  // throws NeedsValues on any realize
};

// A lazy tensor of `shape`, `dtype` on `device` whose values nobody reads: no
// buffer, no kernel, one node deep.
Tensor stand_in(const Shape& shape, DType dtype, const std::string& device);

// Computes `t` now (t.realize()), or under ShapesOnly replaces it with a
// stand_in of its shape: what a run does to a value whose lazy chain is long.
void bound_chain(Tensor& t);

}  // namespace tl::onnx_detail
