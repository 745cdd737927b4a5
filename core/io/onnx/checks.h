// Load-time checks of what an ONNX file declares, before anything is built
// from it: the shapes it promises and the names and opsets its graph uses.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace tl::onnx_detail {

// Declared shapes (graph inputs, outputs, value_info) are only hints to the
// runtime, but callers size things by them (a classifier's label list, the
// window's shape inference): a dimension beyond what the files could feed is
// refused (IOError naming the value).
void check_declared_shapes(const onnx::ModelProto& m, const std::string& path, uint64_t file_bytes);

// What a reader cannot guess is refused (IOError): which opset the
// default-domain nodes follow (none declared, or one no ONNX release has),
// and which node makes a value that two nodes claim to write.
void check_graph_names(const onnx::ModelProto& m, const std::string& path);

}  // namespace tl::onnx_detail
