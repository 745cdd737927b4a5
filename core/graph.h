// The op graph as plain data, for the window's graph pane and for tools.
// Take the snapshot before realize(): realizing forgets how inference-only
// values were made.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_set>
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

// The arithmetic a realize of `roots` would do, counted on the lazy graph
// before any kernel exists: one FLOP per element of every elementwise node
// and per input element of every reduction (so a matmul's multiply-add is
// two), movement and leaves free. Realized nodes and those already in `seen`
// are not counted; the walk adds the ids of the ones it counts to `seen`
// (ids are never reused, so the nodes need not stay alive between walks).
double lazy_flops(const std::vector<NodeRef>& roots, std::unordered_set<uint64_t>& seen);

}  // namespace tl
