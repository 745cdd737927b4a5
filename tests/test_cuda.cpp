// The CUDA device (core/runtime/cuda.cpp). Everywhere: it is enumerated, and
// where no driver exists it says so. Where NVRTC exists (the toolkit, a build
// dependency of TL_WITH_CUDA): every kernel the op suite renders, spelled in
// the CUDA dialect, compiles with NVRTC. On a GPU: the op suite runs on
// cuda:0 against the golden data and the CPU device (skipped without one).
#include <QtTest/QtTest>
#include <dlfcn.h>

#include <array>
#include <set>

#include "core/codegen/render.h"
#include "core/codegen/templates.h"
#include "core/depthwise.h"
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

// The CUDA toolkit's NVRTC (a build dependency of TL_WITH_CUDA), or nullptr.
void* open_nvrtc() {
  void* rtc = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
  return rtc ? rtc : dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
}

bool have_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

}  // namespace

// cuda:0's dialect with the facts of an H200 (132 SMs, 48 KiB of shared
// memory per block, 1024 threads, TF32 mma.sync), for rendering only.
struct H200Shaped : tl::Device {
  explicit H200Shaped(tl::Device& real) : real_(real), info_(real.info()) {
    info_.compute_units = 132;
    info_.local_memory = 48 * 1024;
    info_.max_work_group = 1024;
    info_.extensions = {"mma_tf32"};
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
    void* rtc = open_nvrtc();
    TL_REQUIRE(rtc, "libnvrtc (the CUDA toolkit's NVRTC)");
    dlclose(rtc);
    std::map<std::string, std::string> sources;  // source -> name
    // Rendered twice: for this machine's cuda:0 (no GPU: every reduction
    // serial) and for an H200-shaped one, so that the work-group form of the
    // large reductions (__shared__, __syncthreads) is compiled as well.
    H200Shaped gpu(*d);
    size_t grouped = 0, gemms = 0, gathered = 0, depthwise = 0, pools = 0, shuffled = 0, tensor = 0;
    std::string halved;  // a reduction folding its group's results in halving steps: none in CUDA (warp shuffles)
    for (auto& c : golden_cases()) {
      tl::RealizeObserver see([&](const std::vector<tl::NodeRef>& roots) {
        // Generic kernels only, then matmuls through kernels/gemm.cu, then
        // convolutions whose B it gathers from their images (as on cuda:0),
        // and products over one plane per channel (gather_only: depthwise
        // convolutions and max pools, kernels/depthwise.cu).
        for (int mode : {0, 1, 2})
          for (auto& plan : tl::schedule(roots, mode > 0, mode == 2)) {
            if (mode > 0 && plan.kind != tl::KernelPlan::Kind::Gemm) continue;
            if (mode == 2 && plan.inputs[1] != plan.gemm().matmul->image) continue;
            for (const tl::Device* target : {static_cast<const tl::Device*>(d), static_cast<const tl::Device*>(&gpu)}) {
              auto r = tl::render_kernel(plan, *target);
              const bool added = sources.emplace(r.source, r.name).second;
              if (added && r.source.find("__syncthreads") != std::string::npos) ++grouped;
              if (added && r.source.find("__shfl_xor_sync") != std::string::npos) ++shuffled;
              if (added && mode == 0 && r.source.find("part[lid + ") != std::string::npos) halved = r.source;
              if (added && mode > 0) ++gemms;
              if (added && r.source.find("GATHER = true") != std::string::npos) ++gathered;
              if (added && r.source.find("TENSOR = true") != std::string::npos) ++tensor;
              if (added && r.source.find("MAX = false") != std::string::npos) ++depthwise;
              if (added && r.source.find("MAX = true") != std::string::npos) ++pools;
            }
          }
      });
      tlops::run_case(c, "cpu");
    }
    // The op suite's convolutions are Tensor::conv2d's; the ONNX loader's
    // depthwise convolutions and max pools (core/depthwise.h) make the
    // products over planes: a 7x7 window with bias and ReLU6, 3x3 and 5x5 at
    // stride 2, a dilated one, and max pools.
    {
      tl::RealizeObserver see([&](const std::vector<tl::NodeRef>& roots) {
        for (auto& plan : tl::schedule(roots, true, true)) {
          if (plan.kind != tl::KernelPlan::Kind::Gemm || !plan.gemm().matmul->gather_only) continue;
          for (const tl::Device* target : {static_cast<const tl::Device*>(d), static_cast<const tl::Device*>(&gpu)}) {
            auto r = tl::render_kernel(plan, *target);
            for (auto& c : r.candidates) sources.emplace(c.source, r.name);  // the tuner's other blocks
            if (!sources.emplace(r.source, r.name).second) continue;
            if (r.source.find("MAX = false") != std::string::npos) ++depthwise;
            if (r.source.find("MAX = true") != std::string::npos) ++pools;
          }
        }
      });
      tl::Generator gen(3);
      for (auto [k, s, dil, size] : {std::array<int, 4>{7, 1, 1, 14}, {3, 2, 1, 15}, {5, 2, 1, 9}, {3, 1, 2, 10}}) {
        tl::Window2d g;
        g.kernel_h = g.kernel_w = k, g.stride_h = g.stride_w = s, g.dilation_h = g.dilation_w = dil;
        g.pad_h = g.pad_w = {k / 2 * dil, k / 2 * dil};
        tl::Tensor x = tl::Tensor::randn({2, 4, size, size}, gen, "cpu");
        tl::Tensor w = tl::Tensor::randn({k * k, 4}, gen, "cpu"), b = tl::Tensor::randn({4}, gen, "cpu");
        tl::depthwise_conv2d(x, w, b, g).relu6().realize();
        if (dil == 1) tl::max_pool_by_gather(x, g).realize();
      }
      // Two images of 4 channels reading the 4 channels' weights in place
      // (MatmulHint::a_period, as cuda:0's hints do); a product of more than
      // one row cannot.
      tl::GemmShape s;
      s.batch = 8, s.m = 1, s.n = 36, s.k = 9, s.a_period = 4;
      s.a_strides[0] = 1, s.a_strides[2] = 4;
      s.gather.channels = 1, s.gather.height = s.gather.width = 6, s.gather.kernel_h = s.gather.kernel_w = 3;
      s.gather.pad_top = s.gather.pad_left = 1, s.gather.out_w = 6;
      tl::TemplateKernel t;
      QVERIFY(tl::render_gemm(*d, s, "GEMM_8_1_36_9", t));
      QVERIFY2(t.source.find("A_PERIOD = 4;") != std::string::npos, t.source.c_str());
      sources.emplace(t.source, "GEMM_8_1_36_9");
      QVERIFY2(t.candidates.size() >= 2, std::to_string(t.candidates.size()).c_str());
      // Forced blocks (TINYLENS_CUDA_PLANES), and ones that cannot be.
      qputenv("TINYLENS_CUDA_PLANES", "8x4x2");
      QVERIFY(tl::render_gemm(*d, s, "GEMM_8_1_36_9", t));
      QCOMPARE(t.label, std::string("planes=8x4x2"));
      QVERIFY(t.candidates.empty());
      qputenv("TINYLENS_CUDA_PLANES", "r4t64");  // the shape's rule with R = 4, 64 threads: 8 columns, 2 x 4 rows
      QVERIFY(tl::render_gemm(*d, s, "GEMM_8_1_36_9", t));
      QCOMPARE(t.label, std::string("planes=8x2x4"));
      qputenv("TINYLENS_CUDA_PLANES", "64x32x1");
      QVERIFY_THROWS_EXCEPTION(std::invalid_argument, tl::render_gemm(*d, s, "GEMM_8_1_36_9", t));
      qunsetenv("TINYLENS_CUDA_PLANES");
      s.m = 2;
      QVERIFY_THROWS_EXCEPTION(std::logic_error, tl::render_gemm(*d, s, "GEMM_8_2_36_9", t));
    }
    QVERIFY2(sources.size() > 100, std::to_string(sources.size()).c_str());
    QVERIFY2(grouped >= 10, ("work-group reductions rendered: " + std::to_string(grouped)).c_str());
    QVERIFY2(shuffled >= 10, ("reductions folding by warp shuffles: " + std::to_string(shuffled)).c_str());
    QVERIFY2(halved.empty(), halved.c_str());
    QVERIFY2(gemms >= 10, ("GEMM template kernels rendered: " + std::to_string(gemms)).c_str());
    QVERIFY2(gathered >= 4, ("convolutions rendered with a gathered B: " + std::to_string(gathered)).c_str());
    // Each GEMM is rendered for this machine's cuda:0 (no tensor cores) and
    // for the H200-shaped GPU, which takes the tensor form: half of them.
    QVERIFY2(2 * tensor >= gemms - 1, ("tensor-core GEMMs rendered: " + std::to_string(tensor) + " of " +
                                      std::to_string(gemms)).c_str());
    QVERIFY2(depthwise >= 2, ("depthwise convolutions rendered: " + std::to_string(depthwise)).c_str());
    QVERIFY2(pools >= 2, ("max pools rendered: " + std::to_string(pools)).c_str());
    for (auto& [source, name] : sources) {
      QVERIFY2(source.find("__global__") != std::string::npos, source.c_str());
      try {
        tl::Built built = d->build(name, source);
        QVERIFY2(built.binary.size() > 100, name.c_str());
      } catch (const std::exception& e) {
        QFAIL((name + ": " + e.what() + "\n" + source).c_str());
      }
    }
    qInfo("%zu distinct kernels compiled with NVRTC, %zu of them GEMMs, %zu gathering, %zu depthwise, %zu max pools",
          sources.size(), gemms, gathered, depthwise, pools);
  }

  // The tensor-core form (kernels/gemm.cu's TENSOR) of every tile, plain
  // and gathered, compiles with NVRTC to an sm_90 binary, without a
  // warning: ptxas then checks its mma.sync and cvt instructions, which PTX
  // for this machine's cuda:0 (no GPU: compute_75) would only carry as text.
  void tensorFormCompilesForSm90() {
    tl::Device* d = cuda0();
    QVERIFY(d);
    void* rtc = open_nvrtc();
    TL_REQUIRE(rtc, "libnvrtc (the CUDA toolkit's NVRTC)");
    using Create = int (*)(void**, const char*, const char*, int, const char* const*, const char* const*);
    using Compile = int (*)(void*, int, const char* const*);
    using Size = int (*)(void*, size_t*);
    using Log = int (*)(void*, char*);
    using Destroy = int (*)(void**);
    auto create = reinterpret_cast<Create>(dlsym(rtc, "nvrtcCreateProgram"));
    auto compile = reinterpret_cast<Compile>(dlsym(rtc, "nvrtcCompileProgram"));
    auto cubin_size = reinterpret_cast<Size>(dlsym(rtc, "nvrtcGetCUBINSize"));
    auto log_size = reinterpret_cast<Size>(dlsym(rtc, "nvrtcGetProgramLogSize"));
    auto log = reinterpret_cast<Log>(dlsym(rtc, "nvrtcGetProgramLog"));
    auto destroy = reinterpret_cast<Destroy>(dlsym(rtc, "nvrtcDestroyProgram"));
    QVERIFY(create && compile && cubin_size && log_size && log && destroy);
    H200Shaped gpu(*d);
    std::vector<std::string> sources;
    for (bool gathered : {false, true}) {
      tl::GemmShape s;  // 256 x 256 x 288: every tile of the table fits
      s.m = 256, s.n = 256, s.k = 288;
      s.a_strides[1] = 288, s.a_strides[2] = 1, s.b_strides[1] = 256, s.b_strides[2] = 1;
      if (gathered) {  // a 3x3 convolution of 32 channels at 16x16
        s.gather.channels = 32, s.gather.height = s.gather.width = 16;
        s.gather.kernel_h = s.gather.kernel_w = 3, s.gather.pad_top = s.gather.pad_left = 1, s.gather.out_w = 16;
      }
      tl::TemplateKernel t;
      QVERIFY(tl::render_gemm(gpu, s, "GEMM_1_256_256_288", t));
      sources.push_back(t.source);
      for (auto& c : t.candidates) sources.push_back(c.source);  // the other tiles
    }
    QCOMPARE(sources.size(), size_t(10));
    for (const std::string& source : sources) {
      QVERIFY2(source.find("TENSOR = true") != std::string::npos, source.c_str());
      void* prog = nullptr;
      QCOMPARE(create(&prog, source.c_str(), "gemm.cu", 0, nullptr, nullptr), 0);
      const char* options[] = {"--gpu-architecture=sm_90", "--fmad=false"};
      const int result = compile(prog, 2, options);
      size_t size = 0;
      std::string text;
      if (log_size(prog, &size) == 0 && size > 1) text.resize(size), log(prog, text.data());
      size_t binary = 0;
      cubin_size(prog, &binary);
      destroy(&prog);
      QVERIFY2(result == 0 && binary > 1000, (text + "\n" + source).c_str());
      QVERIFY2(text.find("warning") == std::string::npos, text.c_str());  // the window shows the build log
    }
    dlclose(rtc);
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
