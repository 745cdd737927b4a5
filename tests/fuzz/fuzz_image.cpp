// Images from bytes through our checks and stb_image (JPEG, PNG, BMP, GIF,
// TGA, PNM); a decoded image goes through the resize the window uses.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/io/image.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlfuzz::init_limits();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tl::Image img = tl::decode_image(std::vector<uint8_t>(data, data + size), "fuzz.img");
    if (img.rgb.size() != size_t(img.width) * size_t(img.height) * 3) __builtin_trap();
    if (size_t(img.width) * size_t(img.height) <= 4096) (void)tl::resize(img, 7, 5);
  } catch (const tl::IOError&) {
  }
  return 0;
}
