// safetensors: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__"?},
// then the tensor bytes. Everything in the header is checked against the
// file before any tensor is converted.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/host_tensor.h"

namespace tl {

// Throws tl::IOError naming the file and, where one is involved, the tensor
// key (bad dtype, shape product * element size != byte length, offsets
// outside the data, overlapping or non-contiguous, ...).
StateDict load_safetensors(const std::string& path);
// The same from bytes in memory; `name` stands in for the file name in errors.
StateDict load_safetensors_bytes(const std::vector<uint8_t>& bytes, const std::string& name);

// Writes every tensor as F32 (whatever its dtype field says), keys in sorted
// order, through a temporary file renamed into place. Throws tl::IOError when
// a tensor's data size does not match its shape or the file cannot be written.
void save_safetensors(const std::string& path, const StateDict& tensors);

}  // namespace tl
