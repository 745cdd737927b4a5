// What an ONNX file computes, counted from its own graph: the layers that
// carry the weights (Conv, ConvTranspose, Gemm, MatMul nodes) and their
// FLOPs per image, from the shapes in OnnxGraphInfo (complete them with
// infer_onnx_shapes first). The same convention as the built-in models'
// summaries: a multiply-add is two FLOPs, a bias add one.
#pragma once
#include <cstdint>

#include "core/io/onnx.h"

namespace tl {

struct OnnxCompute {
  int64_t layers = 0;         // Conv + ConvTranspose + Gemm + MatMul nodes
  double flops = 0;           // per image (divided by the first input's batch)
  int64_t unknown_shapes = 0;  // layers left out of `flops`: a shape is unknown
};

OnnxCompute onnx_compute(const OnnxGraphInfo& info);

}  // namespace tl
