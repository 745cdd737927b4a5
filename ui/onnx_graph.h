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
#include "ui/run_data.h"

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

// What a run of the model cost each node of its file: the kernels a node
// became, mapped back through KernelInfo::origins (the ONNX node each
// primitive op was made for). A kernel that fused several nodes (a Conv and
// its Relu) is split among them by their shares of its FLOPs: each node gets
// that share of the kernel's time, FLOPs and bytes, so the nodes' times sum
// to the kernels' (with `outsideSeconds`, what no node of the file made).
struct OnnxNodeCost {
  double seconds = 0, flops = 0, bytes = 0;
  std::vector<std::pair<int, double>> kernels;  // record index, this node's share of it
};
struct OnnxRunCosts {
  std::vector<OnnxNodeCost> nodes;  // one per OnnxGraphInfo::nodes
  double outsideSeconds = 0, kernelSeconds = 0;
};
OnnxRunCosts onnxRunCosts(const tl::OnnxGraphInfo& info, const std::vector<tl::ProfileRecord>& records);
// Whether `run` ran the file at `path` (its costs and shapes belong to it).
bool runIsOf(const RunData& run, const QString& path);

// With `run` (of this file): each box also shows its outputs' shapes in the
// run (a dynamic batch as it was) and its time, FLOPs and bytes.
DisplayGraph buildOnnxGraph(const tl::OnnxGraphInfo& info, const RunData* run = nullptr);

// The details panel: every attribute, input and output with its type, and
// each initializer's statistics.
QString onnxNodeHtml(const tl::OnnxGraphInfo& info, int node);
// The node in the run: its outputs' shapes, time, FLOPs, bytes and the
// kernels it became (links "kernel:<record>") with its share of each.
QString onnxNodeRunHtml(const tl::OnnxGraphInfo& info, int node, const RunData& run);
// The model at a glance, with the unsupported nodes listed as links "onnx-node:<i>".
QString onnxSummaryHtml(const tl::OnnxGraphInfo& info, const QString& path);

}  // namespace tlui
