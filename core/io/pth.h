// PyTorch checkpoints (torch.save of a state dict), both layouts:
//  - zip (torch >= 1.6): <root>/data.pkl plus one record <root>/data/<key>
//    per storage, read with libzip;
//  - legacy (torch.save(..., _use_new_zipfile_serialization=False)): five
//    pickles back to back (magic number, protocol version, sys_info, the
//    object, the storage keys) followed by the raw storages.
// The pickles go through core/io/pickle.h, which never runs code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/host_tensor.h"

namespace tl {

// Loads every tensor of a state dict. A checkpoint that wraps its weights as
// {"state_dict": {...}, ...} or {"model": {...}, ...} is unwrapped; other
// non-tensor entries are ignored. Non-contiguous tensors are gathered into
// row-major order. Throws tl::IOError naming the file (and the tensor key
// where one is involved) for anything malformed, truncated or refused.
StateDict load_pth(const std::string& path);

// The same from bytes already in memory (fuzzing, embedded resources);
// `name` stands in for the file name in error messages.
StateDict load_pth_bytes(const std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace tl
