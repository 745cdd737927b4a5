#include "ui/onnx_graph.h"

#include <QColor>
#include <QStringList>
#include <algorithm>
#include <set>

namespace tlui {

namespace {

// Long attribute values would make boxes as wide as the screen.
QString elide(const QString& s, int max) { return s.size() <= max ? s : s.left(max - 1) + QChar(0x2026); }

QString number(double v) { return QString::number(v, 'g', 6); }

// Netron's families of ops, in pale tints so black text stays readable.
QRgb opColour(const std::string& op) {
  static const std::set<std::string> layer = {"Conv", "ConvTranspose", "Gemm", "MatMul", "ConvInteger",
                                              "MatMulInteger", "QLinearConv", "QLinearMatMul", "Einsum"};
  static const std::set<std::string> activation = {"Relu", "Sigmoid", "Tanh", "Clip", "LeakyRelu", "Elu", "Selu",
                                                    "HardSigmoid", "HardSwish", "Softmax", "LogSoftmax", "PRelu",
                                                    "Gelu", "Softplus", "Mish", "Celu", "ThresholdedRelu"};
  static const std::set<std::string> pool = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                                             "LpPool", "ReduceMean", "ReduceMax", "ReduceSum"};
  static const std::set<std::string> norm = {"BatchNormalization", "LayerNormalization", "InstanceNormalization",
                                             "LRN", "GroupNormalization", "Dropout"};
  static const std::set<std::string> shape = {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat",
                                              "Split", "Gather", "Shape", "Slice", "Pad", "Expand", "Tile", "Resize"};
  if (layer.count(op)) return qRgb(196, 216, 244);
  if (activation.count(op)) return qRgb(246, 212, 206);
  if (pool.count(op)) return qRgb(208, 234, 208);
  if (norm.count(op)) return qRgb(222, 214, 242);
  if (shape.count(op)) return qRgb(238, 230, 210);
  if (op == "Constant") return qRgb(232, 232, 232);
  return qRgb(242, 242, 246);
}

}  // namespace

QString onnxShapeText(const tl::Shape& shape, const std::vector<std::string>& dimNames) {
  QStringList dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] >= 0) dims << QString::number(shape[i]);
    else if (i < dimNames.size() && !dimNames[i].empty()) dims << qs(dimNames[i]);
    else dims << "?";
  }
  return QString(QChar(0x27E8)) + dims.join(QChar(0x00D7)) + QChar(0x27E9);
}

OnnxValueIndex::OnnxValueIndex(const tl::OnnxGraphInfo& info) {
  for (const auto& v : info.values) values[v.name] = &v;
  for (const auto& v : info.inputs) values[v.name] = &v;
  for (const auto& v : info.outputs) values[v.name] = &v;
  for (const auto& i : info.initializers) initializers[i.name] = &i;
}

QString OnnxValueIndex::typeText(const std::string& name) const {
  if (auto it = initializers.find(name); it != initializers.end())
    return qs(it->second->dtype) + " " + onnxShapeText(it->second->shape);
  if (auto it = values.find(name); it != values.end())
    return (it->second->dtype.empty() ? QString() : qs(it->second->dtype) + " ") +
           onnxShapeText(it->second->shape, it->second->dim_names);
  return {};
}

QString onnxInputRole(const std::string& op, size_t i) {
  static const std::map<std::string, std::vector<const char*>> roles = {
      {"Conv", {"X", "W", "B"}},
      {"ConvTranspose", {"X", "W", "B"}},
      {"Gemm", {"A", "B", "C"}},
      {"MatMul", {"A", "B"}},
      {"Add", {"A", "B"}},
      {"Sub", {"A", "B"}},
      {"Mul", {"A", "B"}},
      {"Div", {"A", "B"}},
      {"Pow", {"X", "Y"}},
      {"BatchNormalization", {"X", "scale", "B", "mean", "var"}},
      {"InstanceNormalization", {"input", "scale", "B"}},
      {"LayerNormalization", {"X", "Scale", "B"}},
      {"Reshape", {"data", "shape"}},
      {"Expand", {"input", "shape"}},
      {"Tile", {"input", "repeats"}},
      {"Gather", {"data", "indices"}},
      {"Slice", {"data", "starts", "ends", "axes", "steps"}},
      {"Pad", {"data", "pads", "constant_value", "axes"}},
      {"Clip", {"input", "min", "max"}},
      {"Unsqueeze", {"data", "axes"}},
      {"Squeeze", {"data", "axes"}},
      {"Resize", {"X", "roi", "scales", "sizes"}},
      {"PRelu", {"X", "slope"}},
      {"Where", {"condition", "X", "Y"}},
  };
  auto it = roles.find(op);
  if (it != roles.end() && i < it->second.size()) return it->second[i];
  return QString("in%1").arg(i);
}

OnnxRunCosts onnxRunCosts(const tl::OnnxGraphInfo& info, const std::vector<tl::ProfileRecord>& records) {
  OnnxRunCosts out;
  out.nodes.resize(info.nodes.size());
  for (size_t r = 0; r < records.size(); ++r) {
    const tl::ProfileRecord& rec = records[r];
    out.kernelSeconds += rec.seconds;
    double mapped = 0;
    for (const auto& o : rec.kernel->origins) {
      if (o.node < 0 || size_t(o.node) >= out.nodes.size()) continue;
      OnnxNodeCost& c = out.nodes[size_t(o.node)];
      c.seconds += rec.seconds * o.share;
      c.flops += rec.kernel->flops * o.share;
      c.bytes += rec.kernel->bytes * o.share;
      c.kernels.push_back({int(r), o.share});
      mapped += o.share;
    }
    out.outsideSeconds += rec.seconds * std::max(0.0, 1.0 - mapped);
  }
  return out;
}

bool runIsOf(const RunData& run, const QString& path) { return !path.isEmpty() && run.model == path; }

namespace {

// "0.042 ms, 1.2 MFLOP, 0.35 MB"
QString costText(const OnnxNodeCost& c) {
  return QString("%1 ms, %2 MFLOP, %3 MB")
      .arg(c.seconds * 1e3, 0, 'f', 3)
      .arg(c.flops * 1e-6, 0, 'g', 3)
      .arg(c.bytes * 1e-6, 0, 'g', 3);
}

// A value's shape in the run, or "" when the run did not record it.
QString runShape(const RunData* run, const std::string& name) {
  if (!run) return {};
  auto it = run->valueShapes.find(name);
  return it == run->valueShapes.end() ? QString() : onnxShapeText(it->second);
}

}  // namespace

DisplayGraph buildOnnxGraph(const tl::OnnxGraphInfo& info, const RunData* run) {
  DisplayGraph g;
  const OnnxValueIndex index(info);
  const OnnxRunCosts costs = run ? onnxRunCosts(info, run->records) : OnnxRunCosts{};
  std::map<std::string, int> producer;  // value name -> display node
  for (const auto& in : info.inputs) {
    DisplayNode d;
    const QString ran = runShape(run, in.name), declared = onnxShapeText(in.shape, in.dim_names);
    d.label = QString("input\n%1 %2").arg(qs(in.name), ran.isEmpty() || ran == declared ? declared
                                                                                       : ran + " (" + declared + ")");
    d.fill = qRgb(214, 238, 214);
    producer[in.name] = int(g.nodes.size());
    g.nodes.push_back(d);
  }
  std::set<std::pair<int, int>> seen;
  auto connect = [&](const std::string& value, int to) {
    auto it = producer.find(value);
    if (it != producer.end() && it->second != to && seen.insert({it->second, to}).second)
      g.edges.push_back({it->second, to});
  };
  for (size_t i = 0; i < info.nodes.size(); ++i) {
    const auto& n = info.nodes[i];
    DisplayNode d;
    d.onnxNode = int(i);
    d.unsupported = !n.supported;
    d.fill = opColour(n.op_type);
    QStringList lines;
    lines << (n.domain == "ai.onnx" ? qs(n.op_type) : qs(n.domain + "::" + n.op_type));
    const int to = int(g.nodes.size());
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const std::string& name = n.inputs[k];
      if (name.empty()) continue;
      auto init = index.initializers.find(name);
      if (init != index.initializers.end() && !producer.count(name))
        lines << onnxInputRole(n.op_type, k) + " " + onnxShapeText(init->second->shape);
      else
        connect(name, to);
    }
    int shown = 0;
    for (const auto& [name, value] : n.attributes) {
      if (++shown > 3) {
        lines << QString("+%1 more").arg(n.attributes.size() - 3);
        break;
      }
      lines << elide(qs(name) + " = " + qs(value), 32);
    }
    if (d.unsupported) lines << QString::fromUtf8("\u26A0 unsupported");
    if (run) {
      QStringList shapes;
      for (const auto& out : n.outputs)
        if (!runShape(run, out).isEmpty()) shapes << runShape(run, out);
      if (!shapes.isEmpty()) lines << QString::fromUtf8("\u2192 ") + shapes.join(" ");
      const OnnxNodeCost& c = costs.nodes[i];
      lines << (c.kernels.empty() ? QString("no kernel") : costText(c));
      d.costed = true;
      d.seconds = c.seconds, d.flops = c.flops, d.bytes = c.bytes;
    }
    d.label = lines.join('\n');
    for (const auto& out : n.outputs)
      if (!out.empty()) producer[out] = to;
    g.nodes.push_back(d);
  }
  for (const auto& out : info.outputs) {
    DisplayNode d;
    const QString ran = runShape(run, out.name), declared = onnxShapeText(out.shape, out.dim_names);
    d.label = QString("output\n%1 %2").arg(qs(out.name), ran.isEmpty() || ran == declared ? declared
                                                                                         : ran + " (" + declared + ")");
    d.fill = qRgb(214, 238, 214);
    int to = int(g.nodes.size());
    g.nodes.push_back(d);
    connect(out.name, to);
  }
  return g;
}

QString onnxNodeHtml(const tl::OnnxGraphInfo& info, int node) {
  if (node < 0 || size_t(node) >= info.nodes.size()) return {};
  const auto& n = info.nodes[size_t(node)];
  const OnnxValueIndex index(info);
  QString html = QString("<h3>%1 <small>%2</small></h3><p>Node: %3</p>")
                     .arg(qs(n.op_type).toHtmlEscaped(), qs(n.domain).toHtmlEscaped(), qs(n.name).toHtmlEscaped());
  if (!n.supported)
    html += QString("<p style='color:#c00000'><b>Unsupported:</b> tinylens has no mapping for %1::%2 "
                    "(its op table: %3), so this model cannot run here.</p>")
                .arg(qs(n.domain).toHtmlEscaped(), qs(n.op_type).toHtmlEscaped(),
                     qs(n.unsupported_reason).toHtmlEscaped());
  html += "<p><b>Attributes</b><br>";
  if (n.attributes.empty()) html += "none";
  for (const auto& [name, value] : n.attributes)
    html += QString("%1 = %2<br>").arg(qs(name).toHtmlEscaped(), qs(value).toHtmlEscaped());
  html += "</p><p><b>Inputs</b><br>";
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const std::string& name = n.inputs[k];
    if (name.empty()) continue;
    QString type = index.typeText(name);
    html += QString("%1: %2 %3").arg(onnxInputRole(n.op_type, k), qs(name).toHtmlEscaped(),
                                     type.isEmpty() ? QString("<i>shape unknown</i>") : type.toHtmlEscaped());
    auto init = index.initializers.find(name);
    if (init != index.initializers.end()) {
      const auto& t = *init->second;
      html += QString("<br>&nbsp;&nbsp;initializer, %1 elements").arg(t.count);
      if (t.has_stats)
        html += QString("<br>&nbsp;&nbsp;min %1, max %2, mean %3, std %4")
                    .arg(number(t.min), number(t.max), number(t.mean), number(t.stddev));
    }
    html += "<br>";
  }
  html += "</p><p><b>Outputs</b><br>";
  for (const auto& name : n.outputs) {
    if (name.empty()) continue;
    QString type = index.typeText(name);
    html += QString("%1 %2<br>").arg(qs(name).toHtmlEscaped(),
                                     type.isEmpty() ? QString("<i>shape unknown</i>") : type.toHtmlEscaped());
  }
  return html + "</p>";
}

QString onnxNodeRunHtml(const tl::OnnxGraphInfo& info, int node, const RunData& run) {
  if (node < 0 || size_t(node) >= info.nodes.size()) return {};
  const auto& n = info.nodes[size_t(node)];
  const OnnxRunCosts costs = onnxRunCosts(info, run.records);
  const OnnxNodeCost& c = costs.nodes[size_t(node)];
  QString html = QString("<p><b>In the run</b> (%1)<br>").arg(runSubject(run).toHtmlEscaped());
  for (const auto& out : n.outputs) {
    const QString shape = runShape(&run, out);
    if (!out.empty() && !shape.isEmpty()) html += QString("%1 %2<br>").arg(qs(out).toHtmlEscaped(), shape);
  }
  if (c.kernels.empty())
    return html + "No kernel computes it: it was folded at load, computed once, on the host, or read in place "
                  "by the kernels of the nodes after it.</p>";
  html += costText(c) + "</p><p><b>Kernels</b> (its share of each)<br>";
  for (const auto& [record, share] : c.kernels) {
    const auto& r = run.records[size_t(record)];
    html += QString("<a href='kernel:%1'>%2</a> %3 ms, %4%<br>")
                .arg(record)
                .arg(QString::fromStdString(r.kernel->name).toHtmlEscaped())
                .arg(r.seconds * 1e3, 0, 'f', 3)
                .arg(share * 100, 0, 'f', 0);
  }
  return html + "</p>";
}

QString onnxSummaryHtml(const tl::OnnxGraphInfo& info, const QString& path) {
  int64_t parameters = 0;
  for (const auto& i : info.initializers) parameters += i.count;
  QString html = QString("<h3>%1</h3><p>%2<br>opset %3, %4 nodes, %5 initializers (%6 values)</p>")
                     .arg(path.section('/', -1).toHtmlEscaped(), qs(info.producer).toHtmlEscaped())
                     .arg(info.opset)
                     .arg(info.nodes.size())
                     .arg(info.initializers.size())
                     .arg(parameters);
  const OnnxValueIndex index(info);
  html += "<p><b>Inputs</b><br>";
  for (const auto& v : info.inputs) html += (qs(v.name) + " " + index.typeText(v.name)).toHtmlEscaped() + "<br>";
  html += "</p><p><b>Outputs</b><br>";
  for (const auto& v : info.outputs) html += (qs(v.name) + " " + index.typeText(v.name)).toHtmlEscaped() + "<br>";
  html += "</p>";
  QStringList unsupported;
  for (size_t i = 0; i < info.nodes.size(); ++i) {
    const auto& n = info.nodes[i];
    if (!n.supported)
      unsupported << QString("<a href='onnx-node:%1'>%2</a> (%3::%4: %5)")
                         .arg(i)
                         .arg(qs(n.name).toHtmlEscaped(), qs(n.domain).toHtmlEscaped(), qs(n.op_type).toHtmlEscaped(),
                              qs(n.unsupported_reason).toHtmlEscaped());
  }
  if (unsupported.isEmpty())
    html += "<p>Every node is supported.</p>";
  else
    html += QString("<p style='color:#c00000'><b>%1 unsupported nodes</b><br>%2</p>")
                .arg(unsupported.size())
                .arg(unsupported.join("<br>"));
  return html + "<p><i>Click a node for its attributes, inputs and initializer statistics.</i></p>";
}

}  // namespace tlui
