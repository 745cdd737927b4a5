// The pickle reader on its own: every opcode sequence, with the result
// described the way error messages do.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/io/pickle.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlfuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tl::pickle::LoadResult r = tl::pickle::load(data, size, "fuzz.pkl");
    std::string text = tl::pickle::describe(*r.value);
    for (const auto& item : r.value->items) text += tl::pickle::describe(*item);
    for (const auto& [key, value] : r.value->entries) text += tl::pickle::describe(*key) + tl::pickle::describe(*value);
    (void)r.value->get("state_dict");
  } catch (const tl::IOError&) {
  }
  return 0;
}
