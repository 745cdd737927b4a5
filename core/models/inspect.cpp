#include "core/models/inspect.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/models/onnx_classifier.h"

namespace tl {

namespace {

namespace fs = std::filesystem;

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

std::string format_of(const std::string& name_or_path) {
  if (name_or_path == "efficientnet-lite0") return "builtin";
  const std::string ext = lower_extension(name_or_path);
  if (ext == ".onnx") return "onnx";
  if (ext == ".safetensors") return "safetensors";
  return "pth";  // load_classifier reads anything else as a PyTorch checkpoint
}

#ifdef TL_HAVE_ONNX
// Multiply-adds of the ops that dominate a network, counted from the shapes
// inference found (2 FLOPs each); 0 when a shape is missing.
double onnx_flops(const OnnxGraphInfo& g) {
  std::map<std::string, Shape> shapes;
  for (const auto* list : {&g.inputs, &g.outputs, &g.values})
    for (const auto& v : *list) shapes[v.name] = v.shape;
  for (const auto& i : g.initializers) shapes[i.name] = i.shape;
  auto known = [&](const std::string& name, Shape& s) {
    auto it = shapes.find(name);
    if (it == shapes.end()) return false;
    for (auto d : it->second)
      if (d < 0) return false;
    s = it->second;
    return true;
  };
  auto count = [](const Shape& s) {
    double n = 1;
    for (auto d : s) n *= double(d);
    return n;
  };
  double total = 0;
  for (const auto& n : g.nodes) {
    if (n.inputs.size() < 2 || n.outputs.empty()) continue;
    Shape a, w, y;
    if (!known(n.inputs[0], a) || !known(n.inputs[1], w) || !known(n.outputs[0], y)) continue;
    if ((n.op_type == "Conv" || n.op_type == "ConvTranspose") && w.size() >= 2) {
      // Each output value sums C/groups x kernel products (ConvTranspose: per input value).
      double per = count(Shape(w.begin() + 1, w.end()));
      total += 2 * per * (n.op_type == "Conv" ? count(y) : count(a));
    } else if ((n.op_type == "MatMul" || n.op_type == "Gemm") && !a.empty()) {
      int64_t k = a.back();
      if (n.op_type == "Gemm") {
        bool trans_a = false;
        for (const auto& [name, value] : n.attributes)
          if (name == "transA") trans_a = value == "1";
        if (a.size() == 2 && trans_a) k = a[0];
      }
      total += 2 * count(y) * double(k);
    }
  }
  return total;
}
#endif

std::string shape_text(const OnnxValueInfo& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.shape.size(); ++i) {
    if (i) s += ", ";
    s += v.shape[i] >= 0 ? std::to_string(v.shape[i]) : (v.dim_names[i].empty() ? "?" : v.dim_names[i]);
  }
  return s + "]";
}

std::string thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

std::string flops_text(double f) {
  char buf[64];
  if (f >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GFLOPs", f / 1e9);
  else if (f >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MFLOPs", f / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f FLOPs", f);
  return buf;
}

}  // namespace

ModelInspection inspect_model_file(const std::string& name_or_path) {
  ModelInspection m;
  m.path = name_or_path;
  m.format = format_of(name_or_path);
  if (m.format == "onnx") {
#ifdef TL_HAVE_ONNX
    // One read and one parse for the graph, its shapes and the classifier.
    OnnxFile file = open_onnx(name_or_path);
    m.graph = std::move(file.graph);
    for (const auto& n : m.graph->nodes) m.unsupported += n.supported ? 0 : 1;
    if (m.unsupported == 0 && file.model)
      m.shapes_inferred = infer_onnx_shapes(*m.graph, *file.model, &m.shapes_error, &m.run_cost);
    else if (m.unsupported == 0)
      m.shapes_error = file.unsupported;
    m.onnx_flops = m.shapes_inferred ? onnx_flops(*m.graph) : 0;
    // A readable graph that cannot classify still shows; a file that cannot
    // be loaded at all (hostile sizes, external data) is an error.
    m.classifier_error = file.unsupported;
    try {
      if (file.model) m.classifier = load_classifier(file.model);
      if (m.classifier) m.onnx = file.model;
    } catch (const NotAClassifier& e) {
      m.classifier_error = e.what();
    }
#else
    m.classifier = load_classifier(name_or_path);
#endif
  } else {
    m.classifier = load_classifier(name_or_path);
  }
  if (m.classifier) m.summary = m.classifier->summary();
  return m;
}

std::string run_cost_text(const OnnxRunCost& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "a run: %s, at most %.1f MB of values at once (estimated before running%s)",
                flops_text(c.flops).c_str(), double(c.peak_bytes) / 1e6, c.complete ? "" : "; part of the graph");
  return buf;
}

std::string format_inspection(const ModelInspection& m) {
  std::ostringstream out;
  out << "model: " << m.path << "\n";
  if (m.graph) {
    const OnnxGraphInfo& g = *m.graph;
    out << "format: ONNX, opset " << g.opset << (g.producer.empty() ? "" : ", produced by " + g.producer) << "\n";
    out << "inputs:\n";
    for (const auto& v : g.inputs) out << "  " << v.name << "  " << v.dtype << " " << shape_text(v) << "\n";
    out << "outputs:\n";
    for (const auto& v : g.outputs) out << "  " << v.name << "  " << v.dtype << " " << shape_text(v) << "\n";
    std::map<std::string, int> ops;
    for (const auto& n : g.nodes) ++ops[n.domain == "ai.onnx" ? n.op_type : n.domain + "::" + n.op_type];
    std::vector<std::pair<std::string, int>> sorted(ops.begin(), ops.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out << "nodes: " << g.nodes.size() << " (";
    for (size_t i = 0; i < sorted.size(); ++i) out << (i ? ", " : "") << sorted[i].first << " " << sorted[i].second;
    out << ")\n";
    int64_t params = 0;
    bool all_known = true;
    for (const auto& i : g.initializers) {
      if (i.count < 0) all_known = false;
      else params += i.count;
    }
    out << "parameters: " << thousands(params) << (all_known ? "" : "+") << " in " << g.initializers.size()
        << " initializers\n";
    if (m.onnx_flops > 0) out << "FLOPs: " << flops_text(m.onnx_flops) << " per run (Conv, ConvTranspose, MatMul, Gemm)\n";
    else out << "FLOPs: unknown (" << (m.shapes_inferred ? "no Conv, MatMul or Gemm" : "shapes not inferred") << ")\n";
    if (m.run_cost.flops > 0) out << run_cost_text(m.run_cost) << "\n";
    if (!m.shapes_inferred && !m.shapes_error.empty()) out << "shapes: not inferred: " << m.shapes_error << "\n";
    out << "unsupported nodes: " << (m.unsupported ? std::to_string(m.unsupported) : std::string("none")) << "\n";
    for (const auto& n : g.nodes)
      if (!n.supported) out << "  " << n.name << "  " << n.domain << "::" << n.op_type << "\n";
  } else {
    const char* name = m.format == "builtin" ? "built-in" : m.format == "safetensors" ? "safetensors" : "PyTorch checkpoint";
    out << "format: " << name << "\n";
    Shape in = m.summary.input_shape;
    out << "inputs:\n  image  float [";
    for (size_t i = 0; i < in.size(); ++i) out << (i ? ", " : "") << in[i];
    out << "]\n";
    out << "outputs:\n  logits  float [1, " << (m.classifier ? m.classifier->labels().size() : 0) << "]\n";
    out << "layers: " << m.summary.layers << " (convolutions and linear layers)\n";
    out << "parameters: " << thousands(m.summary.parameters) << "\n";
    if (m.summary.flops > 0) out << "FLOPs: " << flops_text(m.summary.flops) << " per image\n";
    else out << "FLOPs: unknown\n";
    out << "unsupported nodes: none\n";
  }
  if (m.classifier) {
    out << "classifier: " << m.summary.name << ", " << m.classifier->labels().size() << " classes\n";
    for (const auto& n : m.summary.notes) out << "  " << n << "\n";
  } else {
    out << "classifier: none (" << m.classifier_error << ")\n";
  }
  return out.str();
}

}  // namespace tl
