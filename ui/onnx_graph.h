// The ONNX file as Netron draws it: one box per node with its op type, the
// initializers it reads ("W <32x3x3x3>") and its main attributes; boxes for
// the graph's inputs and outputs; an edge per value passed between nodes.
// Built from the Qt-free OnnxGraphInfo, so it can run on a pool thread.
#pragma once
#include <QString>
#include <map>
#include <string>

#include "core/io/onnx.h"
#include "ui/graph_data.h"

namespace tlui {

// "⟨batch×3×224×224⟩"; "⟨⟩" for a scalar.
QString onnxShapeText(const tl::Shape& shape, const std::vector<std::string>& dimNames = {});

// What is known about each value name: graph inputs/outputs, the file's
// value_info and initializers.
struct OnnxValueIndex {
  std::map<std::string, const tl::OnnxValueInfo*> values;
  std::map<std::string, const tl::OnnxGraphInfo::Init*> initializers;
  explicit OnnxValueIndex(const tl::OnnxGraphInfo& info);
  QString typeText(const std::string& name) const;  // "float ⟨1×3⟩", "" when unknown
};

// The name ONNX's operator schema gives input `i` of `op` ("W" for Conv's
// second); "in<i>" for ops not in the small table.
QString onnxInputRole(const std::string& op, size_t i);

DisplayGraph buildOnnxGraph(const tl::OnnxGraphInfo& info);

// The details panel: every attribute, input and output with its type, and
// each initializer's statistics.
QString onnxNodeHtml(const tl::OnnxGraphInfo& info, int node);
// The model at a glance, with the unsupported nodes listed as links "onnx-node:<i>".
QString onnxSummaryHtml(const tl::OnnxGraphInfo& info, const QString& path);

}  // namespace tlui
