// float64: the golden cases of scripts/make_golden_f64.py (values float32
// cannot hold or loses digits of) on every device that reports fp64, compared
// with NumPy to about 1e-12; gradients through float64 checked by central
// finite differences to 1e-7; the rendered source (double spellings, OpenCL's
// cl_khr_fp64 pragma); and a device without fp64 refusing float64 work by name.
#include <QtTest/QtTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>

#include "core/codegen/render.h"
#include "core/error.h"
#include "core/runtime/registry.h"
#include "core/schedule.h"
#include "core/tensor.h"
#include "tests/golden.h"
#include "tests/testing.h"

using tl::DType;
using tl::Tensor;
using V = std::vector<Tensor>;

namespace {

struct Golden64 {
  std::string name;
  double rtol = 0, atol = 0;
  std::vector<std::pair<tl::Shape, std::vector<double>>> inputs, outputs;
};

std::vector<Golden64> read_golden64(const std::string& path) {
  tltest::GoldenBlob in(path, "TLGOLD64", " (scripts/make_golden_f64.py writes it)");
  auto take = [&](void* dst, size_t n) { in.take(dst, n); };
  uint32_t count = 0;
  take(&count, 4);
  auto tensor = [&] {
    uint8_t ndim = 0;
    take(&ndim, 1);
    tl::Shape shape(ndim);
    if (ndim) take(shape.data(), 8 * size_t(ndim));
    std::vector<double> data(size_t(tl::numel(shape)));
    if (!data.empty()) take(data.data(), 8 * data.size());
    return std::make_pair(shape, data);
  };
  std::vector<Golden64> cases(count);
  for (auto& c : cases) {
    uint16_t len = 0;
    take(&len, 2);
    c.name.resize(len);
    take(c.name.data(), len);
    uint8_t n_in = 0, n_out = 0;
    take(&c.rtol, 8);
    take(&c.atol, 8);
    take(&n_in, 1);
    take(&n_out, 1);
    for (int i = 0; i < n_in; ++i) c.inputs.push_back(tensor());
    for (int i = 0; i < n_out; ++i) c.outputs.push_back(tensor());
  }
  return cases;
}

const std::vector<Golden64>& golden() {
  static const auto cases = read_golden64(std::string(TL_SOURCE_DIR) + "/tests/data/golden/f64.bin");
  return cases;
}

// The C++ twin of each case in scripts/make_golden_f64.py.
const std::map<std::string, std::function<V(const V&)>>& table() {
  static const std::map<std::string, std::function<V(const V&)>> t = {
      {"overflow_mul_div", [](const V& x) { return V{x[0] * x[1] / x[2]}; }},
      {"sum_precision", [](const V& x) { return V{x[0].sum({1})}; }},
      {"mean_var_offset", [](const V& x) { return V{x[0].mean({1}), x[0].var({1})}; }},
      {"max_close", [](const V& x) { return V{x[0].max({1})}; }},
      {"unary_range",
       [](const V& x) {
         return V{x[0].exp(), x[1].log(), x[1].sqrt(), x[2].sin(), x[1].pow(1.5), x[1].reciprocal()};
       }},
      {"matmul_precise", [](const V& x) { return V{x[0].matmul(x[1])}; }},
      {"softmax_shifted", [](const V& x) { return V{x[0].softmax(1)}; }},
      {"compare_close", [](const V& x) { return V{x[0].lt(x[1]), x[0].eq(x[1])}; }},
      {"cast_round", [](const V& x) { return V{x[0].cast(DType::f32).cast(DType::f64), x[0].cast(DType::i32)}; }},
  };
  return t;
}

std::vector<std::string> fp64_devices() {
  std::vector<std::string> out;
  for (auto& name : tltest::available_devices())
    if (tl::Registry::instance().get(name).info().fp64) out.push_back(name);
  return out;
}

// The CPU device under another name that reports no fp64: what a GPU without
// cl_khr_fp64 looks like to realize.
struct NoFp64 : tl::Device {
  explicit NoFp64(tl::Device& real) : real_(real), info_(real.info()) {
    info_.name = "cpu-nofp64";
    info_.fp64 = false;
  }
  const tl::DeviceInfo& info() const override { return info_; }
  std::shared_ptr<tl::Buffer> allocate(size_t n) override { return real_.allocate(n); }
  void copy_in(tl::Buffer& b, const void* s, size_t n) override { real_.copy_in(b, s, n); }
  void copy_out(const tl::Buffer& b, void* d, size_t n) override { real_.copy_out(b, d, n); }
  const tl::Dialect& dialect() const override { return real_.dialect(); }
  tl::Built build(const std::string& n, const std::string& s) override { return real_.build(n, s); }
  std::shared_ptr<tl::Program> load(const std::string& n, const std::string& b) override { return real_.load(n, b); }
  std::string build_options() const override { return real_.build_options(); }
  void finish() override { real_.finish(); }
  tl::Device& real_;
  tl::DeviceInfo info_;
};

// Deterministic values in [lo, hi), independent of the core's Generator.
std::vector<double> values(size_t n, double lo, double hi, uint64_t seed) {
  std::vector<double> v(n);
  for (auto& x : v) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * double(seed >> 11) / double(1ULL << 53);
  }
  return v;
}

}  // namespace

class TestF64 : public QObject {
  Q_OBJECT

 private slots:
  void table_matches_golden_file() {
    std::set<std::string> in_file;
    for (auto& c : golden()) {
      in_file.insert(c.name);
      QVERIFY2(table().count(c.name), ("golden case without a C++ twin: " + c.name).c_str());
    }
    for (auto& [name, f] : table()) QVERIFY2(in_file.count(name), ("C++ case missing from f64.bin: " + name).c_str());
  }

  void the_cases_need_float64() {
    // Run in float32, the first case overflows: the suite would catch a
    // silent downgrade.
    const Golden64& c = golden().front();
    QCOMPARE(c.name, std::string("overflow_mul_div"));
    V in;
    for (auto& [shape, data] : c.inputs) in.push_back(Tensor::from_doubles(data, shape, "cpu").cast(DType::f32));
    auto got = table().at(c.name)(in)[0].to_doubles();
    QVERIFY(!std::isfinite(got[0]));
  }

  void golden_cases_data() {
    QTest::addColumn<QString>("device");
    auto devs = fp64_devices();
    QVERIFY(!devs.empty());
    QCOMPARE(devs.front(), std::string("cpu"));
    for (auto& d : devs) QTest::newRow(d.c_str()) << QString::fromStdString(d);
  }
  void golden_cases() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    for (const auto& c : golden()) {
      V in;
      for (auto& [shape, data] : c.inputs) in.push_back(Tensor::from_doubles(data, shape, dev));
      V out = table().at(c.name)(in);
      QCOMPARE(out.size(), c.outputs.size());
      for (size_t o = 0; o < out.size(); ++o) {
        const std::string where = dev + " " + c.name + " output " + std::to_string(o);
        QVERIFY2(out[o].shape() == c.outputs[o].first, (where + ": shape " + tl::shape_str(out[o].shape())).c_str());
        if (tl::is_float(out[o].dtype())) QCOMPARE(out[o].dtype(), DType::f64);
        auto got = out[o].to_doubles();
        const auto& want = c.outputs[o].second;
        for (size_t i = 0; i < got.size(); ++i) {
          const bool ok = std::isinf(want[i]) ? got[i] == want[i]
                                              : std::fabs(got[i] - want[i]) <= c.atol + c.rtol * std::fabs(want[i]);
          QVERIFY2(ok, (where + " [" + std::to_string(i) + "]: " + QByteArray::number(got[i], 'g', 17).toStdString() +
                        " vs " + QByteArray::number(want[i], 'g', 17).toStdString())
                           .c_str());
        }
      }
    }
  }

  // loss = sum(f(inputs) * W) in float64; backward() against central
  // differences with h = 1e-5, whose error (h^2 and rounding) is near 1e-10.
  void gradients_match_finite_differences_data() {
    QTest::addColumn<int>("which");
    const char* names[] = {"mul_exp_div", "matmul_tanh", "log_softmax", "var_sqrt", "pow_sin", "max_where"};
    for (int i = 0; i < 6; ++i) QTest::newRow(names[i]) << i;
  }
  void gradients_match_finite_differences() {
    QFETCH(int, which);
    using F = std::function<Tensor(const V&)>;
    const F fs[] = {
        [](const V& x) { return x[0] * x[1] + x[0].exp() / x[1]; },
        [](const V& x) { return x[0].matmul(x[1]).tanh(); },
        [](const V& x) { return (x[0] * x[1]).log_softmax(1); },
        [](const V& x) { return x[0].var({1}, true).sqrt() + x[1].mean({1}, true); },
        [](const V& x) { return x[0].pow(x[1]) + x[1].sin(); },
        [](const V& x) { return Tensor::where(x[0].gt(x[1]), x[0] * 3.0, x[1]).max({1}, true) * x[1]; },
    };
    const F& f = fs[which];
    const tl::Shape shapes[2] = {{3, 4}, which == 1 ? tl::Shape{4, 4} : tl::Shape{3, 4}};
    std::vector<std::vector<double>> data = {values(12, 0.5, 2.0, 11 + which),
                                             values(size_t(tl::numel(shapes[1])), 0.5, 2.0, 29 + which)};
    const tl::Shape out_shape =
        f({Tensor::from_doubles(data[0], shapes[0]), Tensor::from_doubles(data[1], shapes[1])}).shape();
    const Tensor W = Tensor::from_doubles(values(size_t(tl::numel(out_shape)), -1, 1, 7), out_shape);
    auto loss = [&](const std::vector<std::vector<double>>& d, V* leaves) {
      V x = {Tensor::from_doubles(d[0], shapes[0]), Tensor::from_doubles(d[1], shapes[1])};
      if (leaves) {
        for (auto& t : x) t.requires_grad(true);
        *leaves = x;
      }
      return (f(x) * W).sum();
    };
    V leaves;
    Tensor l = loss(data, &leaves);
    QCOMPARE(l.dtype(), DType::f64);
    l.backward();
    const double h = 1e-5;
    for (size_t k = 0; k < 2; ++k) {
      const auto g = leaves[k].grad().to_doubles();
      QCOMPARE(leaves[k].grad().dtype(), DType::f64);
      for (size_t i = 0; i < data[k].size(); ++i) {
        auto plus = data, minus = data;
        plus[k][i] += h;
        minus[k][i] -= h;
        const double fd = (loss(plus, nullptr).to_doubles()[0] - loss(minus, nullptr).to_doubles()[0]) / (2 * h);
        QVERIFY2(std::fabs(g[i] - fd) <= 1e-7 * std::max(1.0, std::fabs(fd)),
                 ("input " + std::to_string(k) + " [" + std::to_string(i) + "]: backward " +
                  QByteArray::number(g[i], 'g', 17).toStdString() + ", finite differences " +
                  QByteArray::number(fd, 'g', 17).toStdString())
                     .c_str());
      }
    }
  }

  // float64 kernels spell double and its math functions; OpenCL's carry the
  // cl_khr_fp64 pragma, float32 kernels do not.
  void renders_double() {
    for (auto& name : fp64_devices()) {
      tl::Device& dev = tl::Registry::instance().get(name);
      auto source = [&](DType t) {
        Tensor x = t == DType::f64 ? Tensor::from_doubles({1, 2, 3}, {3}, name)
                                   : Tensor::from_data({1, 2, 3}, {3}, name);
        Tensor y = (x.exp() + 0.5).contiguous();
        auto plans = tl::schedule({y.node()}, false);
        std::string s;
        for (auto& p : plans) s += tl::render_kernel(p, dev).source;
        return s;
      };
      // The kernel itself, after the preamble (whose helpers are float).
      auto body = [](const std::string& s) { return s.substr(s.rfind("void E_")); };
      const std::string d = source(DType::f64), f = source(DType::f32);
      const bool opencl = dev.dialect().name == "opencl";
      QVERIFY2(d.find("double") != std::string::npos, d.c_str());
      QVERIFY2(body(d).find("0.5f") == std::string::npos && body(d).find("0.5") != std::string::npos, d.c_str());
      QCOMPARE(d.find("cl_khr_fp64") != std::string::npos, opencl);
      QVERIFY2(f.find("cl_khr_fp64") == std::string::npos, f.c_str());
      if (!opencl)
        QVERIFY2(body(d).find("expf(") == std::string::npos && body(d).find("exp(") != std::string::npos, d.c_str());
    }
  }

  void device_without_fp64_refuses() {
    static bool added = false;
    if (!added) {
      tl::Registry::instance().add(std::make_shared<NoFp64>(tl::Registry::instance().get("cpu")));
      added = true;
    }
    // float32 work runs there, so the refusal below is about the type. (The
    // wrapper's buffers belong to the CPU device: these graphs read none.)
    const std::string dev = "cpu-nofp64";
    QCOMPARE((Tensor::full({2}, 1.5, DType::f32, dev) * 2.0).to_vector(), (std::vector<float>{3, 3}));
    for (int attempt = 0; attempt < 2; ++attempt) {
      Tensor x = attempt == 0 ? Tensor::full({2}, 1e200, DType::f64, dev) * 3.0
                              : Tensor::full({2}, 1, DType::f32, dev).cast(DType::f64).sum();
      try {
        x.realize();
        QFAIL("float64 work ran on a device without fp64");
      } catch (const tl::DeviceError& e) {
        const std::string what = e.what();
        QVERIFY2(what.find("cpu-nofp64") != std::string::npos && what.find("float64") != std::string::npos &&
                     what.find("fp64") != std::string::npos,
                 what.c_str());
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestF64)
#include "test_f64.moc"
