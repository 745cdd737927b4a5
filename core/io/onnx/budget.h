// What one run of an ONNX graph costs, known before any kernel launches:
// its FLOPs (counted on the lazy graph by a ShapesOnly walk) and the bytes
// its values hold at the busiest node (from their shapes and the node order:
// a value lives from the node that makes it to the last node that reads it,
// the initializers all run long). OnnxModel::run checks both against the run
// budget (io::check_run_budget) once per device and input shapes, and frees
// each value after its last reader, so the estimate is what a run holds.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "core/dtype.h"
#include "core/io/onnx.h"

namespace tl::onnx_detail {

// For each value name the graph reads, the index of the last node of `g`
// that reads it (inside a subgraph of that node too); graph outputs read at
// g.node_size().
std::unordered_map<std::string, int> last_readers(const onnx::GraphProto& g);

// The peak bytes of a run of `g` whose values have `shapes` (4 bytes an
// element, as the devices store them), `last` its last_readers; `flops` as
// counted.
OnnxRunCost run_cost(const onnx::GraphProto& g, const std::unordered_map<std::string, int>& last,
                     const std::map<std::string, Shape>& shapes, double flops);

}  // namespace tl::onnx_detail
