// The op graph as plain data, for the window's graph pane and for tools.
// Take the snapshot before realize(): realizing forgets how inference-only
// values were made.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/ops.h"

namespace tl {

struct GraphNode {
  uint64_t id = 0;
  std::string op;       // primitive name: "ADD", "SUM", "BUFFER", ...
  std::string scope;    // layer / composite op it came from: "blocks.3.conv2d"
  Shape shape;
  DType dtype = DType::f32;
  std::string detail;   // the op's arguments in words: "axes (1)", "pad ((0, 0), (1, 1))", "value 0.5"
  std::vector<uint64_t> inputs;
  bool realized = false;  // a buffer (weights, inputs, earlier results)
};

std::vector<GraphNode> snapshot_graph(const std::vector<NodeRef>& roots);

}  // namespace tl
