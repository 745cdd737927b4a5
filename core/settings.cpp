#include "core/settings.h"

#include <cstdlib>

namespace tl {

std::string settings_key() {
  std::string key;
  for (const char* name : {"TINYLENS_NOPOOLFUSION", "TINYLENS_NOREUSE", "TINYLENS_TUNE", "TINYLENS_GEMM",
                           "TINYLENS_REDUCE", "TINYLENS_CUDA_TILE"}) {
    const char* v = std::getenv(name);
    key += v ? v : "";
    key += '\0';
  }
  return key;
}

}  // namespace tl
