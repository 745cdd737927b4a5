// Helpers shared by the Qt Test suites.
#pragma once
#include <QtTest/QtTest>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "compare.h"

namespace tltest {

inline std::string source_dir() { return TL_SOURCE_DIR; }

// Names of every device that can run kernels (cpu, each OpenCL device, ...).
// TINYLENS_TEST_DEVICES="cpu,opencl:0:0" narrows the list.
inline std::vector<std::string> available_devices() {
  std::vector<std::string> out;
  const char* only = std::getenv("TINYLENS_TEST_DEVICES");
  for (auto& d : tl::Registry::instance().devices()) {
    if (!d->available()) continue;
    if (only && std::string(",") .append(only).append(",").find("," + d->name() + ",") == std::string::npos) continue;
    out.push_back(d->name());
  }
  return out;
}

}  // namespace tltest
