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
#include "core/runtime/run_memory.h"
#include "core/tensor.h"

namespace tl::onnx_detail {

// The load budget of a model's initializers (io::load_budget of the model
// file and the external files read so far): each is admitted before it is
// decoded, at 8 bytes an element, as the loader holds them (doubles until
// uploaded, whatever the file stores: a uint8 tensor takes 8 times its
// bytes). External data may name one region many times: the sum counts.
class InitializerBudget {
 public:
  InitializerBudget(std::string path, uint64_t model_bytes) : path_(std::move(path)), model_bytes_(model_bytes) {}
  std::map<std::string, uint64_t> external_files;  // read so far, with their sizes
  // Adds `elements` values, or throws IOError naming the budget.
  void admit(uint64_t elements);
  bool exceeded() const { return exceeded_; }  // an admit threw
  uint64_t file_bytes() const;                 // the model's and the external files'

 private:
  std::string path_;
  uint64_t model_bytes_, stored_ = 0;
  bool exceeded_ = false;
};

// For each value name the graph reads, the index of the last node of `g`
// that reads it (inside a subgraph of that node too); graph outputs read at
// g.node_size().
std::unordered_map<std::string, int> last_readers(const onnx::GraphProto& g);

// The peak bytes of a run of `g` whose values have `shapes` (4 bytes an
// element, as the devices store them), `last` its last_readers; `flops` as
// counted.
OnnxRunCost run_cost(const onnx::GraphProto& g, const std::unordered_map<std::string, int>& last,
                     const std::map<std::string, Shape>& shapes, double flops);

// The bytes of the inputs on a device (4 an element), and their shapes as an
// error shows them: "(1, 3, 224, 224)".
uint64_t input_bytes_of(const std::vector<Tensor>& inputs);
// The batch of a run: the first input's first dimension when the model
// leaves it free (`declared`: the model's inputs), else 1. The run's budgets
// scale with it (io::run_byte_budget): the caller chooses a free batch (the
// window and classify give 1), while a size the file fixes is the file's.
uint64_t batch_of(const std::vector<OnnxValueInfo>& declared, const std::vector<Tensor>& inputs);
std::string shapes_of(const std::vector<Tensor>& inputs);

// The bound on the device bytes one run of the model at `path` holds
// (RunMemory): the run byte budget of its file and these inputs. `path` and
// `inputs` must outlive the returned scope (its error reads them).
RunMemory bound_run_memory(const std::string& path, uint64_t file_bytes, const std::vector<OnnxValueInfo>& declared,
                           const std::vector<Tensor>& inputs);

}  // namespace tl::onnx_detail
