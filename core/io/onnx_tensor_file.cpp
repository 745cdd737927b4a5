// The serialized TensorProto files (.pb) of ONNX's conformance cases.
#include <limits>

#include "core/error.h"
#include "core/io/limits.h"
#include "core/io/onnx.h"
#include "core/io/onnx_ops.h"

namespace tl {

using onnx_detail::Value;

OnnxTensorData load_onnx_tensor(const std::string& pb_path) {
  std::string bytes = io::read_whole_file(pb_path, "ONNX tensor file");
  onnx::TensorProto t;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) || !t.ParseFromArray(bytes.data(), int(bytes.size())))
    throw IOError(pb_path + " is not a valid serialized ONNX TensorProto");
  Value v = onnx_detail::value_from_proto(t, onnx_detail::model_folder(pb_path), pb_path);
  OnnxTensorData d;
  d.name = t.name();
  d.shape = v.shape;
  d.elem_type = v.elem;
  d.values = std::move(v.data);
  return d;
}

Tensor onnx_tensor_to_tensor(const OnnxTensorData& t, const std::string& device) {
  Value v;
  v.elem = t.elem_type;
  v.shape = t.shape;
  v.host = true;
  v.data = t.values;
  return onnx_detail::device_tensor(v, device);
}

}  // namespace tl
