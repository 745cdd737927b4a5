// The OpenCL device on every platform the ICD loader lists (PoCL here):
// enumeration facts, build logs, compile errors, the binary cache, the GEMM
// template against a double-precision CPU loop, a generic kernel in the
// dialect's form, and the work-group form of large reductions. Skips when no
// OpenCL device exists.
#include <QtTest/QtTest>

#include "tests/testing.h"
#include "tests/compare.h"
#include "tests/gemm_layouts.h"
#include "tests/golden.h"
#include "tests/op_table.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "core/codegen/render.h"
#include "core/codegen/templates.h"
#include "core/profile.h"
#include "core/schedule.h"
#include "core/tensor.h"
#include "core/runtime/registry.h"

#ifdef TL_HAVE_OPENCL
#include "core/runtime/cache.h"
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include "core/runtime/cuda_dialect.h"
#include "core/runtime/opencl.h"
#endif

using namespace tl;

namespace {

#ifdef TL_HAVE_OPENCL
// A dialect-form elementwise kernel: c[gid] = a[gid] + b[gid] for gid < n.
std::string add_kernel(const Dialect& d, const std::string& name, long n) {
  std::string open = d.parallel_open;
  open.replace(open.find("{n}"), 3, std::to_string(n));
  const std::string q = d.global_qualifier;
  return d.preamble + d.kernel_prefix + " " + name + "(" + q + "float* " + d.restrict_kw + " c, " + q + "const float* " +
         d.restrict_kw + " a, " + q + "const float* " + d.restrict_kw + " b) {\n  " + open +
         "\n    c[gid] = a[gid] + b[gid];\n  " + d.parallel_close + "\n}\n";
}

// Runs the add kernel on n elements; returns false with a reason on a wrong value.
bool run_add(Device& dev, Program& program, long n, double* seconds, QString* why) {
  const float guard = -12345.0f;
  std::vector<float> a(n), b(n), c(n + 16, guard);
  for (long i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 3.0f - i;
  }
  auto bc = dev.allocate((n + 16) * sizeof(float)), ba = dev.allocate(n * sizeof(float)),
       bb = dev.allocate(n * sizeof(float));
  dev.copy_in(*bc, c.data(), c.size() * sizeof(float));
  dev.copy_in(*ba, a.data(), n * sizeof(float));
  dev.copy_in(*bb, b.data(), n * sizeof(float));
  LaunchArgs args;
  args.buffers = {bc.get(), ba.get(), bb.get()};
  args.global[0] = n;
  double t = program.launch(args);
  if (seconds) *seconds = t;
  dev.copy_out(*bc, c.data(), c.size() * sizeof(float));
  for (long i = 0; i < n; ++i)
    if (c[i] != a[i] + b[i]) {
      *why = QString("c[%1] = %2, expected %3").arg(i).arg(c[i]).arg(a[i] + b[i]);
      return false;
    }
  for (long i = n; i < n + 16; ++i)
    if (c[i] != guard) {
      *why = QString("write past the end at %1").arg(i);
      return false;
    }
  return true;
}

std::pair<int, int> indices_of(const Device& d) {
  int p = -1, i = -1;
  std::sscanf(d.name().c_str(), "opencl:%d:%d", &p, &i);
  return {p, i};
}

#ifdef TL_HAVE_OPENCL
// The driver's own handle for platform p, device n, asked of the ICD loader
// here rather than through the core, so the facts the core reports can be
// checked against an independent query.
cl_device_id raw_device(int p, int n) {
  cl_uint count = 0;
  if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS || p >= int(count)) return nullptr;
  std::vector<cl_platform_id> platforms(count);
  clGetPlatformIDs(count, platforms.data(), nullptr);
  if (clGetDeviceIDs(platforms[size_t(p)], CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || n >= int(count))
    return nullptr;
  std::vector<cl_device_id> devices(count);
  clGetDeviceIDs(platforms[size_t(p)], CL_DEVICE_TYPE_ALL, count, devices.data(), nullptr);
  return devices[size_t(n)];
}

template <class T>
T raw_value(cl_device_id d, cl_device_info what, cl_int* status = nullptr) {
  T v{};
  cl_int err = clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  if (status) *status = err;
  return v;
}

std::string raw_string(cl_device_id d, cl_device_info what) {
  size_t size = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &size);
  std::string s(size, '\0');
  clGetDeviceInfo(d, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}
#endif

GemmShape contiguous(int64_t batch, int64_t m, int64_t n, int64_t k) {
  GemmShape s;
  s.batch = batch;
  s.m = m;
  s.n = n;
  s.k = k;
  s.a_strides[0] = m * k;
  s.a_strides[1] = k;
  s.a_strides[2] = 1;
  s.b_strides[0] = k * n;
  s.b_strides[1] = n;
  s.b_strides[2] = 1;
  return s;
}

// One element past the largest index a strided operand reaches.
int64_t extent(int64_t b, int64_t r, int64_t c, const int64_t* st) {
  if (b == 0 || r == 0 || c == 0) return 1;
  return (b - 1) * st[0] + (r - 1) * st[1] + (c - 1) * st[2] + 1;
}

struct GemmRun {
  std::vector<float> c, a, b;
  double seconds = 0;
  bool guard_intact = true;
};

// vector_width > 0 renders as if the device reported that preferred float
// width: a CPU device then runs the register tile of another instruction set
// (4: SSE/NEON, 8: AVX2, 16: AVX-512), which must be as correct here.
GemmRun run_gemm(Device& dev, const GemmShape& s, const std::string& name, bool random = true, int vector_width = 0) {
  GemmRun r;
  r.a.resize(extent(s.batch, s.m, s.k, s.a_strides));
  r.b.resize(extent(s.batch, s.k, s.n, s.b_strides));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : r.a) x = random ? u(rng) : 0.5f;
  for (auto& x : r.b) x = random ? u(rng) : 0.25f;
  const size_t count = s.batch * s.m * s.n, guard = 64;
  std::vector<float> c(count + guard, 777.0f);
  DeviceInfo info = dev.info();
  if (vector_width > 0) info.preferred_vector_width = vector_width;
  TemplateKernel tk = render_gemm_opencl(s, name, info, dev.dialect());
  auto program = dev.compile(tk.entry.empty() ? name : tk.entry, tk.source);
  auto bc = dev.allocate(c.size() * sizeof(float)), ba = dev.allocate(r.a.size() * sizeof(float)),
       bb = dev.allocate(r.b.size() * sizeof(float));
  dev.copy_in(*bc, c.data(), c.size() * sizeof(float));
  dev.copy_in(*ba, r.a.data(), r.a.size() * sizeof(float));
  dev.copy_in(*bb, r.b.data(), r.b.size() * sizeof(float));
  LaunchArgs args;
  args.buffers = {bc.get(), ba.get(), bb.get()};
  args.ints = tk.ints, args.int_bytes = tk.int_bytes;
  for (int d = 0; d < 3; ++d) {
    args.global[d] = tk.global[d];
    args.local[d] = tk.local[d];
  }
  r.seconds = program->launch(args);
  dev.copy_out(*bc, c.data(), c.size() * sizeof(float));
  for (size_t i = count; i < c.size(); ++i) r.guard_intact &= c[i] == 777.0f;
  c.resize(count);
  r.c = std::move(c);
  return r;
}

std::vector<float> reference_gemm(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(s.batch * s.m * s.n);
  for (int64_t p = 0; p < s.batch; ++p)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < s.k; ++k)
          acc += double(a[p * s.a_strides[0] + i * s.a_strides[1] + k * s.a_strides[2]]) *
                 b[p * s.b_strides[0] + k * s.b_strides[1] + j * s.b_strides[2]];
        c[(p * s.m + i) * s.n + j] = float(acc);
      }
  return c;
}
#endif

}  // namespace

class TestOpenCL : public QObject {
  Q_OBJECT

#ifdef TL_HAVE_OPENCL
  QTemporaryDir cache_home_;
  std::vector<std::shared_ptr<Device>> devices_;
#endif

 private slots:
  void initTestCase() {
#ifndef TL_HAVE_OPENCL
    TL_REQUIRE(false, "built without OpenCL");
#else
    QVERIFY(cache_home_.isValid());
    // Before anything reads it: the kernel cache (and PoCL's own) go here.
    qputenv("XDG_CACHE_HOME", cache_home_.path().toUtf8());
    // Enumerating (PoCL's first device detection, in this process) adds no
    // variable to the environment: an addition may move the environment's
    // array under a getenv on another thread (the window enumerates on a
    // worker). PoCL's HWLOC_PLUGINS_PATH is there before main (opencl.cpp).
    const QStringList before = QProcessEnvironment::systemEnvironment().keys();
    for (auto& d : enumerate_opencl_devices())
      if (d->available()) devices_.push_back(d);
    QStringList added;
    for (const QString& key : QProcessEnvironment::systemEnvironment().keys())
      if (!before.contains(key)) added << key;
    QVERIFY2(added.isEmpty(), qPrintable("enumerating the OpenCL devices added " + added.join(", ")));
    QVERIFY(qEnvironmentVariableIsSet("HWLOC_PLUGINS_PATH"));
    TL_REQUIRE(!devices_.empty(), "no available OpenCL device");
    for (auto& d : devices_) qInfo("testing %s: %s", d->name().c_str(), d->info().description.c_str());
#endif
  }

#ifdef TL_HAVE_OPENCL
  void errorNames() {
    QCOMPARE(cl_error_name(-5), std::string("CL_OUT_OF_RESOURCES"));
    QCOMPARE(cl_error_name(-4), std::string("CL_MEM_OBJECT_ALLOCATION_FAILURE"));
    QCOMPARE(cl_error_name(-52), std::string("CL_INVALID_KERNEL_ARGS"));
    QCOMPARE(cl_error_name(-11), std::string("CL_BUILD_PROGRAM_FAILURE"));
    QCOMPARE(cl_error_name(-1001), std::string("CL_PLATFORM_NOT_FOUND_KHR"));
    QCOMPARE(cl_error_name(-4242), std::string("CL_ERROR(-4242)"));
  }

  void enumerationFacts() {
    for (auto& d : devices_) {
      const DeviceInfo& i = d->info();
      auto [p, n] = indices_of(*d);
      QVERIFY2(p >= 0 && n >= 0, i.name.c_str());
      QVERIFY(!i.description.empty());
      QVERIFY(!i.vendor.empty());
      QVERIFY(!i.platform.empty());
      QVERIFY(!i.driver_version.empty());
      QVERIFY2(i.language_version.rfind("OpenCL C ", 0) == 0, i.language_version.c_str());
      QVERIFY(i.kind == "CPU" || i.kind == "GPU" || i.kind == "Accelerator");
      QVERIFY(i.compute_units >= 1);
      cl_device_id raw = raw_device(p, n);
      QVERIFY2(raw, i.name.c_str());
      QCOMPARE(uint64_t(i.clock_mhz), uint64_t(raw_value<cl_uint>(raw, CL_DEVICE_MAX_CLOCK_FREQUENCY)));
      QCOMPARE(i.description, raw_string(raw, CL_DEVICE_NAME));
      QVERIFY(i.global_memory >= (uint64_t{64} << 20));
      QVERIFY(i.local_memory >= 1024);
      QVERIFY(i.max_work_group >= 1);
      QVERIFY(!i.extensions.empty());
      // The extension list is the driver's, word for word.
      std::istringstream words(raw_string(raw, CL_DEVICE_EXTENSIONS));
      std::vector<std::string> raw_extensions{std::istream_iterator<std::string>(words), {}};
      QCOMPARE(i.extensions, raw_extensions);
      // fp64 and fp16 against the floating-point configurations the device
      // reports, not against the extension strings the core read them from:
      // a device with the type has a non-zero configuration for it.
      QCOMPARE(i.fp64, raw_value<cl_device_fp_config>(raw, CL_DEVICE_DOUBLE_FP_CONFIG) != 0);
      cl_int half_status = CL_SUCCESS;
      const auto half = raw_value<cl_device_fp_config>(raw, CL_DEVICE_HALF_FP_CONFIG, &half_status);
      QCOMPARE(i.fp16, half_status == CL_SUCCESS && half != 0);
      QCOMPARE(d->dialect().name, std::string("opencl"));
      if (i.platform.find("Portable Computing Language") != std::string::npos) {
        QCOMPARE(i.kind, std::string("CPU"));
        QVERIFY(i.fp64);  // PoCL computes doubles on every CPU it supports
        QVERIFY(i.max_work_group >= 256);
      }
      // A second object for the same indices reports the same facts.
      auto again = open_opencl_device(p, n);
      QVERIFY(again);
      QCOMPARE(again->info().description, i.description);
      QCOMPARE(again->info().name, i.name);
    }
    QVERIFY(!open_opencl_device(1000, 0));
    QVERIFY(!open_opencl_device(0, 1000));
  }

  void warningIsKeptInBuildLog() {
    const std::string src =
        "#warning tinylens_deliberate_warning\n"
        "__kernel void warns(__global float* c) {\n"
        "  int unused_variable = 3;\n"
        "  c[get_global_id(0)] = 2.0f;\n"
        "}\n";
    for (auto& d : devices_) {
      auto program = d->compile("warns", src);
      QVERIFY2(program->build_log.find("tinylens_deliberate_warning") != std::string::npos,
               ("build log was: " + program->build_log).c_str());
      auto buf = d->allocate(4 * sizeof(float));
      LaunchArgs args;
      args.buffers = {buf.get()};
      args.global[0] = 4;
      program->launch(args);
      float out[4] = {};
      d->copy_out(*buf, out, sizeof(out));
      for (float v : out) QCOMPARE(v, 2.0f);
    }
  }

  void syntaxErrorThrowsCompileError() {
    const std::string bad = "__kernel void broken(__global float* c) {\n  c[0] = 1.0f +;\n}\n";
    for (auto& d : devices_) {
      bool thrown = false;
      try {
        d->compile("broken", bad);
      } catch (const CompileError& e) {
        thrown = true;
        const std::string what = e.what();
        QVERIFY2(what.find("broken") != std::string::npos, e.what());
        QVERIFY2(what.find("CL_BUILD_PROGRAM_FAILURE") != std::string::npos, e.what());
        QVERIFY2(e.log.find("error") != std::string::npos, e.log.c_str());
        QCOMPARE(e.source, bad);
      }
      QVERIFY(thrown);
      // The device is still fine.
      QVERIFY(d->available());
      auto program = d->compile("after_error", add_kernel(d->dialect(), "after_error", 100));
      QString why;
      QVERIFY2(run_add(*d, *program, 100, nullptr, &why), qPrintable(why));
    }
  }

  void binaryCacheHitsInFreshDevice() {
    // A token unique to this run keeps an older cache from answering.
    const std::string token = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    for (auto& d : devices_) {
      const std::string src = "// run " + token + "\n#warning cached_warning_text\n" +
                              add_kernel(d->dialect(), "cached_add", 1000);
      auto [p, n] = indices_of(*d);
      auto first = open_opencl_device(p, n);
      auto a = first->compile("cached_add", src);
      QVERIFY(!a->cache_hit);
      first.reset();  // nothing in memory survives

      auto second = open_opencl_device(p, n);
      auto b = second->compile("cached_add", src);
      QVERIFY(b->cache_hit);
      QVERIFY2(b->build_log.find("cached_warning_text") != std::string::npos, b->build_log.c_str());
      QString why;
      QVERIFY2(run_add(*second, *b, 1000, nullptr, &why), qPrintable(why));

      // A program outlives the device object that built it.
      second.reset();
      QVERIFY(b->build_log.size() > 0);

      // Corrupt every cached binary, half of them inside a well-formed entry
      // (so that load() itself fails): the next compile rebuilds from source.
      namespace fs = std::filesystem;
      int corrupted = 0;
      for (auto& entry : fs::recursive_directory_iterator(cache_home_.path().toStdString()))
        if (entry.is_regular_file() && entry.path().extension() == ".bin") {
          std::ofstream(entry.path(), std::ios::binary | std::ios::trunc)
              << (corrupted % 2 ? std::string("TLCLBIN1 not a binary at all") : tl::pack_entry("not a binary", "log"));
          ++corrupted;
        }
      QVERIFY(corrupted >= 1);
      auto third = open_opencl_device(p, n);
      auto c = third->compile("cached_add", src);
      QVERIFY(!c->cache_hit);
      QVERIFY2(run_add(*third, *c, 1000, nullptr, &why), qPrintable(why));
      // ... and the rebuilt binary is cached again.
      auto fourth = open_opencl_device(p, n);
      QVERIFY(fourth->compile("cached_add", src)->cache_hit);
    }
  }

  void genericKernelAndProfiling() {
    for (auto& d : devices_) {
      for (long n : {1L, 1000L, 1L << 20}) {
        const std::string name = "add_" + std::to_string(n);
        auto program = d->compile(name, add_kernel(d->dialect(), name, n));
        double seconds = 0;
        QString why;
        QVERIFY2(run_add(*d, *program, n, &seconds, &why), qPrintable(why));
        if (n == (1L << 20)) QVERIFY2(seconds > 0, "profiling event reported no time");
      }
    }
  }

  void emptyBuffersAndBadLaunches() {
    for (auto& d : devices_) {
      auto empty = d->allocate(0);
      QCOMPARE(empty->bytes(), size_t(0));
      d->copy_in(*empty, nullptr, 0);
      d->copy_out(*empty, nullptr, 0);
      auto program = d->compile("add_empty", add_kernel(d->dialect(), "add_empty", 0));
      LaunchArgs args;
      args.buffers = {empty.get(), empty.get(), empty.get()};
      args.global[0] = 0;
      QCOMPARE(program->launch(args), 0.0);

      // Mistakes of the caller are DeviceErrors and leave the device usable.
      args.buffers = {empty.get()};
      args.global[0] = 1;
      QVERIFY_THROWS_EXCEPTION(DeviceError, program->launch(args));
      float four[4] = {};
      QVERIFY_THROWS_EXCEPTION(DeviceError, d->copy_in(*empty, four, sizeof(four)));
      auto [p, n] = indices_of(*d);
      auto other = open_opencl_device(p, n);
      auto foreign = other->allocate(16);
      args.buffers = {foreign.get(), foreign.get(), foreign.get()};
      QVERIFY_THROWS_EXCEPTION(DeviceError, program->launch(args));
      QVERIFY(d->available());
    }
  }

  void gemmTemplateMatchesCpu_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<bool>("tiled");
    QTest::addColumn<int>("width");
    // On a CPU device (PoCL) the default is the register-blocked template, at
    // the device's vector width (0) or at another ISA's; "tiled" forces the
    // local-memory one that GPUs get.
    const char* names[] = {"1x1x1", "17x33x5", "64x64x64", "129x65x257", "batch3 stride-0 B", "transposed A",
                           "transposed B batch 2", "k=0", "both transposed batch 2", "gathered B k=300",
                           "transposed B k=531", "transposed B 3x2x40"};
    for (int i = 0; i < 12; ++i) {
      for (int width : {0, 4, 8, 16})
        QTest::newRow(qPrintable(QString("%1 default width %2").arg(names[i]).arg(width))) << i << false << width;
      QTest::newRow(qPrintable(QString("%1 tiled").arg(names[i]))) << i << true << 0;
    }
  }

  void gemmTemplateMatchesCpu() {
    QFETCH(int, which);
    GemmShape s;
    switch (which) {
      case 0: s = contiguous(1, 1, 1, 1); break;
      case 1: s = contiguous(1, 17, 33, 5); break;
      case 2: s = contiguous(1, 64, 64, 64); break;
      case 3: s = contiguous(1, 129, 65, 257); break;
      case 4:
        s = contiguous(3, 19, 23, 31);
        s.b_strides[0] = 0;  // one B shared by the batch
        break;
      case 5:
        s = contiguous(1, 37, 41, 29);
        s.a_strides[1] = 1;  // A stored k x m
        s.a_strides[2] = 37;
        break;
      case 6:
        s = contiguous(2, 70, 90, 45);
        s.b_strides[1] = 1;  // B stored n x k
        s.b_strides[2] = 45;
        break;
      case 7: s = contiguous(1, 5, 6, 0); break;
      case 8:
        s = contiguous(2, 45, 38, 33);
        s.a_strides[1] = 1;  // A stored k x m
        s.a_strides[2] = 45;
        s.b_strides[1] = 1;  // B stored n x k
        s.b_strides[2] = 33;
        break;
      case 9:
        s = contiguous(1, 20, 21, 300);
        s.b_strides[1] = 42;  // every other column of a wider B
        s.b_strides[2] = 2;
        break;
      case 10:
        s = contiguous(1, 9, 7, 531);
        s.b_strides[1] = 1;
        s.b_strides[2] = 531;
        break;
      default:  // DOT with fewer rows and columns than one register tile
        s = contiguous(1, 3, 2, 40);
        s.b_strides[1] = 1;
        s.b_strides[2] = 40;
        break;
    }
    QFETCH(bool, tiled);
    QFETCH(int, width);
    if (tiled) qputenv("TINYLENS_GEMM", "tiled");
    auto restore = qScopeGuard([] { qunsetenv("TINYLENS_GEMM"); });
    for (auto& d : devices_) {
      GemmRun r = run_gemm(*d, s, "gemm_case_" + std::to_string(which) + (tiled ? "_tiled" : ""), true, width);
      std::vector<float> ref = reference_gemm(s, r.a, r.b);
      QVERIFY2(r.guard_intact, "GEMM wrote past the end of C");
      double scale = 0;
      for (float v : ref) scale = std::max(scale, double(std::fabs(v)));
      for (size_t i = 0; i < ref.size(); ++i) {
        const double err = std::fabs(double(r.c[i]) - ref[i]);
        QVERIFY2(err <= 1e-4 * (std::fabs(ref[i]) + scale) + 1e-30,
                 qPrintable(QString("%1 at %2: %3 vs %4").arg(d->name().c_str()).arg(i).arg(r.c[i]).arg(ref[i])));
      }
    }
  }

  // The register tile of a CPU device's GEMM (kernels/gemm_regs.cl) follows
  // the vector width it reports, so that its accumulators fit the register
  // file: AVX2's 16 registers spill a tile sized for AVX-512's 32.
  void registerTileFollowsVectorWidth() {
    DeviceInfo cpu;
    cpu.kind = "CPU";
    cpu.local_memory = 512 * 1024;
    cpu.max_work_group = 4096;
    auto render = [&](int width, const GemmShape& s) {
      cpu.preferred_vector_width = width;
      return render_gemm_opencl(s, "tile", cpu, opencl_dialect());
    };
    auto has = [](const TemplateKernel& k, const char* line) { return k.source.find(line) != std::string::npos; };
    GemmShape forward = contiguous(1, 1024, 1000, 256), dot = forward;
    dot.b_strides[1] = 1;  // B stored n x k: A times B transposed
    dot.b_strides[2] = 256;
    struct Expect {
      int width, vw, nv, dot_nv;
    };
    // 1 or 2: a device that vectorises across items itself gets 16 lanes.
    for (Expect e : {Expect{16, 16, 4, 4}, Expect{8, 8, 2, 3}, Expect{4, 4, 2, 3}, Expect{1, 16, 4, 4}}) {
      const std::string vw = "#define VW " + std::to_string(e.vw) + "\n";
      const TemplateKernel f = render(e.width, forward), d = render(e.width, dot);
      QVERIFY2(has(f, vw.c_str()) && has(f, "#define MR 6\n") && has(f, "#define LAYOUT_VEC_N 1"), f.source.c_str());
      QVERIFY2(has(f, ("#define NV " + std::to_string(e.nv) + "\n").c_str()), f.source.c_str());
      QCOMPARE(f.global[0], (1000 + e.vw * e.nv - 1) / (e.vw * e.nv));  // column blocks of VW * NV
      QCOMPARE(f.global[1], int64_t(171));                              // 1024 rows in blocks of 6
      QVERIFY2(has(d, vw.c_str()) && has(d, "#define MR 4\n") && has(d, "#define LAYOUT_DOT 1"), d.source.c_str());
      QVERIFY2(has(d, ("#define NV " + std::to_string(e.dot_nv) + "\n").c_str()), d.source.c_str());
      QCOMPARE(d.global[1], (1000 + e.dot_nv - 1) / e.dot_nv);
    }
  }

  // A GPU's default GEMM tile (before any tuning) follows the product's
  // shape, on an H200-like description. OpenCL: rows or columns fewer than
  // a tile's, or K under 128, take 32 x 32 (they ran 1.5-2.5x faster than
  // the 128 x 128 the block count alone chose); a 7 x 7 map over many
  // channels takes 64 x 64; 16 x 16 is never the default; a large product
  // keeps 128 x 128. CUDA (gemm_cuda.cpp's pick_tiles): the first of its
  // five tiles no larger than the product that gives 1.5 blocks per SM
  // (128 rows) or 4 (fewer), whatever K is, else 32 x 32.
  void gpuTilesFollowTheProductsShape() {
    DeviceInfo gpu;
    gpu.kind = "GPU";
    gpu.compute_units = 132;
    gpu.local_memory = 48 * 1024;
    gpu.max_work_group = 1024;
    auto tile = [](const TemplateKernel& k) { return k.label.substr(0, k.label.find('x', k.label.find('x') + 1)); };
    struct Expect {
      int64_t batch, m, n, k;
      const char *opencl, *cuda;
    };
    for (Expect e : {Expect{64, 16, 12544, 32, "tile=32x32", "tile=32x64"},
                     Expect{64, 144, 3136, 24, "tile=32x32", "tile=128x128"},
                     Expect{64, 240, 784, 40, "tile=32x32", "tile=128x128"},
                     Expect{64, 1152, 49, 192, "tile=64x64", "tile=128x64"},
                     Expect{64, 32, 3136, 1152, "tile=32x32", "tile=32x64"},
                     Expect{64, 64, 3136, 576, "tile=64x64", "tile=64x64"},
                     Expect{1, 192, 49, 1152, "tile=32x32", "tile=32x32"},
                     Expect{1, 197, 3072, 768, "tile=32x32", "tile=32x32"},
                     Expect{1, 1, 1000, 1280, "tile=32x32", "tile=32x32"},
                     Expect{1, 12608, 768, 3072, "tile=128x128", "tile=128x128"},
                     Expect{1, 4096, 4096, 4096, "tile=128x128", "tile=128x128"}}) {
      const GemmShape s = contiguous(e.batch, e.m, e.n, e.k);
      const std::string at = std::to_string(e.batch) + "x" + std::to_string(e.m) + "x" + std::to_string(e.n) + "x" +
                             std::to_string(e.k);
      const TemplateKernel cl = render_gemm_opencl(s, "tile", gpu, opencl_dialect());
      QVERIFY2(tile(cl) == e.opencl, (at + " OpenCL: " + cl.label).c_str());
      const TemplateKernel cu = render_gemm_cuda(s, "tile", gpu, cuda_dialect());
      QVERIFY2(tile(cu) == e.cuda, (at + " CUDA: " + cu.label).c_str());
    }
  }

  // The matmul layouts that take every path of a GEMM template
  // (tests/gemm_layouts.h, with a fused bias + ReLU), on each OpenCL device
  // through the whole pipeline, against the CPU device.
  void gemmLayoutsMatchCpu() {
    for (auto& d : devices_)
      for (auto& c : tlops::gemm_layouts()) {
        const std::string why = tlops::check_gemm_layout(c, d->name());
        QVERIFY2(why.empty(), (d->name() + " " + why).c_str());
      }
  }

  // When a reduction gets the grouped form: a pure rule over the device's
  // facts (render.cpp explains it), checked on an H200-like, a PoCL-like and
  // a C-like description.
  void reductionFormRule() {
    const Dialect& cl = opencl_dialect();
    auto group = [&](const DeviceInfo& info, int64_t outputs, int64_t count, DType t = DType::f32) {
      return reduce_group_size(cl, info, outputs, count, t);
    };
    DeviceInfo gpu;
    gpu.compute_units = 132;
    gpu.max_work_group = 1024;
    gpu.local_memory = 48 * 1024;
    QCOMPARE(group(gpu, 1, 1000), int64_t(256));             // softmax, batch 1
    QCOMPARE(group(gpu, 64, 1000), int64_t(256));            // softmax, batch 64
    QCOMPARE(group(gpu, 600, 1000), int64_t(256));           // two waves of groups still beat 1000 steps
    QCOMPARE(group(gpu, 100000, 1000), int64_t(0));          // the outputs nearly fill the device
    QCOMPARE(group(gpu, 132 * 1024, 1000), int64_t(0));
    QCOMPARE(group(gpu, 1280, 49), int64_t(64));             // global average pool, batch 1
    QCOMPARE(group(gpu, 16 * 1280, 49), int64_t(0));         // ... batch 16: ten waves of groups
    QCOMPARE(group(gpu, 1, 7 * 7 * 1280), int64_t(256));     // mean of a whole 7x7x1280 map
    QCOMPARE(group(gpu, 64, 16 * 28 * 28), int64_t(256));    // bias gradient over N*H*W
    QCOMPARE(group(gpu, 4, 33, DType::i32), int64_t(64));    // the next power of two
    QCOMPARE(group(gpu, 4, 32), int64_t(32));
    QCOMPARE(group(gpu, 4, 31), int64_t(0));                 // too short for a tree
    QCOMPARE(group(gpu, 112 * 112 * 32, 9), int64_t(0));     // a depthwise 3x3
    QCOMPARE(group(gpu, 0, 1000), int64_t(0));               // nothing to compute
    QCOMPARE(group(gpu, int64_t(1) << 24, 1 << 20), int64_t(0));  // 2^32 items would overflow int
    DeviceInfo small = gpu;
    small.max_work_group = 64;  // a group never exceeds the device's largest
    QCOMPARE(group(small, 1, 1000), int64_t(64));
    small.max_work_group = 16;  // too narrow to be worth a tree
    QCOMPARE(group(small, 1, 1000), int64_t(0));
    small = gpu;
    small.local_memory = 512;  // the partial results must fit in local memory
    QCOMPARE(group(small, 1, 1000), int64_t(128));
    small.local_memory = 0;
    QCOMPARE(group(small, 1, 1000), int64_t(0));
    DeviceInfo pocl;
    pocl.compute_units = 2;
    pocl.max_work_group = 4096;
    pocl.local_memory = 512 * 1024;
    QCOMPARE(group(pocl, 1, 1000), int64_t(256));
    QCOMPARE(group(pocl, 64, 16 * 28 * 28), int64_t(256));
    QCOMPARE(group(pocl, 1280, 49), int64_t(0));  // ten waves of groups of 64 on 8k items
    QCOMPARE(group(pocl, 8192, 1000), int64_t(0));
    Dialect c = cl;  // a dialect without local memory (the C device's) never groups
    c.local_qualifier.clear();
    QCOMPARE(reduce_group_size(c, gpu, 1, 1000, DType::f32), int64_t(0));
  }

  // The op suite's reductions on each device: every reduction kernel takes
  // the form the rule above gives for its size (a softmax's are computed by
  // the kernel that reads them, a work-group a row) (local qualifier, barriers,
  // one work-group of local[0] items per output when grouped), the large
  // ones are grouped on any device at least PoCL-sized, and the values match
  // the golden data and the CPU device.
  void groupedReductionsOfTheOpSuite_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("grouped");  // 1: on every device with >= 8k items in flight; 0: never; -1: by size
    for (const char* name : {"sum_1000", "max_3x1000_1_nan", "sum_7x7x1280_all", "sum_nhw_8x16x9x9_023",
                             "max_nhw_8x16x9x9_023", "mean_nhw_4x24x7x7_023_keep", "sum_3x257_1", "sum_2x512_1",
                             "max_5x33_1", "min_97x4_0", "max_allneg_2x300_1", "argmax_3x1000_1", "sum_big_100000",
                             "mean_32x1000_1", "softmax_1000", "log_softmax_1000"})
      QTest::newRow(name) << QString(name) << 1;
    for (const char* name : {"sum_1x1_all", "sum_1x1000_0", "sum_odd_5x7_1", "argmax_rand_7x13_1", "sum_1_keep",
                             "max_pool_k3s1"})
      QTest::newRow(name) << QString(name) << 0;
    QTest::newRow("mean_gap_1x1280x7x7") << QString("mean_gap_1x1280x7x7") << -1;
  }

  void groupedReductionsOfTheOpSuite() {
    QFETCH(QString, name);
    QFETCH(int, grouped);
    static const auto cases = tltest::read_golden(tltest::source_dir() + "/tests/data/golden/ops.bin");
    auto it = std::find_if(cases.begin(), cases.end(), [&](auto& c) { return c.name == name.toStdString(); });
    QVERIFY2(it != cases.end(), "case missing from ops.bin (rerun scripts/make_golden.py)");
    const tlops::Outcome cpu = tlops::run_case(*it, "cpu");
    for (auto& d : devices_) {
      const Dialect& dialect = d->dialect();
      const DeviceInfo& info = d->info();
      QVERIFY(!dialect.local_qualifier.empty() && !dialect.barrier.empty());
      const bool big = info.local_memory >= 1024 && info.max_work_group >= 256 &&
                       int64_t(info.compute_units) * int64_t(info.max_work_group) >= 8192;
      ProfileCapture cap;
      const tlops::Outcome out = tlops::run_case(*it, d->name());
      int grouped_kernels = 0, reductions = 0;
      for (auto& rec : cap.records()) {
        const KernelInfo& k = *rec.kernel;
        if (k.name.rfind("ROWS", 0) == 0) {  // reductions computed by their reader (fuse_rows): a work-group a row
          ++reductions, ++grouped_kernels;
          QVERIFY2(k.local[0] >= 32 && k.global[0] % k.local[0] == 0 &&
                       k.source.find(dialect.barrier) != std::string::npos &&
                       k.source.find(dialect.group_id) != std::string::npos,
                   k.source.c_str());
          continue;
        }
        if (k.name.rfind("R_", 0) != 0) continue;
        ++reductions;
        // "R_<output dims>_<count>": the rule's inputs.
        int64_t outputs = 1, count = 0;
        std::stringstream parts(k.name.substr(2));
        for (std::string part; std::getline(parts, part, '_');) {
          if (count) outputs *= count;
          count = std::stoll(part);
        }
        const int64_t want = reduce_group_size(dialect, info, outputs, count, DType::f32);
        QVERIFY2(k.local[0] == want, qPrintable(QString("%1: local size %2, the rule says %3")
                                                    .arg(k.name.c_str())
                                                    .arg(k.local[0])
                                                    .arg(want)));
        const std::string part = " part[" + std::to_string(want) + "]";
        const bool has_barrier = k.source.find(dialect.barrier) != std::string::npos;
        const bool has_local = k.source.find(dialect.local_qualifier + "float" + part) != std::string::npos ||
                               k.source.find(dialect.local_qualifier + "int" + part) != std::string::npos;
        QVERIFY2(has_barrier == (want > 0) && has_local == (want > 0), k.source.c_str());
        if (want == 0) continue;
        ++grouped_kernels;
        QCOMPARE(k.global[0], outputs * want);  // one work-group per output
        QVERIFY2(k.source.find(dialect.group_id) != std::string::npos, k.source.c_str());
      }
      QVERIFY2(reductions > 0, "no reduction kernel ran");
      if (grouped == 0) QCOMPARE(grouped_kernels, 0);
      if (grouped == 1 && big) QVERIFY2(grouped_kernels > 0, "no reduction kernel was grouped");
      QCOMPARE(out.values.size(), it->outputs.size());
      for (size_t k = 0; k < out.values.size(); ++k) {
        std::string why;
        QVERIFY2(tltest::all_close(out.values[k], it->outputs[k].data, it->rtol, it->atol, &why),
                 ("vs golden: " + why).c_str());
        QVERIFY2(tltest::all_close(out.values[k], cpu.values[k], it->rtol, it->atol, &why), ("vs cpu: " + why).c_str());
      }
    }
  }

  // TINYLENS_REDUCE=serial renders every reduction in the serial form (realize
  // keeps rendered kernels for the process, so this renders directly).
  void serialFormOnRequest() {
    Generator gen(1);
    Tensor x = Tensor::randn({4, 1000}, gen, "cpu");
    x.realize();
    Tensor y = x.sum({1});
    auto plans = schedule({y.node()}, false);
    auto plan = std::find_if(plans.begin(), plans.end(), [](auto& p) { return p.kind == KernelPlan::Kind::Reduce; });
    QVERIFY(plan != plans.end());
    for (auto& d : devices_) {
      const RenderedKernel grouped = render_kernel(*plan, *d);
      QCOMPARE(grouped.local[0], reduce_group_size(d->dialect(), d->info(), 4, 1000, DType::f32));
      qputenv("TINYLENS_REDUCE", "serial");
      auto restore = qScopeGuard([] { qunsetenv("TINYLENS_REDUCE"); });
      const RenderedKernel serial = render_kernel(*plan, *d);
      QCOMPARE(serial.local[0], int64_t(0));
      QCOMPARE(serial.global[0], int64_t(4));
      QVERIFY2(serial.source.find(d->dialect().barrier) == std::string::npos, serial.source.c_str());
      QVERIFY2(serial.source.find("for (int r = 0; r < 1000; ++r)") != std::string::npos, serial.source.c_str());
    }
  }

  // Reports, does not assert speed: GEMM n=1024 and the add kernel's bandwidth.
  void benchmark() {
    for (auto& d : devices_) {
      const int n = 1024;
      GemmShape s = contiguous(1, n, n, n);
      GemmRun r = run_gemm(*d, s, "gemm_bench", false);
      // Constant inputs: every element is n * 0.5 * 0.25 exactly.
      QCOMPARE(r.c[0], float(n) * 0.125f);
      QCOMPARE(r.c.back(), float(n) * 0.125f);
      double best = r.seconds;
      const long count = 1L << 22;
      auto program = d->compile("add_bench", add_kernel(d->dialect(), "add_bench", count));
      double add_seconds = 0;
      QString why;
      QVERIFY2(run_add(*d, *program, count, &add_seconds, &why), qPrintable(why));
      qInfo("%s GEMM %dx%dx%d: %.2f ms = %.1f GFLOP/s; add of %ld floats: %.3f ms = %.1f GB/s", d->name().c_str(), n,
            n, n, best * 1e3, 2.0 * n * n * n / best * 1e-9, count, add_seconds * 1e3,
            3.0 * count * sizeof(float) / add_seconds * 1e-9);
    }
  }
#endif
};

QTEST_GUILESS_MAIN(TestOpenCL)
#include "test_opencl.moc"
