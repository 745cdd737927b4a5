// The op-by-op suite: every case of tests/data/golden/ops.bin (written by
// scripts/make_golden.py from PyTorch/NumPy) runs on every available device and
// is compared with the reference; non-cpu devices are also compared with cpu.
// Further tests look at what the scheduler did (kernel counts, caching) and at
// the statistical creation ops.
#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "core/codegen/templates.h"
#include "core/error.h"
#include "core/profile.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "tests/gemm_layouts.h"
#include "tests/golden.h"
#include "tests/kernel_checks.h"
#include "tests/op_table.h"
#include "tests/testing.h"

using tl::Tensor;
using namespace tlops;
using tltest::first_difference;
using tltest::kernel_names;
using tltest::launches;
using tltest::ramp;

namespace {

const std::vector<tltest::GoldenCase>& golden_cases() {
  static const auto cases = tltest::read_golden(tltest::source_dir() + "/tests/data/golden/ops.bin");
  return cases;
}

// Each case computes the same value twice: fused (one GEMM kernel whose
// store applies the elementwise tail) and unfused (the product realized
// first, the tail as a kernel of its own). `product` is where the unfused
// run cuts; `fused_ops` are ops the fused GEMM kernel must list.
struct EpilogueCase {
  const char* name;
  std::function<Tensor(const Tensor& product)> tail;
  std::function<Tensor()> product;
  std::vector<std::string> fused_ops;
  std::function<double(size_t)> reference;  // double-precision value at flat index; may be empty
};

std::vector<EpilogueCase> epilogue_cases(const std::string& dev) {
  std::vector<EpilogueCase> cases;
  // matmul (5x37 @ 37x23) + bias broadcast along rows, then ReLU6.
  auto xs = ramp(5 * 37, 2.0f, -1.0f), ws = ramp(37 * 23, 0.9f, -0.4f), bs = ramp(23, 4.0f, -2.0f);
  Tensor x = Tensor::from_data(xs, {5, 37}, dev), w = Tensor::from_data(ws, {37, 23}, dev),
         b = Tensor::from_data(bs, {23}, dev);
  cases.push_back({"matmul_bias_relu6", [=](const Tensor& p) { return (p + b).relu6(); },
                   [=] { return x.matmul(w); }, {"GEMM", "ADD"}, [=](size_t i) {
                     size_t r = i / 23, c = i % 23;
                     double acc = 0;
                     for (size_t k = 0; k < 37; ++k) acc += double(xs[r * 37 + k]) * ws[k * 23 + c];
                     return std::clamp(acc + bs[c], 0.0, 6.0);
                   }});
  // conv 3x3 (2x3x9x9, 8 filters, pad 1) + batch-norm (running statistics) + ReLU.
  Tensor img = Tensor::from_data(ramp(2 * 3 * 9 * 9, 2.0f, -1.0f), {2, 3, 9, 9}, dev);
  Tensor filt = Tensor::from_data(ramp(8 * 3 * 3 * 3, 0.8f, -0.35f), {8, 3, 3, 3}, dev);
  Tensor gamma = Tensor::from_data(ramp(8, 1.5f, 0.5f), {8}, dev), beta = Tensor::from_data(ramp(8, 1.0f, -0.6f), {8}, dev);
  Tensor mean = Tensor::from_data(ramp(8, 0.4f, -0.2f), {8}, dev), var = Tensor::from_data(ramp(8, 2.0f, 0.3f), {8}, dev);
  tl::Conv2dOptions pad1;
  pad1.pad_h = pad1.pad_w = 1;
  cases.push_back({"conv_batchnorm_relu",
                   [=](const Tensor& p) mutable { return p.batch_norm(gamma, beta, mean, var, false).relu(); },
                   [=] { return img.conv2d(filt, Tensor(), pad1); }, {"GEMM", "MUL", "ADD", "MAX"}, nullptr});
  // batched matmul (2x17x19 @ 2x19x13) + a full residual + a per-row bias
  // broadcast along columns, then SiLU (which reads its input twice).
  auto as = ramp(2 * 17 * 19, 1.5f, -0.7f), cs = ramp(2 * 19 * 13, 1.2f, -0.5f), res = ramp(2 * 17 * 13, 3.0f, -1.5f),
       rb = ramp(17, 1.0f, -0.5f);
  Tensor a = Tensor::from_data(as, {2, 17, 19}, dev), c = Tensor::from_data(cs, {2, 19, 13}, dev),
         residual = Tensor::from_data(res, {2, 17, 13}, dev), row_bias = Tensor::from_data(rb, {17, 1}, dev);
  cases.push_back({"matmul_residual_silu", [=](const Tensor& p) { return (p + residual + row_bias).silu(); },
                   [=] { return a.matmul(c); }, {"GEMM", "ADD", "EXP"}, [=](size_t i) {
                     size_t bt = i / (17 * 13), r = i / 13 % 17, col = i % 13;
                     double acc = 0;
                     for (size_t k = 0; k < 19; ++k) acc += double(as[(bt * 17 + r) * 19 + k]) * cs[(bt * 19 + k) * 13 + col];
                     double v = acc + res[i] + rb[r];
                     return v / (1.0 + std::exp(-v));
                   }});
  // Layouts the other cases miss: B transposed (a linear layer, dot products
  // along K on PoCL) and A transposed (vectors along M, stored transposed).
  Tensor lx = Tensor::from_data(ramp(6 * 40, 2.0f, -1.0f), {6, 40}, dev),
         lw = Tensor::from_data(ramp(11 * 40, 0.6f, -0.3f), {11, 40}, dev), lb = Tensor::from_data(ramp(11), {11}, dev);
  cases.push_back({"linear_bias_gelu", [=](const Tensor& p) { return (p + lb).gelu(); },
                   [=] { return lx.matmul(lw.transpose()); }, {"GEMM", "ADD"}, nullptr});
  Tensor ta = Tensor::from_data(ramp(19 * 21, 1.0f, -0.5f), {19, 21}, dev),
         tc = Tensor::from_data(ramp(19 * 9, 1.4f, -0.6f), {19, 9}, dev);
  cases.push_back({"transposed_a_tanh", [=](const Tensor& p) { return (p * 0.5 + 0.25).tanh(); },
                   [=] { return ta.transpose().matmul(tc); }, {"GEMM", "MUL"}, nullptr});
  return cases;
}

}  // namespace

class TestOps : public QObject {
  Q_OBJECT

 private:
  std::map<std::string, Outcome> cpu_results_;

  static void add_device_rows() {
    QTest::addColumn<QString>("device");
    for (auto& d : tltest::available_devices()) QTest::newRow(d.c_str()) << QString::fromStdString(d);
  }

 private slots:
  void initTestCase() {
    auto devs = tltest::available_devices();
    QVERIFY2(!devs.empty(), "no device available");
    QCOMPARE(devs.front(), std::string("cpu"));
    std::string list;
    for (auto& d : devs) list += d + " ";
    qInfo("devices: %s; golden cases: %zu", list.c_str(), golden_cases().size());
  }

  // The CPU device's GEMM over every layout the GPU templates are checked on
  // (tests/gemm_layouts.h: operands read through transposed views, ragged
  // edges, batches, a fused epilogue), against double precision.
  void gemm_layouts_match_double_reference() {
    for (auto& c : tlops::gemm_layouts()) {
      const std::string why = tlops::check_gemm_layout_reference(c, "cpu");
      QVERIFY2(why.empty(), why.c_str());
    }
  }

  // The golden file and the C++ table describe the same cases.
  void table_matches_golden_file() {
    std::set<std::string> in_file;
    for (auto& c : golden_cases()) {
      in_file.insert(c.name);
      QVERIFY2(op_table().count(c.name), ("golden case without a C++ implementation: " + c.name).c_str());
    }
    for (auto& [name, fn] : op_table())
      QVERIFY2(in_file.count(name), ("C++ case missing from ops.bin (rerun make_golden.py): " + name).c_str());
  }

  // The comparator must be able to fail, or every green row below means nothing.
  void comparator_rejects_wrong_values() {
    std::vector<float> ref = {1.0f, -2.0f, 0.0f, NAN, INFINITY};
    QVERIFY(tltest::all_close(ref, ref, 1e-4, 1e-5));
    auto off = ref;
    off[1] = -2.001f;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    off = ref;
    off[3] = 0.0f;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    off = ref;
    off[4] = -INFINITY;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    off = ref;
    off[2] = NAN;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    QVERIFY(!tltest::all_close({1.0f}, ref, 1e-4, 1e-5));
    // and a real computation compared with a corrupted reference
    for (auto& gc : golden_cases()) {
      if (gc.name != "exp_rand") continue;
      Outcome o = run_case(gc, "cpu");
      auto bad = gc.outputs[0].data;
      bad[5] *= 1.001f;
      QVERIFY(tltest::all_close(o.values[0], gc.outputs[0].data, gc.rtol, gc.atol));
      QVERIFY(!tltest::all_close(o.values[0], bad, gc.rtol, gc.atol));
    }
  }

  // One test function per family: Qt's watchdog limits each function (all its
  // rows) to 5 minutes, and a failure in one family does not hide the others.
  void golden_creation_data() { golden_rows("creation"); }
  void golden_creation() { golden(); }
  void golden_unary_data() { golden_rows("unary"); }
  void golden_unary() { golden(); }
  void golden_binary_data() { golden_rows("binary"); }
  void golden_binary() { golden(); }
  void golden_reduce_data() { golden_rows("reduce"); }
  void golden_reduce() { golden(); }
  void golden_movement_data() { golden_rows("movement"); }
  void golden_movement() { golden(); }
  void golden_matmul_data() { golden_rows("matmul"); }
  void golden_matmul() { golden(); }
  void golden_conv_pool_data() { golden_rows("conv_pool"); }
  void golden_conv_pool() { golden(); }
  void golden_norm_softmax_data() { golden_rows("norm_softmax"); }
  void golden_norm_softmax() { golden(); }

  // Regression: the index simplifier once assumed loaded integers were
  // non-negative and folded -1 < 0 to false.
  void int_comparisons_with_negative_values() {
    for (auto& d : tltest::available_devices()) {
      Tensor idx = Tensor::from_ints({-1, 2, 0, -7}, {4}, d);
      Tensor zero = Tensor::scalar(0, tl::DType::i32, d);
      QCOMPARE(idx.lt(zero).to_ints(), (std::vector<int32_t>{1, 0, 0, 1}));
      QCOMPARE(idx.gt(zero).to_ints(), (std::vector<int32_t>{0, 1, 0, 0}));
      QCOMPARE((idx.cast(tl::DType::i32) + 3).to_ints(), (std::vector<int32_t>{2, 5, 3, -4}));
    }
  }

  // A reduction over an axis of no elements gives the fold's start: a sum 0,
  // a maximum the lowest value, a mean NaN (0/0); over several axes too,
  // where the kernel's nested loops once divided by the empty axis (a fuzzed
  // ReduceMax over (3, 2, 0)). A product with K = 0 is zeros.
  void reductions_over_an_empty_axis() {
    const float inf = INFINITY;
    for (auto& d : tltest::available_devices()) {
      Tensor x = Tensor::zeros({3, 2, 0}, tl::DType::f32, d);
      QCOMPARE(x.sum({0, 1, 2}, true).shape(), (tl::Shape{1, 1, 1}));
      QCOMPARE(x.sum({0, 1, 2}, true).to_vector(), (std::vector<float>{0}));
      QCOMPARE(x.max({0, 1, 2}, true).to_vector(), (std::vector<float>{-inf}));
      QCOMPARE(x.max({1, 2}).shape(), (tl::Shape{3}));
      QCOMPARE(x.max({1, 2}).to_vector(), (std::vector<float>{-inf, -inf, -inf}));
      QCOMPARE(x.min({0, 2}).to_vector(), (std::vector<float>{inf, inf}));
      QCOMPARE(x.sum({2}).to_vector(), (std::vector<float>(6, 0.0f)));
      QCOMPARE((x.sum({0, 2}) + 1.5).to_vector(), (std::vector<float>{1.5f, 1.5f}));
      auto mean = x.mean({1, 2}).to_vector();
      QCOMPARE(mean.size(), size_t(3));
      for (float m : mean) QVERIFY(std::isnan(m));
      QCOMPARE(x.sum({0, 1}).shape(), (tl::Shape{0}));  // nothing reduced away from the empty axis
      Tensor ints = Tensor::zeros({2, 0, 4}, tl::DType::i32, d);
      QCOMPARE(ints.max({0, 1}).to_ints(), (std::vector<int32_t>(4, std::numeric_limits<int32_t>::min())));
      QCOMPARE(ints.sum({1}).to_ints(), (std::vector<int32_t>(8, 0)));
      Tensor a = Tensor::zeros({3, 0}, tl::DType::f32, d), b = Tensor::zeros({0, 5}, tl::DType::f32, d);
      QCOMPARE(a.matmul(b).shape(), (tl::Shape{3, 5}));
      QCOMPARE(a.matmul(b).to_vector(), (std::vector<float>(15, 0.0f)));
    }
  }

  // An integer constant or pad fill beyond its type's range saturates, NaN
  // is 0 (ONNX's MaxPool of uint8 once padded with -3e38: a conversion to
  // an integer that is undefined, found by fuzz_onnx's sanitizers).
  void integer_constants_saturate() {
    const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
    for (auto& d : tltest::available_devices()) {
      QCOMPARE(Tensor::full({2}, 3e38, tl::DType::i32, d).to_ints(), (std::vector<int32_t>{hi, hi}));
      QCOMPARE(Tensor::full({1}, -1e300, tl::DType::i32, d).to_ints(), (std::vector<int32_t>{lo}));
      QCOMPARE(Tensor::full({1}, NAN, tl::DType::i32, d).to_ints(), (std::vector<int32_t>{0}));
      QCOMPARE(Tensor::full({1}, -2.7, tl::DType::i32, d).to_ints(), (std::vector<int32_t>{-2}));
      Tensor x = Tensor::from_ints({5, -6}, {2}, d);
      QCOMPARE(x.pad({{1, 1}}, -3e38).to_ints(), (std::vector<int32_t>{lo, 5, -6, lo}));
      QCOMPARE(x.pad({{0, 1}}, INFINITY).to_ints(), (std::vector<int32_t>{5, -6, hi}));
      QCOMPARE(Tensor::scalar(-INFINITY, tl::DType::f32, d).cast(tl::DType::i32).to_ints(), (std::vector<int32_t>{lo}));
      QCOMPARE(Tensor::scalar(NAN, tl::DType::f32, d).cast(tl::DType::i32).to_ints(), (std::vector<int32_t>{0}));
    }
  }

  void every_case_has_a_family() {
    for (auto& c : golden_cases()) QVERIFY2(!family(c.name).empty(), c.name.c_str());
  }

 private:
  static void golden_rows(const std::string& fam) {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    auto& cases = golden_cases();
    for (auto& d : tltest::available_devices())
      for (size_t i = 0; i < cases.size(); ++i)
        if (family(cases[i].name) == fam)
          QTest::newRow((cases[i].name + "@" + d).c_str()) << QString::fromStdString(d) << int(i);
  }

  void golden() {
    QFETCH(QString, device);
    QFETCH(int, index);
    const std::string dev = device.toStdString();
    const auto& c = golden_cases()[size_t(index)];
    QVERIFY2(op_table().count(c.name), "no C++ implementation for this case");
    Outcome o;
    try {
      o = run_case(c, dev);
    } catch (const std::exception& e) {
      QFAIL((std::string("threw: ") + e.what()).c_str());
    }
    QCOMPARE(o.values.size(), c.outputs.size());
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const auto& ref = c.outputs[k];
      QVERIFY2(o.shapes[k] == ref.shape, ("output " + std::to_string(k) + " shape " + tl::shape_str(o.shapes[k]) +
                                          ", expected " + tl::shape_str(ref.shape))
                                             .c_str());
      std::string why;
      QVERIFY2(tltest::all_close(o.values[k], ref.data, c.rtol, c.atol, &why),
               ("output " + std::to_string(k) + " vs reference: " + why).c_str());
    }
    if (dev == "cpu") {
      cpu_results_[c.name] = o;
      return;
    }
    // Same case on cpu, compared by the same rule (cpu ran first unless narrowed).
    auto it = cpu_results_.find(c.name);
    Outcome cpu = it != cpu_results_.end() ? it->second : run_case(c, "cpu");
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      std::string why;
      QVERIFY2(tltest::all_close(o.values[k], cpu.values[k], c.rtol, c.atol, &why),
               ("output " + std::to_string(k) + " vs cpu: " + why).c_str());
    }
  }

  // ---- statistical creation ops and dropout ----
 private slots:
  void random_creation_data() { add_device_rows(); }
  void random_creation() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t n = 100000;
    tl::Generator g1(1234), g2(1234), g3(99);
    auto u = Tensor::rand({n}, g1, dev).to_vector();
    auto u_again = Tensor::rand({n}, g2, dev).to_vector();
    auto u_other = Tensor::rand({n}, g3, dev).to_vector();
    QCOMPARE(int64_t(u.size()), n);
    QVERIFY(u == u_again);
    QVERIFY(u != u_other);
    double mean = 0, sq = 0;
    float lo = 1, hi = 0;
    for (float v : u) mean += v, sq += double(v) * v, lo = std::min(lo, v), hi = std::max(hi, v);
    mean /= n;
    double var = sq / n - mean * mean;
    QVERIFY2(lo >= 0.0f && hi < 1.0f, "rand outside [0, 1)");
    QVERIFY2(std::fabs(mean - 0.5) < 0.01, qPrintable(QString("rand mean %1").arg(mean)));
    QVERIFY2(std::fabs(var - 1.0 / 12) < 0.005, qPrintable(QString("rand var %1").arg(var)));

    tl::Generator g4(7), g5(7);
    auto z = Tensor::randn({n}, g4, dev).to_vector();
    QVERIFY(z == Tensor::randn({n}, g5, dev).to_vector());
    mean = 0, sq = 0;
    for (float v : z) mean += v, sq += double(v) * v;
    mean /= n;
    var = sq / n - mean * mean;
    QVERIFY2(std::fabs(mean) < 0.02, qPrintable(QString("randn mean %1").arg(mean)));
    QVERIFY2(std::fabs(std::sqrt(var) - 1.0) < 0.02, qPrintable(QString("randn std %1").arg(std::sqrt(var))));

    tl::Generator g6(5);
    auto w = Tensor::uniform({n}, -3.0, 5.0, g6, dev).to_vector();
    mean = std::accumulate(w.begin(), w.end(), 0.0) / n;
    QVERIFY(*std::min_element(w.begin(), w.end()) >= -3.0f && *std::max_element(w.begin(), w.end()) < 5.0f);
    QVERIFY2(std::fabs(mean - 1.0) < 0.05, qPrintable(QString("uniform mean %1").arg(mean)));
  }

  void same_seed_same_values_across_devices() {
    auto devs = tltest::available_devices();
    tl::Generator ref_gen(42);
    auto ref = Tensor::randn({257}, ref_gen, "cpu").to_vector();
    for (auto& d : devs) {
      tl::Generator g(42);
      QVERIFY2(Tensor::randn({257}, g, d).to_vector() == ref, d.c_str());
    }
  }

  void dropout_data() { add_device_rows(); }
  void dropout() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t n = 20000;
    auto data = ramp(size_t(n), 2.0f, 0.5f);  // all positive, so a zero means dropped
    Tensor x = Tensor::from_data(data, {n}, dev);
    tl::Generator g(3);
    QVERIFY(x.dropout(0.0, true, g).to_vector() == data);
    QVERIFY(x.dropout(0.5, false, g).to_vector() == data);
    auto y = x.dropout(0.5, true, g).to_vector();
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y[size_t(i)] == 0.0f) {
        ++dropped;
        continue;
      }
      QVERIFY2(std::fabs(y[size_t(i)] - 2.0f * data[size_t(i)]) <= 1e-6f * std::fabs(data[size_t(i)]) + 1e-6f,
               qPrintable(QString("kept value %1 not scaled by 2 (was %2)").arg(y[size_t(i)]).arg(data[size_t(i)])));
    }
    double frac = double(dropped) / double(n);
    QVERIFY2(std::fabs(frac - 0.5) < 0.02, qPrintable(QString("dropped fraction %1").arg(frac)));
    tl::Generator a(11), b(11);
    QVERIFY(x.dropout(0.3, true, a).to_vector() == x.dropout(0.3, true, b).to_vector());
  }

  // ---- laziness, fusion, caching ----
  void elementwise_chain_is_one_kernel_data() { add_device_rows(); }
  void elementwise_chain_is_one_kernel() {
    QFETCH(QString, device);
    auto data = ramp(64, 3.0f, 0.1f);
    Tensor x = Tensor::from_data(data, {8, 8}, device.toStdString());
    x.realize();
    Tensor y;
    auto recs = launches([&] { (y = ((x * 2.0 + 1.0).exp().sqrt() - 3.0)).realize(); });
    QVERIFY2(recs.size() == 1, ("kernels: " + kernel_names(recs)).c_str());
    auto v = y.to_vector();
    for (size_t i = 0; i < v.size(); ++i)
      QVERIFY(std::fabs(v[i] - (std::sqrt(std::exp(2.0 * data[i] + 1.0)) - 3.0)) < 1e-4 * std::exp(data[i] + 0.5));
  }

  // A product whose right operand has no batch (a Linear over a sequence)
  // is one GEMM over all the left rows, for a stored left operand and for
  // views of one whose rows lie at one stride: sequence-first ((L, 1, E)
  // from (1, L, E), as attention's projections in exported transformers) and
  // channels-last ((1, H, W, C) from (1, C, H, W), ConvNeXt's pointwise
  // layers): GEMM_1_<rows>_..., not one product per batch; the values are
  // the per-batch products'.
  void batched_rows_are_one_gemm_data() { add_device_rows(); }
  void batched_rows_are_one_gemm() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const auto bv = ramp(8 * 5, -0.2f, 0.03f);
    const Tensor b = Tensor::from_data(bv, {8, 5}, dev).realize();
    for (const int layout : {0, 1, 2}) {
      const auto sv = ramp(12 * 8, 0.5f, 0.01f);
      const tl::Shape stored_shape = layout == 0 ? tl::Shape{3, 4, 8} : layout == 1 ? tl::Shape{1, 12, 8} : tl::Shape{1, 8, 3, 4};
      const Tensor stored = Tensor::from_data(sv, stored_shape, dev).realize();
      const Tensor a = layout == 0 ? stored : layout == 1 ? stored.permute({1, 0, 2}) : stored.permute({0, 2, 3, 1});
      // row r of the product reads a's r-th row of 8 values
      auto a_at = [&](int64_t r, int64_t k) { return double(sv[size_t(layout == 2 ? k * 12 + r : r * 8 + k)]); };
      Tensor y;
      auto recs = launches([&] { (y = a.matmul(b)).realize(); });
      QVERIFY2(kernel_names(recs).find("GEMM_1_12_5_8") != std::string::npos, kernel_names(recs).c_str());
      tl::Shape want_shape = a.shape();
      want_shape.back() = 5;
      QCOMPARE(y.shape(), want_shape);
      const auto got = y.to_vector();
      for (int64_t r = 0; r < 12; ++r)
        for (int64_t c = 0; c < 5; ++c) {
          double want = 0;
          for (int64_t k = 0; k < 8; ++k) want += a_at(r, k) * double(bv[size_t(k * 5 + c)]);
          QVERIFY2(std::fabs(got[size_t(r * 5 + c)] - want) <= 1e-5 * (1 + std::fabs(want)),
                   qPrintable(QString("layout %1, row %2 col %3: %4, want %5")
                                  .arg(layout).arg(r).arg(c).arg(got[size_t(r * 5 + c)]).arg(want)));
        }
    }
  }

  void softmax_is_at_most_three_kernels_data() { add_device_rows(); }
  void softmax_is_at_most_three_kernels() {
    QFETCH(QString, device);
    Tensor x = Tensor::from_data(ramp(4 * 33), {4, 33}, device.toStdString());
    x.realize();
    Tensor y;
    auto recs = launches([&] { (y = x.softmax(-1)).realize(); });
    QVERIFY2(!recs.empty() && recs.size() <= 3, ("kernels: " + kernel_names(recs)).c_str());
    auto v = y.to_vector();
    for (int r = 0; r < 4; ++r)
      QVERIFY(std::fabs(std::accumulate(v.begin() + r * 33, v.begin() + (r + 1) * 33, 0.0) - 1.0) < 1e-5);
  }

  void nothing_runs_until_read_data() { add_device_rows(); }
  void nothing_runs_until_read() {
    QFETCH(QString, device);
    Tensor x = Tensor::from_data(ramp(24), {2, 3, 4}, device.toStdString());
    x.realize();
    Tensor y;
    auto recs = launches([&] { y = (x * x).sum({1}).exp().permute({1, 0}) + 1.0; });
    QVERIFY2(recs.empty(), ("ran before any read: " + kernel_names(recs)).c_str());
    std::vector<float> v;
    recs = launches([&] { v = y.to_vector(); });
    QVERIFY(!recs.empty());
    QCOMPARE(v.size(), size_t(8));
    // a second read of a realized tensor runs nothing
    recs = launches([&] { v = y.to_vector(); });
    QVERIFY2(recs.empty(), ("re-ran on second read: " + kernel_names(recs)).c_str());
  }

  void second_run_compiles_nothing_data() { add_device_rows(); }
  void second_run_compiles_nothing() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    auto compute = [&] {
      Tensor a = Tensor::from_data(ramp(6 * 5), {6, 5}, dev);
      Tensor b = Tensor::from_data(ramp(5 * 3, 0.5f), {5, 3}, dev);
      return (a.matmul(b).relu() + 0.25).log_softmax(-1).sum({0});
    };
    std::vector<float> first, second;
    auto recs1 = launches([&] { first = compute().to_vector(); });
    auto recs2 = launches([&] { second = compute().to_vector(); });
    QVERIFY(!recs1.empty());
    QCOMPARE(recs2.size(), recs1.size());
    QVERIFY(first == second);
    for (size_t i = 0; i < recs2.size(); ++i) {
      QVERIFY2(recs2[i].kernel->cache_hit || recs2[i].kernel == recs1[i].kernel,
               ("recompiled on the second run: " + recs2[i].kernel->name).c_str());
      QCOMPARE(recs2[i].kernel->source, recs1[i].kernel->source);
      QVERIFY2(recs2[i].replayed, recs2[i].kernel->name.c_str());  // same structure: the plan is replayed
    }
  }

  // ---- GEMM epilogues: elementwise consumers written by the GEMM's store ----

  void gemm_epilogue_matches_unfused_data() { add_device_rows(); }
  void gemm_epilogue_matches_unfused() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    for (auto& c : epilogue_cases(dev)) {
      std::vector<float> fused, unfused;
      auto recs = launches([&] { fused = c.tail(c.product()).to_vector(); });
      QVERIFY2(recs.size() <= 2, (std::string(c.name) + ": kernels " + kernel_names(recs)).c_str());
      const auto& gemm = *recs.back().kernel;
      QVERIFY2(gemm.name.rfind("GEMM", 0) == 0, (std::string(c.name) + ": last kernel " + gemm.name).c_str());
      for (auto& op : c.fused_ops)
        QVERIFY2(std::find(gemm.ops.begin(), gemm.ops.end(), op) != gemm.ops.end(),
                 (std::string(c.name) + ": " + gemm.name + " does not list " + op).c_str());
      recs = launches([&] {
        Tensor p = c.product();
        p.realize();
        unfused = c.tail(p).to_vector();
      });
      QVERIFY2(recs.size() >= 2 && recs.back().kernel->name.rfind("GEMM", 0) != 0,
               (std::string(c.name) + ": unfused kernels " + kernel_names(recs)).c_str());
      QCOMPARE(fused.size(), unfused.size());
      double scale = 1e-3;
      for (float v : unfused) scale = std::max(scale, double(std::fabs(v)));
      for (size_t i = 0; i < fused.size(); ++i) {
        QVERIFY2(std::fabs(fused[i] - unfused[i]) <= 1e-5 * scale,
                 (std::string(c.name) + " at " + std::to_string(i) + ": fused " + std::to_string(fused[i]) +
                  " unfused " + std::to_string(unfused[i])).c_str());
        if (c.reference)
          QVERIFY2(std::fabs(fused[i] - c.reference(i)) <= 1e-5 * scale,
                   (std::string(c.name) + " at " + std::to_string(i) + ": fused " + std::to_string(fused[i]) +
                    " reference " + std::to_string(c.reference(i))).c_str());
      }
    }
  }

  // A convolution's bias and ReLU read by a 3x3 convolution (whose im2col
  // reads each element 9 times through an Expand) are written by the first
  // GEMM's store, once: the im2col kernel copies finished values. Values as
  // with the ReLU realized on its own.
  void expanded_epilogue_is_stored_once_data() { add_device_rows(); }
  void expanded_epilogue_is_stored_once() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    Tensor x = Tensor::from_data(ramp(2 * 3 * 9 * 9, 1.3f, -0.6f), {2, 3, 9, 9}, dev);
    Tensor w1 = Tensor::from_data(ramp(5 * 3, 0.9f, -0.4f), {5, 3, 1, 1}, dev);
    Tensor b1 = Tensor::from_data(ramp(5, 1.0f, -0.5f), {5}, dev);
    Tensor w2 = Tensor::from_data(ramp(4 * 5 * 9, 0.8f, -0.4f), {4, 5, 3, 3}, dev);
    for (Tensor* t : {&x, &w1, &b1, &w2}) t->realize();
    tl::Conv2dOptions same;
    same.pad_h = same.pad_w = 1;
    std::vector<float> fused, unfused;
    auto recs = launches([&] { fused = x.conv2d(w1, b1).relu().conv2d(w2, Tensor(), same).to_vector(); });
    bool relu_in_gemm = false, relu_elsewhere = false;
    for (const auto& r : recs) {
      const auto& ops = r.kernel->ops;
      const bool relu = std::find(ops.begin(), ops.end(), "MAX") != ops.end();
      (r.kernel->name.rfind("GEMM", 0) == 0 ? relu_in_gemm : relu_elsewhere) |= relu;
    }
    QVERIFY2(relu_in_gemm && !relu_elsewhere, ("kernels: " + kernel_names(recs)).c_str());
    Tensor h = x.conv2d(w1, b1).relu();
    h.realize();
    unfused = h.conv2d(w2, Tensor(), same).to_vector();
    QCOMPARE(fused.size(), size_t(2 * 4 * 9 * 9));
    const std::string bad = first_difference(fused, unfused);
    QVERIFY2(bad.empty(), bad.c_str());
  }

  // The same for an epilogue that is then moved: two convolutions' batch
  // norm (scale and shift per channel) and ReLU, concatenated along the
  // channels (pads and an add), as Inception and SqueezeNet do. Each GEMM's
  // store computes its branch once; the concatenation only copies (before,
  // it recomputed both branches' batch norms at every element). Values as
  // with each branch realized on its own.
  void moved_epilogue_is_stored_once_data() { add_device_rows(); }
  void moved_epilogue_is_stored_once() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    Tensor x = Tensor::from_data(ramp(2 * 3 * 7 * 6, 1.1f, -0.5f), {2, 3, 7, 6}, dev);
    Tensor w1 = Tensor::from_data(ramp(5 * 3, 0.9f, -0.4f), {5, 3, 1, 1}, dev);
    Tensor w2 = Tensor::from_data(ramp(4 * 3 * 9, 0.8f, -0.4f), {4, 3, 3, 3}, dev);
    Tensor s1 = Tensor::from_data(ramp(5, 0.7f, 0.2f), {1, 5, 1, 1}, dev);
    Tensor t1 = Tensor::from_data(ramp(5, 1.0f, -0.5f), {1, 5, 1, 1}, dev);
    Tensor s2 = Tensor::from_data(ramp(4, -0.6f, 1.1f), {1, 4, 1, 1}, dev);
    Tensor t2 = Tensor::from_data(ramp(4, 0.3f, -0.2f), {1, 4, 1, 1}, dev);
    for (Tensor* t : {&x, &w1, &w2, &s1, &t1, &s2, &t2}) t->realize();
    tl::Conv2dOptions same;
    same.pad_h = same.pad_w = 1;
    auto branches = [&] {
      return std::vector<Tensor>{(x.conv2d(w1, Tensor()) * s1 + t1).relu(),
                                 (x.conv2d(w2, Tensor(), same) * s2 + t2).relu()};
    };
    std::vector<float> fused, unfused;
    auto recs = launches([&] { fused = Tensor::cat(branches(), 1).to_vector(); });
    int gemms_with_both = 0;
    bool elsewhere = false;
    for (const auto& r : recs) {
      const auto& ops = r.kernel->ops;
      const bool mul = std::find(ops.begin(), ops.end(), "MUL") != ops.end();
      const bool max = std::find(ops.begin(), ops.end(), "MAX") != ops.end();
      if (r.kernel->name.rfind("GEMM", 0) == 0)
        gemms_with_both += mul && max;
      else
        elsewhere = elsewhere || mul || max;
    }
    QVERIFY2(gemms_with_both == 2 && !elsewhere, ("kernels: " + kernel_names(recs)).c_str());
    auto parts = branches();
    for (auto& t : parts) t.realize();
    unfused = Tensor::cat(parts, 1).to_vector();
    QCOMPARE(fused.size(), size_t(2 * 9 * 7 * 6));
    const std::string bad = first_difference(fused, unfused);
    QVERIFY2(bad.empty(), bad.c_str());
  }

  // A realized left operand (a layer's weights) is packed once, with its
  // buffer, and read packed by every later product: products with the same
  // weights, run again and in other shapes, and with other weights of the
  // same shape must each still give their own values. K = 300 spans two of
  // the CPU template's K blocks; M = 40 and N = 70 leave ragged tiles.
  void packed_weights_are_kept_per_buffer_data() { add_device_rows(); }
  void packed_weights_are_kept_per_buffer() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t m = 40, k = 300, n = 70, n2 = 20;
    Tensor w1 = Tensor::from_data(ramp(m * k, 0.013f, -0.9f), {m, k}, dev);
    Tensor w2 = Tensor::from_data(ramp(m * k, -0.007f, 0.5f), {m, k}, dev);
    Tensor x = Tensor::from_data(ramp(k * n, 0.021f, -0.7f), {k, n}, dev);
    Tensor x2 = Tensor::from_data(ramp(k * n2, 0.05f, -0.3f), {k, n2}, dev);
    for (Tensor* t : {&w1, &w2, &x, &x2}) t->realize();
    Tensor w3 = w1 * 2.0;  // computed, then realized: a buffer of its own
    w3.realize();
    auto check = [&](const Tensor& y, const Tensor& w, const Tensor& b, int64_t cols, const char* what) {
      auto yv = y.to_vector(), wv = w.to_vector(), bv = b.to_vector();
      QCOMPARE(yv.size(), size_t(m * cols));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          double ref = 0;
          for (int64_t p = 0; p < k; ++p) ref += double(wv[size_t(i * k + p)]) * bv[size_t(p * cols + j)];
          const float got = yv[size_t(i * cols + j)];
          QVERIFY2(std::fabs(got - ref) <= 1e-4 * std::max(1.0, std::fabs(ref)),
                   (std::string(what) + " at (" + std::to_string(i) + ", " + std::to_string(j) +
                    "): " + std::to_string(got) + " vs " + std::to_string(ref)).c_str());
        }
    };
    for (int round = 0; round < 3; ++round) {
      Tensor y1 = w1.matmul(x), y2 = w2.matmul(x), y3 = w3.matmul(x), y4 = w1.matmul(x2);
      if (round == 1) {  // one realize for all four: one plan reads three packed copies
        tl::realize_nodes({y1.node(), y2.node(), y3.node(), y4.node()});
      }
      check(y1, w1, x, n, "w1 @ x");
      check(y2, w2, x, n, "w2 @ x");
      check(y3, w3, x, n, "(2 w1) @ x");
      check(y4, w1, x2, n2, "w1 @ x2");
    }
    // A weight dropped and another of its size made: the pool hands the
    // same buffer out again, and its old packed copy must not be used.
    for (int round = 0; round < 4; ++round) {
      Tensor w = Tensor::from_data(ramp(m * k, 0.011f * float(round + 1), 0.3f - 0.2f * float(round)), {m, k}, dev);
      w.realize();
      check(w.matmul(x), w, x, n, ("a new weight, round " + std::to_string(round)).c_str());
    }
  }

  // The CPU template's threads take strips along the side of C that has the
  // work: a 16 x 12544 product (an early 1x1 convolution) is cut along its
  // columns, a 320 x 49 one (a late one) along its rows; only a constant A
  // with more rows than the thin path reads in place asks for a packed copy.
  // A 14x14 map's 196 columns are cut for a constant A of up to 256 rows and
  // K over 128 (each thread then packs only its own columns of B), not for a
  // computed A, a short K or more rows.
  void cpu_gemm_splits_where_the_work_is() {
    auto shape = [](int64_t m, int64_t n, int64_t k, bool constant) {
      tl::GemmShape s;
      s.m = m, s.n = n, s.k = k;
      s.a_strides[1] = k, s.a_strides[2] = 1, s.b_strides[1] = n, s.b_strides[2] = 1;
      s.a_constant = constant;
      return s;
    };
    tl::TemplateKernel wide = tl::render_gemm_c(shape(16, 12544, 32, true), "wide");
    QVERIFY(wide.source.find(".split = 1,") != std::string::npos);
    QVERIFY2(wide.global[0] >= 12544 / 32, std::to_string(wide.global[0]).c_str());
    QVERIFY(!wide.packed.empty() && wide.packed[0].operand == 1);
    QVERIFY(wide.packed[0].bytes >= int64_t(64 + 16 * 32 * sizeof(float)));
    tl::TemplateKernel tall = tl::render_gemm_c(shape(320, 49, 1152, true), "tall");
    QVERIFY(tall.source.find(".split = 0,") != std::string::npos);
    QVERIFY2(tall.global[0] >= 320 / 16, std::to_string(tall.global[0]).c_str());
    QVERIFY(tl::render_gemm_c(shape(320, 49, 1152, false), "computed").packed.empty());
    QVERIFY(tl::render_gemm_c(shape(3, 49, 1152, true), "thin").packed.empty());
    QVERIFY(tall.packed[0].key != tl::render_gemm_c(shape(320, 49, 1000, true), "other").packed[0].key);
    auto split = [&](int64_t m, int64_t n, int64_t k, bool constant) {
      const std::string src = tl::render_gemm_c(shape(m, n, k, constant), "map").source;
      if (src.find(".split = 1,") != std::string::npos) return "cols";
      return src.find(".split = 0,") != std::string::npos ? "rows" : "?";
    };
    QCOMPARE(split(128, 196, 576, true), "cols");
    QCOMPARE(split(256, 169, 512, true), "cols");
    QCOMPARE(split(128, 196, 576, false), "rows");
    QCOMPARE(split(128, 196, 128, true), "rows");
    QCOMPARE(split(384, 196, 768, true), "rows");
    QCOMPARE(split(1280, 49, 160, true), "rows");
  }

  // A pointwise convolution block (1x1 conv, batch-norm, ReLU6) is one kernel:
  // the GEMM, whose store applies the batch-norm and the activation.
  void conv_bn_relu6_block_is_one_kernel_data() { add_device_rows(); }
  void conv_bn_relu6_block_is_one_kernel() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    Tensor x = Tensor::from_data(ramp(16 * 7 * 7, 2.0f, -1.0f), {1, 16, 7, 7}, dev);
    Tensor w = Tensor::from_data(ramp(24 * 16, 0.8f, -0.35f), {24, 16, 1, 1}, dev);
    Tensor gamma = Tensor::from_data(ramp(24, 1.5f, 0.5f), {24}, dev), beta = Tensor::from_data(ramp(24, 1.0f, -0.6f), {24}, dev);
    Tensor mean = Tensor::from_data(ramp(24, 0.4f, -0.2f), {24}, dev), var = Tensor::from_data(ramp(24, 2.0f, 0.3f), {24}, dev);
    for (Tensor* t : {&x, &w, &gamma, &beta, &mean, &var}) t->realize();
    Tensor y;
    auto recs = launches([&] { (y = x.conv2d(w).batch_norm(gamma, beta, mean, var, false).relu6()).realize(); });
    QVERIFY2(recs.size() == 1, ("kernels: " + kernel_names(recs)).c_str());
    const auto& ops = recs[0].kernel->ops;
    std::string listed;
    for (auto& o : ops) listed += o + " ";
    QVERIFY2(recs[0].kernel->name.rfind("GEMM", 0) == 0 && ops.front() == "GEMM", listed.c_str());
    for (const char* op : {"MUL", "ADD", "MAX"})
      QVERIFY2(std::find(ops.begin(), ops.end(), op) != ops.end(), (std::string(op) + " missing in " + listed).c_str());
    // The values: batch-norm and ReLU6 applied to the 1x1 convolution.
    auto xv = x.to_vector(), wv = w.to_vector(), g = gamma.to_vector(), bt = beta.to_vector(), mu = mean.to_vector(),
         vr = var.to_vector(), out = y.to_vector();
    QCOMPARE(out.size(), size_t(24 * 49));
    for (size_t o = 0; o < 24; ++o)
      for (size_t p = 0; p < 49; ++p) {
        double acc = 0;
        for (size_t ci = 0; ci < 16; ++ci) acc += double(wv[o * 16 + ci]) * xv[ci * 49 + p];
        double ref = std::clamp((acc - mu[o]) / std::sqrt(vr[o] + 1e-5) * g[o] + bt[o], 0.0, 6.0);
        QVERIFY2(std::fabs(out[o * 49 + p] - ref) < 1e-4, (std::to_string(out[o * 49 + p]) + " vs " + std::to_string(ref)).c_str());
      }
  }

  // A compile error names the problem, carries the compiler's log, and the
  // session keeps working afterwards.
  void compile_error_is_reported_data() { add_device_rows(); }
  void compile_error_is_reported() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    auto& d = tl::Registry::instance().get(dev);
    bool threw = false;
    try {
      d.compile("tl_broken_kernel", "this is not C at all { int x = ; }\n");
    } catch (const tl::CompileError& e) {
      threw = true;
      QVERIFY2(!e.log.empty(), "CompileError without a build log");
      QVERIFY(e.source.find("not C at all") != std::string::npos);
      QVERIFY(std::string(e.what()).size() > 0);
    }
    QVERIFY2(threw, "bad source compiled without a CompileError");
    Tensor x = Tensor::from_data({1, 2, 3}, {3}, dev);
    auto v = (x * 3.0 + 1.0).to_vector();
    QVERIFY((v == std::vector<float>{4, 7, 10}));
  }
};

QTEST_GUILESS_MAIN(TestOps)
#include "test_ops.moc"
