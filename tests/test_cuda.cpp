// The CUDA device (core/runtime/cuda.cpp). Everywhere: it is enumerated, and
// where no driver exists it says so. Where NVRTC exists (the toolkit, a build
// dependency of TL_WITH_CUDA): every kernel the op suite renders, spelled in
// the CUDA dialect, compiles with NVRTC. On a GPU: the op suite runs on
// cuda:0 against the golden data and the CPU device (skipped without one).
#include <QtTest/QtTest>
#include <dlfcn.h>

#include <set>

#include "core/codegen/render.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/schedule.h"
#include "tests/gemm_layouts.h"
#include "tests/golden.h"
#include "tests/op_table.h"
#include "tests/testing.h"

namespace {

const std::vector<tltest::GoldenCase>& golden_cases() {
  static const auto cases = tltest::read_golden(tltest::source_dir() + "/tests/data/golden/ops.bin");
  return cases;
}

tl::Device* cuda0() {
  for (auto& d : tl::Registry::instance().devices())
    if (d->name() == "cuda:0") return d.get();
  return nullptr;
}

bool have_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace

// cuda:0's dialect with the facts of an H200 (132 SMs, 48 KiB of shared
// memory per block, 1024 threads), for rendering only.
struct H200Shaped : tl::Device {
  explicit H200Shaped(tl::Device& real) : real_(real), info_(real.info()) {
    info_.compute_units = 132;
    info_.local_memory = 48 * 1024;
    info_.max_work_group = 1024;
  }
  const tl::DeviceInfo& info() const override { return info_; }
  std::shared_ptr<tl::Buffer> allocate(size_t) override { return nullptr; }
  void copy_in(tl::Buffer&, const void*, size_t) override {}
  void copy_out(const tl::Buffer&, void*, size_t) override {}
  const tl::Dialect& dialect() const override { return real_.dialect(); }
  tl::Built build(const std::string& n, const std::string& s) override { return real_.build(n, s); }
  std::shared_ptr<tl::Program> load(const std::string& n, const std::string& b) override { return real_.load(n, b); }
  tl::Device& real_;
  tl::DeviceInfo info_;
};

class TestCuda : public QObject {
  Q_OBJECT

 private slots:
  void enumeratedWithReason() {
    tl::Device* d = cuda0();
    QVERIFY2(d, "cuda:0 is not listed: the CUDA device did not register");
    QCOMPARE(d->dialect().name, std::string("cuda"));
    QCOMPARE(d->dialect().source_extension, std::string(".cu"));
    QCOMPARE(d->info().gemm_template, std::string("gemm.cu"));
    if (!have_driver()) {
      QVERIFY(!d->available());
      QCOMPARE(d->info().unavailable_reason, std::string("libcuda.so.1 not found: no NVIDIA driver"));
      // Asking to run on it names the reason.
      try {
        tl::Registry::instance().get_available("cuda:0");
        QFAIL("get_available accepted a device without a driver");
      } catch (const tl::DeviceError& e) {
        QVERIFY2(std::string(e.what()).find("no NVIDIA driver") != std::string::npos, e.what());
      }
    } else if (!d->available()) {
      QVERIFY2(!d->info().unavailable_reason.empty(), "unavailable without a reason");
    }
  }

  // Renders every op-suite kernel for the CUDA dialect (the graph comes from
  // running each case on the cpu, seen before it is scheduled) and compiles
  // it with NVRTC: no GPU needed.
  void nvrtcCompilesEveryRenderedKernel() {
    tl::Device* d = cuda0();
    QVERIFY(d);
    void* rtc = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (!rtc) rtc = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    TL_REQUIRE(rtc, "libnvrtc (the CUDA toolkit's NVRTC)");
    dlclose(rtc);
    std::map<std::string, std::string> sources;  // source -> name
    // Rendered twice: for this machine's cuda:0 (no GPU: every reduction
    // serial) and for an H200-shaped one, so that the work-group form of the
    // large reductions (__shared__, __syncthreads) is compiled as well.
    H200Shaped gpu(*d);
    size_t grouped = 0, gemms = 0, gathered = 0;
    for (auto& c : golden_cases()) {
      tl::RealizeObserver see([&](const std::vector<tl::NodeRef>& roots) {
        // Generic kernels only, then matmuls through kernels/gemm.cu, then
        // convolutions whose B it gathers from their images (as on cuda:0).
        // The cpu's products over one plane per channel (gather_only) are
        // not made for cuda:0, whose template does not compute them.
        for (int mode : {0, 1, 2})
          for (auto& plan : tl::schedule(roots, mode > 0, mode == 2)) {
            if (mode > 0 && plan.kind != tl::KernelPlan::Kind::Gemm) continue;
            if (mode == 2 && (plan.gemm().matmul->gather_only || plan.inputs[1] != plan.gemm().matmul->image)) continue;
            for (const tl::Device* target : {static_cast<const tl::Device*>(d), static_cast<const tl::Device*>(&gpu)}) {
              auto r = tl::render_kernel(plan, *target);
              const bool added = sources.emplace(r.source, r.name).second;
              if (added && r.source.find("__syncthreads") != std::string::npos) ++grouped;
              if (added && mode > 0) ++gemms;
              if (added && r.source.find("GATHER = true") != std::string::npos) ++gathered;
            }
          }
      });
      tlops::run_case(c, "cpu");
    }
    QVERIFY2(sources.size() > 100, std::to_string(sources.size()).c_str());
    QVERIFY2(grouped >= 10, ("work-group reductions rendered: " + std::to_string(grouped)).c_str());
    QVERIFY2(gemms >= 10, ("GEMM template kernels rendered: " + std::to_string(gemms)).c_str());
    QVERIFY2(gathered >= 4, ("convolutions rendered with a gathered B: " + std::to_string(gathered)).c_str());
    for (auto& [source, name] : sources) {
      QVERIFY2(source.find("__global__") != std::string::npos, source.c_str());
      try {
        tl::Built built = d->build(name, source);
        QVERIFY2(built.binary.size() > 100, name.c_str());
      } catch (const std::exception& e) {
        QFAIL((name + ": " + e.what() + "\n" + source).c_str());
      }
    }
    qInfo("%zu distinct kernels compiled with NVRTC, %zu of them GEMMs, %zu gathering", sources.size(), gemms, gathered);
  }

  void nvrtcErrorCarriesTheLog() {
    tl::Device* d = cuda0();
    QVERIFY(d);
    try {
      d->build("broken", "extern \"C\" __global__ void broken(float* b0) { b0[0] = undefined_name; }\n");
      QFAIL("a kernel with an undefined name compiled");
    } catch (const tl::CompileError& e) {
      QVERIFY2(e.log.find("undefined_name") != std::string::npos, e.log.c_str());
    } catch (const tl::DeviceError& e) {
      TL_REQUIRE(false, e.what());  // no NVRTC: a missing dependency, never a pass
    }
  }

  // The op suite on the GPU: golden data and the CPU device, as test_ops.
  void opSuiteOnGpu() {
    tl::Device* d = cuda0();
    QVERIFY(d);
    if (!d->available()) TL_SKIP_NO_HARDWARE(("cuda:0: " + d->info().unavailable_reason).c_str());
    int checked = 0;
    for (auto& c : golden_cases()) {
      tlops::Outcome got = tlops::run_case(c, "cuda:0");
      tlops::Outcome cpu = tlops::run_case(c, "cpu");
      QCOMPARE(got.values.size(), c.outputs.size());
      for (size_t k = 0; k < c.outputs.size(); ++k) {
        std::string why;
        QVERIFY2(tltest::all_close(got.values[k], c.outputs[k].data, c.rtol, c.atol, &why), (c.name + ": " + why).c_str());
        QVERIFY2(tltest::all_close(got.values[k], cpu.values[k], c.rtol, c.atol, &why), (c.name + " vs cpu: " + why).c_str());
        ++checked;
      }
    }
    qInfo("%d outputs checked on cuda:0", checked);
  }

  // kernels/gemm.cu over every load form, ragged edges, batches and a fused
  // epilogue (gemm_layouts.h), against the CPU device.
  void gemmTemplateMatchesTheCpu() {
    tl::Device* d = cuda0();
    QVERIFY(d);
    if (!d->available()) TL_SKIP_NO_HARDWARE(("cuda:0: " + d->info().unavailable_reason).c_str());
    for (auto& c : tlops::gemm_layouts()) {
      const std::string why = tlops::check_gemm_layout(c, "cuda:0");
      QVERIFY2(why.empty(), why.c_str());
    }
  }
};

QTEST_MAIN(TestCuda)
#include "test_cuda.moc"
