// The table of ONNX ops: every op tinylens runs is registered here once, with
// its handler, the opsets it covers, the element types it accepts and where
// it computes. op_supported (the window's unsupported-node marks, inspect)
// and the conformance report read this table; nothing else lists op names.
//
// Adding an op:
//   1. write its handler in the family file it belongs to (core/io/onnx/):
//        math.cpp       elementwise and math        nn.cpp      conv, pools, norms, losses
//        nn_layers.cpp  recurrent, resampling, quantized layers
//        shape.cpp      shape and indexing          sequence.cpp  sequences (host)
//        signal.cpp     signal and host-only ops
//      A handler is `Value f(const Ctx&)` (one output) or
//      `std::vector<Value> f(const Ctx&)` (several); Ctx (context.h) reads the
//      node's inputs and attributes and bounds what it may build.
//   2. add one line to that file's table (its `*_ops()` function):
//        {"Name", since_opset, types::kFloat, Placement::Device, handler}
//      with an optional last argument, the last opset whose semantics the
//      handler implements (default: every later one).
// run_node checks the opset range and the element type of the first input
// before the handler runs, and refuses outputs the handler does not produce.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/io/onnx/context.h"

namespace tl::onnx_detail {

// Where an op computes. Device ops build lazy tensor ops (small host values,
// such as shape arithmetic, may be folded on the host on the way); host ops
// read their inputs back and compute on the CPU in double precision.
enum class Placement { Device, Host };
const char* placement_name(Placement p);  // "device", "host"

// Sets of ONNX element types, as bit masks over onnx::TensorProto::DataType.
namespace types {
constexpr uint32_t bit(int e) { return uint32_t(1) << e; }
constexpr uint32_t kFloat = bit(onnx::TensorProto::FLOAT) | bit(onnx::TensorProto::DOUBLE) |
                            bit(onnx::TensorProto::FLOAT16) | bit(onnx::TensorProto::BFLOAT16);
constexpr uint32_t kSigned = bit(onnx::TensorProto::INT8) | bit(onnx::TensorProto::INT16) |
                             bit(onnx::TensorProto::INT32) | bit(onnx::TensorProto::INT64);
constexpr uint32_t kUnsigned = bit(onnx::TensorProto::UINT8) | bit(onnx::TensorProto::UINT16) |
                               bit(onnx::TensorProto::UINT32) | bit(onnx::TensorProto::UINT64);
constexpr uint32_t kInt = kSigned | kUnsigned;
constexpr uint32_t kBool = bit(onnx::TensorProto::BOOL);
constexpr uint32_t kNumeric = kFloat | kInt;
constexpr uint32_t kAll = kNumeric | kBool;  // every type a tl::Tensor holds
}  // namespace types

constexpr int64_t kEveryOpset = INT64_MAX;

struct OpDef {
  using One = Value (*)(const Ctx&);
  using Many = std::vector<Value> (*)(const Ctx&);
  OpDef(const char* name, int64_t since, uint32_t types, Placement where, One one, int64_t until = kEveryOpset)
      : name(name), since(since), until(until), types(types), where(where), one(one) {}
  OpDef(const char* name, int64_t since, uint32_t types, Placement where, Many many, int64_t until = kEveryOpset)
      : name(name), since(since), until(until), types(types), where(where), many(many) {}

  std::string name;  // op_type in the default domain (ai.onnx)
  int64_t since, until;  // the opsets covered, inclusive
  uint32_t types;        // accepted element types of the first input (types::...)
  Placement where;
  One one = nullptr;     // exactly one of these is set
  Many many = nullptr;
  bool sequence_io = false;  // takes or makes sequences (other ops refuse them)

  std::vector<Value> run(const Ctx& c) const { return many ? many(c) : std::vector<Value>{one(c)}; }
};

// Each family file's part of the table.
std::vector<OpDef> math_ops();
std::vector<OpDef> nn_ops();
std::vector<OpDef> nn_layer_ops();
std::vector<OpDef> shape_ops();
std::vector<OpDef> sequence_ops();
std::vector<OpDef> signal_ops();

// The whole table, sorted by name; built once. Registering a name twice is a
// programming error, reported by std::logic_error on first use.
const std::vector<OpDef>& op_table();
// The entry for op_type in `domain` ("" and "ai.onnx" are the default
// domain), or nullptr.
const OpDef* find_op(const std::string& domain, const std::string& op_type);
// Why a node of this op (at this opset) cannot run: "" when it can, else
// "no handler" or "covers opsets 11 to 12".
std::string op_unsupported_reason(const std::string& domain, const std::string& op_type, int64_t opset);
// "float types, integers" and the like, for reports.
std::string types_text(uint32_t types);

// Runs `f` (a node's handler); an error it throws is given again with the
// model file, the node's index, name and op in front:
// "m.onnx: ONNX node #3 'conv1' (Conv): ...". Core errors ("matmul: shapes
// (1, 3) and (5, 5) are incompatible") then say where they come from.
std::vector<Value> in_node(const std::string& path, int index, const onnx::NodeProto& n,
                           const std::function<std::vector<Value>()>& f);

}  // namespace tl::onnx_detail
