// Every cache is a promise (core/README.md, "Caches and their keys"): for
// each one, two entries that differ in exactly one field that decides their
// content do not collide. The conv + max pool of two models that differ
// only in the pool's padding is in test_onnx_pool.cpp (poolPaddingsInOneProcess);
// the whole zoo in one process, in a shuffled order, is test_zoo.cpp.
#include <QtTest/QtTest>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>

#include "core/depthwise.h"
#include "core/ops.h"
#include "core/profile.h"
#include "core/realize.h"
#include "core/replay.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "tests/testing.h"

using tl::Tensor;

namespace {

// Sets one environment variable for its lifetime.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const std::string& n, const std::string& value) : name(n) { ::setenv(n.c_str(), value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

// A dialect-form kernel c[gid] = a[gid] OP b[gid] under one name
// (core/dialect.h's layout: buffers as parameters, or in an array on the C
// device).
std::string binary_kernel(const tl::Dialect& d, const std::string& name, const std::string& op, long n) {
  std::string open = d.parallel_open;
  if (auto at = open.find("{n}"); at != std::string::npos) open.replace(at, 3, std::to_string(n));
  const std::string q = d.global_qualifier, r = d.restrict_kw;
  std::string head = d.preamble + d.kernel_prefix + " " + name + "(";
  if (d.buffers_in_array)
    head += "int start, int end, void** args) {\n  float* " + r + " c = (float*)args[0];\n  const float* " + r +
            " a = (const float*)args[1];\n  const float* " + r + " b = (const float*)args[2];\n";
  else
    head += q + "float* " + r + " c, " + q + "const float* " + r + " a, " + q + "const float* " + r + " b) {\n";
  return head + "  " + open + "\n    c[gid] = a[gid] " + op + " b[gid];\n  " + d.parallel_close + "\n}\n";
}

// Runs a two-input kernel on a = 5, b = 2 (n elements) and returns c[0].
float run_binary(tl::Device& dev, tl::Program& program, long n) {
  std::vector<float> a(size_t(n), 5.0f), b(size_t(n), 2.0f), c(size_t(n), 0.0f);
  auto bc = dev.allocate(size_t(n) * sizeof(float)), ba = dev.allocate(size_t(n) * sizeof(float)),
       bb = dev.allocate(size_t(n) * sizeof(float));
  dev.copy_in(*ba, a.data(), a.size() * sizeof(float));
  dev.copy_in(*bb, b.data(), b.size() * sizeof(float));
  tl::LaunchArgs args;
  args.buffers = {bc.get(), ba.get(), bb.get()};
  args.global[0] = n;
  program.launch(args);
  dev.copy_out(*bc, c.data(), c.size() * sizeof(float));
  return c[0];
}

// A convolution of x (1, C, S, S) by w (O, C, K, K), stride s, pad p, in
// double precision.
std::vector<double> direct_conv(const std::vector<float>& x, int64_t C, int64_t S, const std::vector<float>& w,
                                int64_t O, int64_t K, int64_t s, int64_t p, int64_t& out) {
  out = (S + 2 * p - K) / s + 1;
  std::vector<double> y(size_t(O * out * out), 0.0);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < out; ++i)
      for (int64_t j = 0; j < out; ++j) {
        double sum = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ki = 0; ki < K; ++ki)
            for (int64_t kj = 0; kj < K; ++kj) {
              const int64_t r = i * s + ki - p, q = j * s + kj - p;
              if (r >= 0 && r < S && q >= 0 && q < S)
                sum += double(x[size_t((c * S + r) * S + q)]) * double(w[size_t(((o * C + c) * K + ki) * K + kj)]);
            }
        y[size_t((o * out + i) * out + j)] = sum;
      }
  return y;
}

}  // namespace

class TestCacheKeys : public QObject {
  Q_OBJECT

 private slots:
  // hint_key is the one list of a hint's numbers that the rendered-kernel
  // signature and replay's GraphKey write: every field changes it.
  void hintKeyCoversEveryField() {
    tl::MatmulHint base;
    base.batch = 2, base.m = 3, base.n = 4, base.k = 5;
    for (int i = 0; i < 3; ++i) base.a_strides[i] = 10 + i, base.b_strides[i] = 20 + i;
    base.a = base.b = base.image = std::make_shared<tl::Node>();
    tl::ConvGather& g = base.gather;
    g.channels = 1, g.height = 9, g.width = 9, g.kernel_h = 3, g.kernel_w = 3, g.out_w = 4;
    const auto key = tl::hint_key(base);
    std::vector<std::pair<const char*, std::function<void(tl::MatmulHint&)>>> changes = {
        {"batch", [](tl::MatmulHint& h) { ++h.batch; }},
        {"m", [](tl::MatmulHint& h) { ++h.m; }},
        {"n", [](tl::MatmulHint& h) { ++h.n; }},
        {"k", [](tl::MatmulHint& h) { ++h.k; }},
        {"a_strides[0]", [](tl::MatmulHint& h) { ++h.a_strides[0]; }},
        {"a_strides[1]", [](tl::MatmulHint& h) { ++h.a_strides[1]; }},
        {"a_strides[2]", [](tl::MatmulHint& h) { ++h.a_strides[2]; }},
        {"b_strides[0]", [](tl::MatmulHint& h) { ++h.b_strides[0]; }},
        {"b_strides[1]", [](tl::MatmulHint& h) { ++h.b_strides[1]; }},
        {"b_strides[2]", [](tl::MatmulHint& h) { ++h.b_strides[2]; }},
        {"no image", [](tl::MatmulHint& h) { h.image = nullptr; }},
        {"b is not the image", [](tl::MatmulHint& h) { h.b = std::make_shared<tl::Node>(); }},
        {"a is not the image", [](tl::MatmulHint& h) { h.a = std::make_shared<tl::Node>(); }},
        {"gather_only", [](tl::MatmulHint& h) { h.gather_only = true; }},
        {"max", [](tl::MatmulHint& h) { h.gather.max = true; }},
        {"channels", [](tl::MatmulHint& h) { ++h.gather.channels; }},
        {"height", [](tl::MatmulHint& h) { ++h.gather.height; }},
        {"width", [](tl::MatmulHint& h) { ++h.gather.width; }},
        {"kernel_h", [](tl::MatmulHint& h) { ++h.gather.kernel_h; }},
        {"kernel_w", [](tl::MatmulHint& h) { ++h.gather.kernel_w; }},
        {"stride_h", [](tl::MatmulHint& h) { ++h.gather.stride_h; }},
        {"stride_w", [](tl::MatmulHint& h) { ++h.gather.stride_w; }},
        {"dilation_h", [](tl::MatmulHint& h) { ++h.gather.dilation_h; }},
        {"dilation_w", [](tl::MatmulHint& h) { ++h.gather.dilation_w; }},
        {"pad_top", [](tl::MatmulHint& h) { ++h.gather.pad_top; }},
        {"pad_left", [](tl::MatmulHint& h) { ++h.gather.pad_left; }},
        {"out_w", [](tl::MatmulHint& h) { ++h.gather.out_w; }},
    };
    for (auto& [field, change] : changes) {
      tl::MatmulHint h = base;
      change(h);
      QVERIFY2(tl::hint_key(h) != key, field);
    }
  }

  // The in-process program memo and the disk cache key a kernel by its
  // source, never by its name: two kernels named alike compute their own
  // values, in either order, and again from a fresh device's disk cache.
  void sameNameOtherSourceIsAnotherProgram() {
    const std::string token = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    for (const std::string& name : tltest::available_devices()) {
      tl::Device& dev = tl::Registry::instance().get(name);
      const long n = 64;
      const std::string add = "// " + token + "\n" + binary_kernel(dev.dialect(), "same_name", "+", n);
      const std::string sub = "// " + token + "\n" + binary_kernel(dev.dialect(), "same_name", "-", n);
      for (int round = 0; round < 2; ++round) {  // the second round reads the disk cache
        if (round == 1) tl::forget_compiled_kernels();
        auto p_sub = dev.compile("same_name", sub);
        auto p_add = dev.compile("same_name", add);
        QCOMPARE(round == 1, p_add->cache_hit);
        QCOMPARE(run_binary(dev, *p_add, n), 7.0f);
        QCOMPARE(run_binary(dev, *p_sub, n), 3.0f);
      }
    }
  }

  // Packed weights (Buffer::derived, keyed by the packed layout): one
  // realized weight read by convolutions of other image sizes and strides
  // in one process gives each its own product.
  void oneWeightManyConvolutions() {
    const int64_t C = 6, O = 20, K = 3;
    const auto wv = tltest::normal_floats(size_t(O * C * K * K), 3);
    for (const std::string& device : tltest::available_devices()) {
      const Tensor w = Tensor::from_data(wv, {O, C, K, K}, device).realize();
      struct Case {
        int64_t size, stride, pad;
      };
      for (const Case c : {Case{17, 1, 1}, Case{9, 2, 0}, Case{30, 1, 0}, Case{17, 2, 1}, Case{17, 1, 1}}) {
        const auto xv = tltest::normal_floats(size_t(C * c.size * c.size), uint32_t(c.size + 7 * c.stride));
        const Tensor x = Tensor::from_data(xv, {1, C, c.size, c.size}, device);
        tl::Conv2dOptions opt;
        opt.stride_h = opt.stride_w = c.stride, opt.pad_h = opt.pad_w = c.pad;
        const std::vector<float> got = x.conv2d(w, Tensor(), opt).to_vector();
        int64_t out = 0;
        const std::vector<double> want = direct_conv(xv, C, c.size, wv, O, K, c.stride, c.pad, out);
        QCOMPARE(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          QVERIFY2(std::abs(got[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])),
                   qPrintable(QString("%1, image %2 stride %3 pad %4: element %5 is %6, reference %7")
                                  .arg(device.c_str()).arg(c.size).arg(c.stride).arg(c.pad).arg(i).arg(got[i])
                                  .arg(want[i])));
      }
    }
  }

  // A setting that changes the schedule (TINYLENS_NOPOOLFUSION) changed while
  // the process runs is not answered from a plan or a rendering made under
  // the old one: settings_key is part of both keys.
  void settingsArePartOfTheKeys() {
    const auto xv = tltest::normal_floats(2 * 4 * 12 * 12, 11);
    const auto wv = tltest::normal_floats(8 * 4 * 9, 12);
    const Tensor w = Tensor::from_data(wv, {8, 4, 3, 3}, "cpu").realize();
    auto run = [&](std::string& names) {
      const Tensor x = Tensor::from_data(xv, {2, 4, 12, 12}, "cpu");
      tl::Conv2dOptions opt;
      opt.pad_h = opt.pad_w = 1;
      tl::Window2d pool;  // ONNX MaxPool's form (io/onnx/nn.cpp)
      pool.kernel_h = pool.kernel_w = 3, pool.stride_h = pool.stride_w = 2, pool.pad_h = pool.pad_w = {1, 1};
      tl::ProfileCapture capture;
      auto y = tl::max_pool_by_gather(x.conv2d(w, Tensor(), opt).relu(), pool).to_vector();
      names.clear();
      for (const auto& r : capture.records()) names += r.kernel->name + " ";
      return y;
    };
    std::string fused, apart, again;
    const auto a = run(fused);
    const std::string key = tl::settings_key();
    std::vector<float> b;
    {
      ScopedEnv off("TINYLENS_NOPOOLFUSION", "1");
      QVERIFY(tl::settings_key() != key);
      b = run(apart);
    }
    const auto c = run(again);
    if (!tl::pool_fusion_enabled()) QSKIP("TINYLENS_NOPOOLFUSION is set for the whole run");
    QVERIFY2(fused.find("_MAXPOOL_") != std::string::npos, fused.c_str());
    QVERIFY2(apart.find("_MAXPOOL_") == std::string::npos, apart.c_str());
    QCOMPARE(again, fused);
    QCOMPARE(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) QVERIFY(std::abs(a[i] - b[i]) <= 1e-4f * (1 + std::abs(a[i])));
    QVERIFY(a == c);
  }
};

QTEST_GUILESS_MAIN(TestCacheKeys)
#include "test_cache_keys.moc"
