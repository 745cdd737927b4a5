// Helpers shared by the Qt Test suites.
#pragma once
#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/models/classifier.h"
#include "core/profile.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "tests/compare.h"

namespace tltest {

// Whether a kernel computes `op` among its fused ops (KernelInfo::ops: "POW", "ADD").
inline bool fuses(const tl::KernelInfo& kernel, const std::string& op) {
  return std::find(kernel.ops.begin(), kernel.ops.end(), op) != kernel.ops.end();
}
inline bool any_kernel_fuses(const std::vector<tl::ProfileRecord>& records, const std::string& op) {
  return std::any_of(records.begin(), records.end(),
                     [&](const tl::ProfileRecord& r) { return fuses(*r.kernel, op); });
}

// Skips. A test that cannot run because something it needs is missing (a
// library left out at configure time, a file scripts/setup downloads, a device
// scripts/setup installs) must never pass quietly: scripts/test, and so CI,
// sets TINYLENS_STRICT=1, which turns TL_REQUIRE's skip into a failure. Only
// what a machine truly cannot have (a GPU) is skipped in strict mode too,
// through TL_SKIP_NO_HARDWARE, and scripts/test lists every skip at its end.
inline bool strict() { return qEnvironmentVariableIntValue("TINYLENS_STRICT") != 0; }

}  // namespace tltest

#define TL_REQUIRE(condition, what)                                                            \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      const QByteArray tl_what_ = QByteArray("missing dependency: ") + QByteArray(what);       \
      if (tltest::strict()) QFAIL(tl_what_.constData());                                       \
      QSKIP(tl_what_.constData());                                                             \
    }                                                                                          \
  } while (0)

#define TL_SKIP_NO_HARDWARE(what) QSKIP(QByteArray(QByteArray("no such hardware here: ") + QByteArray(what)).constData())

namespace tltest {

inline std::string source_dir() { return TL_SOURCE_DIR; }

// n standard-normal floats from a fixed seed (test inputs and weights).
inline std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& e : v) e = d(gen);
  return v;
}

// The sample photo the window suites classify (Debian's opencv-doc).
inline const char* const kSquirrel = "/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg";

// Whether scripts/setup has downloaded EfficientNet-Lite0's weights.
inline bool weights_installed() {
  std::error_code ec;
  return std::filesystem::exists(tl::models_directory() + "/efficientnet-lite0-57934424.pth", ec);
}

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

// Fresh, empty directories under one temporary directory (kernel caches of
// their own, as a new process on a new machine would have them).
class ScratchDirs {
 public:
  bool isValid() const { return root_.isValid(); }
  QString fresh() {
    const QString dir = root_.path() + "/cache" + QString::number(count_++);
    QDir().mkpath(dir);
    return dir;
  }

 private:
  QTemporaryDir root_;
  int count_ = 0;
};

}  // namespace tltest
