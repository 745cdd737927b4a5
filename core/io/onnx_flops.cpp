#include "core/io/onnx_flops.h"

#include <map>
#include <string>

namespace tl {

namespace {
bool known(const Shape& s) {
  if (s.empty()) return false;
  for (int64_t d : s)
    if (d <= 0) return false;
  return true;
}
}  // namespace

OnnxCompute onnx_compute(const OnnxGraphInfo& info) {
  std::map<std::string, Shape> shapes;
  for (const auto& v : info.inputs) shapes[v.name] = v.shape;
  for (const auto& v : info.outputs) shapes[v.name] = v.shape;
  for (const auto& v : info.values) shapes[v.name] = v.shape;
  for (const auto& i : info.initializers) shapes[i.name] = i.shape;
  auto shape = [&](const std::vector<std::string>& names, size_t i) -> Shape {
    if (i >= names.size() || names[i].empty()) return {};
    auto it = shapes.find(names[i]);
    return it == shapes.end() ? Shape{} : it->second;
  };

  OnnxCompute out;
  double total = 0;
  for (const auto& n : info.nodes) {
    const bool conv = n.op_type == "Conv" || n.op_type == "ConvTranspose";
    const bool gemm = n.op_type == "Gemm", matmul = n.op_type == "MatMul";
    if (!(n.domain.empty() || n.domain == "ai.onnx") || !(conv || gemm || matmul)) continue;
    ++out.layers;
    const Shape y = shape(n.outputs, 0), w = shape(n.inputs, 1);
    const bool bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (!known(y) || !known(w)) {
      ++out.unknown_shapes;
      continue;
    }
    const double outputs = double(numel(y));
    if (n.op_type == "Conv") {
      // Each output element: one multiply-add per weight of its filter.
      total += outputs * (2.0 * double(numel(w)) / double(w[0])) + (bias ? outputs : 0);
    } else if (conv) {
      // ConvTranspose: each input element scatters over one input channel's weights.
      const Shape x = shape(n.inputs, 0);
      if (!known(x)) {
        ++out.unknown_shapes;
        continue;
      }
      total += double(numel(x)) * (2.0 * double(numel(w)) / double(w[0])) + (bias ? outputs : 0);
    } else if (gemm) {
      // B is (K, N) or, transposed, (N, K): K is its size over N either way.
      const double k = double(numel(w)) / double(y.back());
      total += outputs * 2.0 * k + (bias ? outputs : 0);
    } else {
      const double k = double(w.size() >= 2 ? w[w.size() - 2] : w[0]);
      total += outputs * 2.0 * k;
    }
  }
  const int64_t batch = !info.inputs.empty() && !info.inputs[0].shape.empty() && info.inputs[0].shape[0] > 0
                            ? info.inputs[0].shape[0]
                            : 1;
  out.flops = total / double(batch);
  return out;
}

}  // namespace tl
