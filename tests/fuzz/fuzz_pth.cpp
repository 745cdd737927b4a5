// PyTorch checkpoints from bytes: zip (libzip) and legacy layouts, the
// pickle reader, storages and strided tensors. Anything but an IOError (or a
// clean load) is a bug.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/io/pth.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlfuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tl::StateDict sd = tl::load_pth_bytes(std::vector<uint8_t>(data, data + size), "fuzz.pth");
    size_t total = 0;
    for (const auto& [key, t] : sd) total += t.data.size() + key.size();
    (void)total;
  } catch (const tl::IOError&) {
  }
  return 0;
}
