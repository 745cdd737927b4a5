// safetensors from bytes: the 8-byte length, the JSON header, the offsets.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlfuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)tl::load_safetensors_bytes(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
  } catch (const tl::IOError&) {
  }
  return 0;
}
