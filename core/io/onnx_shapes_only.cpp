#include "core/io/onnx_shapes_only.h"

namespace tl::onnx_detail {

namespace {
thread_local bool shapes_only = false;
}

ShapesOnly::ShapesOnly()
    : outer_(shapes_only), refuse_([](const std::vector<NodeRef>&) { throw NeedsValues(); }) {
  shapes_only = true;
}

ShapesOnly::~ShapesOnly() { shapes_only = outer_; }

bool ShapesOnly::active() { return shapes_only; }

Tensor stand_in(const Shape& shape, DType dtype, const std::string& device) {
  return Tensor::zeros(shape, dtype, device);
}

void bound_chain(Tensor& t) {
  if (shapes_only) t = stand_in(t.shape(), t.dtype(), t.device());
  else t.realize();
}

}  // namespace tl::onnx_detail
