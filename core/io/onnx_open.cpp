// Opening an ONNX file the way the window and `tinylens-cli inspect` do: its
// graph as the file has it (inspect_onnx), the shapes a run would give its
// values (infer_onnx_shapes), and all of it with the model from one read,
// one parse of the file and one decode of its initializers (open_onnx).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <memory>
#include <set>

#include "core/io/limits.h"
#include "core/io/onnx.h"
#include "core/io/onnx/budget.h"
#include "core/io/onnx/context.h"
#include "core/io/onnx/registry.h"
#include "core/io/onnx_ops.h"

namespace tl {

using onnx_detail::Value;
using onnx_detail::value_info;

namespace {

// The graph as the file has it (OnnxModel folds its own copy). With `keep`,
// the initializers the statistics decoded stay in `parsed` for the model
// (ParsedModel::initializers), when every one of them could be read.
OnnxGraphInfo graph_of(onnx_detail::ParsedModel& parsed, const std::string& path, bool keep) {
  const onnx::ModelProto& m = parsed.model;
  // The statistics read every initializer: held to the same budget as a load,
  // so one external region named a thousand times is not read a thousand times.
  onnx_detail::InitializerBudget budget(path, parsed.bytes);
  OnnxGraphInfo info;
  info.opset = onnx_detail::default_opset(m);
  info.producer = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  const auto& g = m.graph();
  const std::string dir = onnx_detail::model_folder(path);
  std::set<std::string> init_names;
  for (const auto& t : g.initializer()) {
    init_names.insert(t.name());
    OnnxGraphInfo::Init in;
    in.name = t.name();
    in.shape.assign(t.dims().begin(), t.dims().end());
    in.dtype = onnx_detail::elem_name(t.data_type());
    // A hostile file's dimensions may be negative or overflow: -1 then.
    in.count = 1;
    for (auto d : in.shape)
      if (d < 0 || __builtin_mul_overflow(in.count, d, &in.count)) {
        in.count = -1;
        break;
      }
    Value v;
    bool read = false;
    try {
      v = onnx_detail::value_from_proto(t, dir, path, &budget);
      read = true;
    } catch (const IOError&) {
      // Statistics are a nicety: an unreadable initializer still shows up by
      // name; one past the load budget is an error, as loading it would be.
      if (budget.exceeded()) throw;
      keep = false;  // the model reads it again, and fails as a load does
    }
    if (read) {
      if (!v.data.empty()) {
        const auto [lo, hi] = std::minmax_element(v.data.begin(), v.data.end());
        const double mean = std::accumulate(v.data.begin(), v.data.end(), 0.0) / double(v.data.size());
        double sq = 0;
        for (double x : v.data) sq += (x - mean) * (x - mean);
        in.min = float(*lo);
        in.max = float(*hi);
        in.mean = float(mean);
        in.stddev = float(std::sqrt(sq / double(v.data.size())));
        in.has_stats = true;
      }
      if (keep) parsed.initializers.push_back(std::move(v));
    }
    info.initializers.push_back(std::move(in));
  }
  if (keep) parsed.file_bytes = budget.file_bytes();
  else parsed.initializers.clear();
  for (const auto& i : g.input())
    if (!init_names.count(i.name())) info.inputs.push_back(value_info(i));
  for (const auto& o : g.output()) info.outputs.push_back(value_info(o));
  for (const auto& v : g.value_info())
    if (v.type().has_tensor_type()) info.values.push_back(value_info(v));
  int k = 0;
  for (const auto& n : g.node()) {
    OnnxGraphInfo::Node node;
    node.name = n.name().empty() ? n.op_type() + "_" + std::to_string(k) : n.name();
    ++k;
    node.op_type = n.op_type();
    node.domain = n.domain().empty() ? "ai.onnx" : n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attributes.emplace_back(a.name(), onnx_detail::attribute_text(a));
    node.unsupported_reason = onnx_detail::op_unsupported_reason(n.domain(), n.op_type(), info.opset);
    node.supported = node.unsupported_reason.empty();
    info.nodes.push_back(std::move(node));
  }
  return info;
}

}  // namespace

OnnxGraphInfo inspect_onnx(const std::string& path) {
  onnx_detail::ParsedModel parsed = onnx_detail::parse_model(path);
  return graph_of(parsed, path, false);
}

OnnxFile open_onnx(const std::string& path) {
  onnx_detail::ParsedModel parsed = onnx_detail::parse_model(path);
  OnnxFile file;
  file.graph = graph_of(parsed, path, true);
  try {
    file.model = std::make_shared<OnnxModel>(path, std::move(parsed));
  } catch (const OnnxUnsupported& e) {
    file.unsupported = e.what();
  }
  return file;
}

bool infer_onnx_shapes(OnnxGraphInfo& info, const std::string& path, std::string* error, OnnxRunCost* cost) {
  std::unique_ptr<OnnxModel> model;
  try {
    model = std::make_unique<OnnxModel>(path);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return false;
  }
  return infer_onnx_shapes(info, *model, error, cost);
}

bool infer_onnx_shapes(OnnxGraphInfo& info, const OnnxModel& model, std::string* error, OnnxRunCost* cost) {
  std::map<std::string, Shape> shapes;
  bool complete = true;
  try {
    std::vector<Tensor> inputs;
    for (const auto& in : model.inputs()) {
      Shape s = in.shape;
      for (auto& d : s) d = d < 0 ? 1 : d;
      inputs.push_back(Tensor::zeros(s, DType::f32, "cpu"));
    }
    // A shape may depend on values that only a run computes (a reshape to
    // the contents of a layer's output): inspecting never runs the model, so
    // the shapes past that node stay unknown.
    std::string why;
    const OnnxRunCost estimate = model.estimate_run(inputs, &shapes, &why);
    if (!why.empty()) throw ShapeError(why);
    complete = estimate.complete;
    if (cost) *cost = estimate;
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return false;
  }
  if (!complete && error)
    *error = "some shapes depend on values computed from the weights or the input; they are known after a run";
  std::set<std::string> known;
  for (const auto* list : {&info.inputs, &info.outputs, &info.values})
    for (const auto& v : *list) known.insert(v.name);
  for (const auto& i : info.initializers) known.insert(i.name);
  for (const auto& n : info.nodes)
    for (const auto& out : n.outputs) {
      auto it = shapes.find(out);
      if (out.empty() || known.count(out) || it == shapes.end()) continue;
      OnnxValueInfo v;
      v.name = out;
      v.shape = it->second;
      v.dim_names.assign(v.shape.size(), "");
      info.values.push_back(std::move(v));
      known.insert(out);
    }
  return complete;
}

}  // namespace tl
