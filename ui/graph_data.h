// What the graph pane draws: the op graph with repeated blocks collapsed, or
// the kernel graph after scheduling. Built from plain core data, so it can be
// made and laid out on any thread.
#pragma once
#include <QRgb>
#include <QSet>
#include <QString>
#include <map>
#include <vector>

#include "core/graph.h"
#include "core/profile.h"

namespace tlui {

struct DisplayNode {
  QString label;        // shown in the box
  bool group = false;   // a collapsed block ("blocks.3")
  QString groupKey;     // the block this node belongs to / is
  std::vector<uint64_t> members;  // graph node ids (one for a primitive node)
  int kernel = -1;      // record index (primitive node or kernel graph node)
  double seconds = 0;   // time of the kernels it went into
  double width = 0, height = 0;  // box size in points; 0 lets Graphviz size it
  // ONNX graph only: index into OnnxGraphInfo::nodes (-1 for the graph's
  // input and output boxes), the op's colour, and whether tinylens lacks it.
  int onnxNode = -1;
  QRgb fill = 0;  // 0: coloured by time
  bool unsupported = false;
  // ONNX graph with a run of the model: the node's share of the run's
  // kernels (onnxRunCosts), which the metric colours; `seconds` above holds
  // its time.
  bool costed = false;
  double flops = 0, bytes = 0;
};

struct DisplayEdge {
  int from = 0, to = 0;
};

struct DisplayGraph {
  std::vector<DisplayNode> nodes;
  std::vector<DisplayEdge> edges;
  double maxSeconds = 0;
};

// "blocks.3.conv2d" -> "blocks.3"; "stem.conv2d" -> "stem"; "conv2d" -> "".
// The prefix up to the first numbered component is one repeated block; a
// scope without numbers is grouped by its first component when it has more.
QString groupKeyOf(const std::string& scope);

// The box each node is drawn in when collapsed ("" = drawn on its own):
// groupKeyOf its scope; each connected run of 4+ computed nodes without one
// becomes a box named after the scope most of them carry ("stem", "head"; else
// "ops", then "ops#2"...); a buffer read by one box only joins that box.
std::vector<QString> groupKeys(const std::vector<tl::GraphNode>& graph);

// Primitive node id -> index of the record whose kernel computed it.
std::map<uint64_t, int> kernelOfNodes(const std::vector<tl::ProfileRecord>& records);

// The op graph with every group not in `expanded` drawn as one box.
DisplayGraph buildOpGraph(const std::vector<tl::GraphNode>& graph, const std::vector<tl::ProfileRecord>& records,
                          const QSet<QString>& expanded);

// One box per kernel; an edge where a kernel reads another's output, found
// from the kernels' recorded inputs, from `graph`, the op graph of the run
// whose kernels they are (a node a kernel fused reads another's output), and
// from `reads`, (writer, reader) pairs of indices into `records`
// (kernelReadsFrom).
DisplayGraph buildKernelGraph(const std::vector<tl::ProfileRecord>& records,
                              const std::vector<tl::GraphNode>& graph = {},
                              const std::vector<std::pair<int, int>>& reads = {});

// Which of `shown`'s kernels reads which one's output, as (writer, reader)
// indices into `shown`, found by buffer in `run`: the records of a first run
// of the same kernels, not replayed, whose KernelInfo lists every node a
// kernel read (input_nodes) and the one it wrote (output_node); a node is
// one buffer. A replayed launch lists only what it read from outside its
// realize, and a Jit's replay (an ONNX model's forward) builds no op graph,
// so their kernel graph had no edge. `run` may hold more kernels (constants
// folded on the way); `shown`'s are found in it in order, by source. Empty
// when some are not.
std::vector<std::pair<int, int>> kernelReadsFrom(const std::vector<tl::ProfileRecord>& shown,
                                                 const std::vector<tl::ProfileRecord>& run);

struct NodeLayout {
  double x = 0, y = 0, w = 0, h = 0;  // centre and size, in points, y down
};
struct EdgeLayout {
  std::vector<std::pair<double, double>> points;  // cubic Bezier control points (1 + 3n)
  bool hasTip = false;                            // the arrowhead's point, beyond the curve
  std::pair<double, double> tip;
};
struct GraphLayout {
  std::vector<NodeLayout> nodes;
  std::vector<EdgeLayout> edges;  // same order as DisplayGraph::edges
  double width = 0, height = 0;
  QString error;
};

// Graphviz "dot" on the graph. Thread-safe (serialised: Graphviz keeps global
// state), meant to run off the UI thread.
GraphLayout layoutGraph(const DisplayGraph& graph);

}  // namespace tlui
