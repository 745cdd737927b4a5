// Shape inference without kernels: infer_onnx_shapes walks the model's graph
// under a ShapesOnly scope, which needs no value on the device. Where a run
// would compute a value to keep lazy chains short (a value more than
// kMaxLazyDepth ops deep, TopK's rounds, a recurrent state), bound_chain
// stands a fresh lazy tensor of the same shape and type in for it; large
// initializers are stand-ins too. The walk counts what a run would compute
// (lazy_flops), so a model's cost is known before any kernel runs.
//
// A shape that depends on a computed value (Reshape to the contents of a
// device tensor) is found by computing that value, when it is small and reads
// no stand-in (a shape subgraph over the input's shape: bounded work); any
// other realize inside the scope throws NeedsValues before a kernel is
// compiled, and the shapes past that node stay unknown until a real run.
#pragma once
#include <stdexcept>
#include <unordered_set>

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

  // Counts the work of computing `ts` in the innermost scope, once per node.
  static void count(const std::vector<Tensor>& ts);
  // FLOPs of everything counted so far.
  double flops() const { return flops_; }

  // The most elements (summed over its nodes) a realize inside the scope may
  // compute: enough for shape arithmetic, far below a layer's work.
  static constexpr double kMaxShapeWork = double(1 << 20);

 private:
  friend Tensor stand_in(const Shape&, DType, const std::string&);
  void allow_small(const std::vector<NodeRef>& roots) const;  // or throws NeedsValues

  ShapesOnly* outer_;
  double flops_ = 0;
  std::unordered_set<uint64_t> counted_;  // ids of the nodes counted
  std::unordered_set<const Node*> stand_ins_;
  std::vector<NodeRef> kept_;  // the stand-ins, alive while their addresses are listed
  RealizeObserver refuse_;
};

// A lazy tensor of `shape`, `dtype` on `device` whose values nobody reads: no
// buffer, no kernel, one node deep.
Tensor stand_in(const Shape& shape, DType dtype, const std::string& device);

// Computes `t` now (t.realize()), or under ShapesOnly counts its work and
// replaces it with a stand_in of its shape: what a run does to a value whose
// lazy chain is long.
void bound_chain(Tensor& t);
// The same for several values at once (one realize).
void bound_chains(std::vector<Tensor>& ts);

}  // namespace tl::onnx_detail
