// ONNX models on tl::Tensor: the protobuf file is parsed with the onnx_proto
// classes, and each run walks the graph once, turning nodes into lazy tensor
// ops. Small integer tensors that only describe shapes (Shape -> Gather ->
// Concat -> Reshape) stay on the host, so reshapes and slices see plain ints.
// Also: a Qt-free description of a graph for the window, serialized tensors
// and the table of supported ops.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace tl {

namespace onnx_detail {
struct ParsedModel;  // onnx_ops.h
}

// A node the runtime cannot map (op, attribute value or data type it lacks).
// Its message reads "unsupported ONNX op 'domain::Op' (opset N)[: why]".
struct OnnxUnsupported : IOError {
  OnnxUnsupported(const std::string& what, std::string op) : IOError(what), op(std::move(op)) {}
  std::string op;  // "ai.onnx::Foo", "com.microsoft::FusedConv"
};

// A graph input or output. Dynamic dimensions are -1 in `shape` and keep
// their dim_param name ("batch") in `dim_names` ("" where the size is fixed).
struct OnnxValueInfo {
  std::string name;
  Shape shape;
  std::vector<std::string> dim_names;
  std::string dtype;  // ONNX spelling: "float", "int64", "bool", ...
};

// What the window draws: every node (marked when the runtime lacks it) and
// statistics of every initializer. Reads the file, runs nothing.
struct OnnxGraphInfo {
  struct Node {
    std::string name, op_type, domain;
    std::vector<std::string> inputs, outputs;
    std::vector<std::pair<std::string, std::string>> attributes;  // name, printed value
    bool supported = true;
    std::string unsupported_reason;  // "no handler", "covers opsets 11 and later"; "" when supported
  };
  std::vector<Node> nodes;
  struct Init {
    std::string name;
    Shape shape;
    std::string dtype;
    int64_t count = 0;  // elements
    bool has_stats = false;  // false when the values could not be read
    float min = 0, max = 0, mean = 0, stddev = 0;
  };
  std::vector<Init> initializers;
  std::vector<OnnxValueInfo> inputs, outputs;  // inputs exclude initializers
  // Intermediate values whose type the file records (graph.value_info, as
  // written by shape inference); the others have no known shape.
  std::vector<OnnxValueInfo> values;
  int64_t opset = 0;                           // of the default domain
  std::string producer;                        // "pytorch 1.13.1"
};
// The cost of one run, estimated before any kernel launches: FLOPs counted
// on the lazy graph (one per element of each elementwise op and per input
// element of each reduction), and the bytes the values hold at the busiest
// node (4 bytes an element; a value lives from the node that makes it to the
// last that reads it; the weights throughout). `complete` is false when a
// shape depends on a computed value: the figures cover the nodes before it.
struct OnnxRunCost {
  double flops = 0;
  uint64_t peak_bytes = 0;
  std::string busiest;  // "'name' (Op)": the node after which the most bytes are held
  bool complete = true;
};

OnnxGraphInfo inspect_onnx(const std::string& path);
// Adds to info.values the shape of every value the file does not describe,
// found by building the model's lazy graph on the cpu with the declared input
// shapes (dynamic dimensions taken as 1); no kernel runs but the small shape
// arithmetic some graphs do on the device (never a layer: inspecting costs
// what the file does, not what a run computes). Returns false, and adds
// nothing, when the model cannot be built (an unsupported node...); also
// false, with the shapes before it added, when a shape depends on values
// only a run computes. Then `error`, when given, receives the reason.
// `cost`, when given, receives the estimated cost of a run at those shapes.
bool infer_onnx_shapes(OnnxGraphInfo& info, const std::string& path, std::string* error = nullptr,
                       OnnxRunCost* cost = nullptr);
class OnnxModel;
// The same on a model already open.
bool infer_onnx_shapes(OnnxGraphInfo& info, const OnnxModel& model, std::string* error = nullptr,
                       OnnxRunCost* cost = nullptr);

// An ONNX file opened once: one read and one parse give the graph as the
// file has it and, when tinylens can run it, the model.
struct OnnxFile {
  OnnxGraphInfo graph;
  std::shared_ptr<const OnnxModel> model;  // null when the file has what the runtime lacks
  std::string unsupported;                 // then: the OnnxUnsupported message
};
// Throws what inspect_onnx and OnnxModel's constructor throw, except
// OnnxUnsupported (OnnxFile::unsupported).
OnnxFile open_onnx(const std::string& path);
// ONNX files this process has parsed, and initializers it has decoded
// (tests: one parse and one decode per open).
size_t onnx_parses();
size_t onnx_initializer_decodes();

class OnnxModel {
 public:
  // Parses the file and its external data; throws IOError for a file that is
  // not an ONNX model and OnnxUnsupported for the first node it cannot run.
  explicit OnnxModel(const std::string& path);
  // The same from a file parse_model already read (open_onnx).
  OnnxModel(const std::string& path, onnx_detail::ParsedModel&& parsed);
  ~OnnxModel();
  OnnxModel(const OnnxModel&) = delete;
  OnnxModel& operator=(const OnnxModel&) = delete;

  const std::string& path() const;
  int64_t opset() const;
  const std::vector<OnnxValueInfo>& inputs() const;
  const std::vector<OnnxValueInfo>& outputs() const;
  int64_t parameters() const;  // elements of all initializers
  int64_t nodes() const;

  // One tensor per graph input, in inputs() order (trailing optional inputs
  // may be left out); returns one tensor per graph output, on the device of
  // the first input. int64 values become int32 tensors; doubles stay float64
  // (refused by a device without fp64).
  // A graph of one input and one output runs through a Jit per device
  // (core/jit.h): once a run of an input shape has built its graph with no
  // realize or read back on the way, later runs of that shape replay the
  // plan without walking the graph (jit_captured says so).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  // The most device bytes the last run() made and held at once (its buffers
  // are bounded by the run budget as they are made: core/runtime/run_memory.h).
  uint64_t last_run_peak_bytes() const;
  bool jit_captured(const std::string& device) const;
  // What a run on `inputs` would cost, from a walk that builds the lazy graph
  // and launches nothing (small shape arithmetic on the device aside).
  // `shapes`, when given, receives every value's shape; `error`, when given,
  // why the walk stopped at a node it could not build (the estimate then
  // covers the nodes before it).
  OnnxRunCost estimate_run(const std::vector<Tensor>& inputs, std::map<std::string, Shape>* shapes = nullptr,
                           std::string* error = nullptr) const;
  // run() that also records the shape of every value it computes; walks the
  // graph every time.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, std::map<std::string, Shape>* shapes) const;

 private:
  // Refuses a run whose FLOPs or peak bytes, estimated by a walk that launches
  // nothing, pass the run budget (io::check_run_budget); once per device and
  // input shapes.
  void check_run_budget(const std::vector<Tensor>& inputs, const std::string& device) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A serialized TensorProto (.pb of the conformance cases), values widened to double.
struct OnnxTensorData {
  std::string name;
  Shape shape;
  int32_t elem_type = 1;  // onnx::TensorProto::DataType
  std::vector<double> values;
};
OnnxTensorData load_onnx_tensor(const std::string& pb_path);
// A device tensor of the values: float types become float32, integers int32
// (clamped), bool bool. Throws OnnxUnsupported for strings and complex numbers.
Tensor onnx_tensor_to_tensor(const OnnxTensorData& t, const std::string& device);

// The ops the runtime's op table holds (core/io/onnx/registry.h), by name.
struct OnnxOpInfo {
  std::string name;      // in the default domain (ai.onnx)
  int64_t since = 1;     // first opset covered
  int64_t until = 0;     // last opset covered; INT64_MAX for every later one
  std::string types;     // accepted types of the first input: "any", "float", "int|bool", ...
  bool host = false;     // computes on the host (else builds device ops)
};
std::vector<OnnxOpInfo> onnx_supported_ops();

}  // namespace tl
