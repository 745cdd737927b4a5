// Internal to the ONNX loader: the value a graph edge carries while a model
// runs, and the op table. Not part of the public API (see onnx.h).
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/io/onnx.h"
#include "core/tensor.h"

namespace tl::onnx_detail {

// An edge of the graph. Constants, initializers and shape arithmetic keep
// their values on the host (`host`), so ops that need plain numbers (Reshape's
// shape, Slice's starts) read them without running a kernel; the device
// tensor is made from them only when a real op consumes them.
struct Value {
  int32_t elem = onnx::TensorProto::FLOAT;
  Shape shape;
  bool host = false;
  std::vector<double> data;  // row-major, when host
  Tensor tensor;             // when !host, or once uploaded
  bool present = true;       // false for an omitted optional input ("")
  // A sequence (SequenceConstruct, SplitToSequence...): its tensors in order,
  // held on the host side of the graph walk; elem, shape and data are unused.
  bool is_sequence = false;
  std::vector<Value> items;
};

// What one model run may ask of the runtime, beside the element limit each
// value obeys (the load budget of io::load_limits, applied by OnnxModel::run):
// the ONNX runtime's own limits, in one place. Exceeding one is a ShapeError
// or, for a structure this runtime will not unroll, OnnxUnsupported.
namespace run_limits {
// Largest kernel size, stride, dilation, pad, block size or resized extent an
// attribute may hold: beyond any real model, small enough that sums and
// products of a few of them cannot overflow 64 bits.
constexpr int64_t kMaxWindowValue = int64_t(1) << 30;
// Most kernel taps (TopK rounds, LRN window, ...) unrolled into lazy ops for
// one node; real models stay below ~1000.
constexpr int64_t kMaxUnrolledTaps = 4096;
// Most scalar steps a host-side op (DFT, STFT, Unique, RoiAlign...) may take.
constexpr int64_t kMaxHostWork = int64_t(1) << 28;
// Multiply-adds one MatMul/Gemm may take, per element of the model's limit.
constexpr double kFlopsPerElement = 1024;
// Lazy ops a value may stand away from computed data before the run
// computes it (long chains are slow to fuse and can overflow the stack).
constexpr int64_t kMaxLazyDepth = 128;
}  // namespace run_limits

// The dtype a tl::Tensor uses for an ONNX element type; throws OnnxUnsupported
// naming `op` for types tl cannot hold (strings, complex).
DType tl_dtype(int32_t elem, const std::string& op);
const char* elem_name(int32_t elem);
bool is_float_elem(int32_t elem);

// Values widened to double; `where` names the tensor's origin in errors.
// External data is read only when `model_dir` is given (not empty), and only
// from a regular file inside that folder. A model's initializers are held to
// `budget` when given: each file read is recorded in it, and the values are
// admitted before they are decoded.
class InitializerBudget;
Value value_from_proto(const onnx::TensorProto& t, const std::string& model_dir, const std::string& where,
                       InitializerBudget* budget = nullptr);

// The folder external data is read from: the model's own ("." for a bare file name).
std::string model_folder(const std::string& path);

// A model file read and parsed (onnx.cpp, the only parser), and its size.
struct ParsedModel {
  onnx::ModelProto model;
  uint64_t bytes = 0;
  // Every initializer, decoded in the file's order, when a reader before the
  // model decoded them all (open_onnx's statistics), and the model's and its
  // external files' bytes: OnnxModel then takes them instead of decoding again.
  std::vector<Value> initializers;
  uint64_t file_bytes = 0;
};
// Throws IOError for a file that is missing, over the load limit, or not an
// ONNX model.
ParsedModel parse_model(const std::string& path);
int64_t default_opset(const onnx::ModelProto& m);  // of the default domain
OnnxValueInfo value_info(const onnx::ValueInfoProto& v);

// The device tensor of a value, uploading host data on first use.
Tensor& device_tensor(Value& v, const std::string& device);

// Whether the op table (core/io/onnx/registry.h) runs this op at this opset.
bool op_supported(const std::string& domain, const std::string& op_type, int64_t opset);

// Runs one node. `inputs` has one entry per node input (present == false for
// ""); returns one value per node output. Throws ShapeError naming the node
// for inputs or attributes the op cannot take, and when an output (or a
// buffer the op builds on the way) would hold more than `max_elements`.
std::vector<Value> run_node(const onnx::NodeProto& node, std::vector<Value*>& inputs, int64_t opset,
                            const std::string& device, int64_t max_elements = INT64_MAX);

}  // namespace tl::onnx_detail
