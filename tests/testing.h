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

// Window tests. A run may take long: a cold one compiles ~100 kernels on a
// busy 2-core box. The event loop may stall at most kFreezeMs while the
// worker computes: work moved onto the GUI thread by mistake stalls it for
// seconds, while a scheduler hiccup on a loaded 2-core machine under the
// sanitizers stays well below a second. Speed itself is measured by
// benchmarks, not here.
constexpr qint64 kFreezeMs = 1000;
constexpr int kRunTimeoutMs = 15 * 60 * 1000;

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
