// Shared by the fuzz targets: the environment every run starts with.
#pragma once
#include <cstdlib>

#include "core/io/limits.h"

namespace tlfuzz {

// A lower absolute cap than the default 8 GiB keeps each execution within
// libFuzzer's -rss_limit_mb=2048 while still exercising the cap itself
// (images are bounded by it, not by their file size). Must run before the
// first load reads the limits.
inline void init_limits() {
  setenv("TINYLENS_MAX_LOAD_BYTES", "256M", 0);
  (void)tl::io::load_limits();
}

}  // namespace tlfuzz
