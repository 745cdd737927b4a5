// Tensors as the loaders hand them over: plain host memory, no device, no
// graph. The loaders stay independent of tl::Tensor so they can be tested,
// fuzzed and reused on their own; turning a HostTensor into a Tensor is one
// Tensor::from_data call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tl {

struct HostTensor {
  Shape shape;
  // The element type as stored in the file, spelled like safetensors does:
  // "F64" "F32" "F16" "BF16" "I64" "I32" "I16" "I8" "U8" "BOOL".
  std::string dtype;
  // Row-major values converted to float. Integers beyond 2^24 lose precision;
  // that is acceptable for weights, step counters and BN's num_batches_tracked.
  std::vector<float> data;
};

using StateDict = std::map<std::string, HostTensor>;

// Compares a loaded state dict with the keys and shapes a model expects and
// throws one IOError that lists every missing key, every unexpected key and
// every shape mismatch by name ("conv.weight: file has (8, 3), model expects
// (8, 4)"), so a user sees all problems of a checkpoint at once.
void check_state_dict(const StateDict& got, const std::map<std::string, Shape>& expected);

// Bytes per element of a stored dtype name above; 0 when the name is unknown.
size_t host_dtype_size(const std::string& dtype);

// Converts `count` little-endian elements of `dtype` at `src` to float. The
// source needs no alignment.
void host_to_float(const uint8_t* src, size_t count, const std::string& dtype, float* dst);

// "(2, 3, 4)"; local to the loaders so they do not need the tensor library.
std::string host_shape_str(const Shape& shape);

}  // namespace tl
