// The kernel autotuner (issue 12, item 4; core/tune.h) on the CPU device:
// every candidate rendering of a GEMM computes the product (checked against a
// double reference, for large, skinny and batched shapes and a fused
// epilogue); the tuner keeps the candidate its clock calls fastest (a fake
// clock, so nothing here depends on timing); the choice is stored in the
// kernel cache and a fresh process reads it without searching (counted); and
// with TINYLENS_TUNE unset nothing is searched and the default rendering runs.
// The tiled template that OpenCL GPUs get offers its other tiles (run on PoCL
// with TINYLENS_GEMM=tiled); CUDA's offers the same kind of list.
#include <QtTest/QtTest>

#include <cmath>
#include <map>
#include <set>

#include "tests/testing.h"

#include "core/profile.h"
#include "core/realize.h"
#include "core/runtime/cache.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "core/tune.h"

using namespace tl;

namespace {

struct Case {
  const char* name;
  int64_t batch, m, n, k;
  bool epilogue;  // relu(A @ B + bias[row]) + residual, fused into the GEMM's store
};

// A (batch x m x k, or m x k when batch == 1: a weight), B (batch x k x n).
struct Data {
  std::vector<float> a, b, bias, residual;
};

Data make_data(const Case& c) {
  Generator gen(uint64_t(c.m * 131 + c.n * 17 + c.k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Data d;
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (auto& x : v) x = normal(gen.engine());
  };
  fill(d.a, size_t(c.batch * c.m * c.k));
  fill(d.b, size_t(c.batch * c.k * c.n));
  fill(d.bias, size_t(c.m));
  fill(d.residual, size_t(c.batch * c.m * c.n));
  return d;
}

// The reference in double, and the sum of |a||b| that bounds float32's
// rounding of each element.
void reference(const Case& c, const Data& d, std::vector<double>& ref, std::vector<double>& scale) {
  ref.assign(size_t(c.batch * c.m * c.n), 0.0);
  scale.assign(ref.size(), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double x = double(d.a[size_t((b * c.m + i) * c.k + p)]) * d.b[size_t((b * c.k + p) * c.n + j)];
          s += x, mag += std::fabs(x);
        }
        const size_t at = size_t((b * c.m + i) * c.n + j);
        if (c.epilogue) {
          s = std::max(0.0, s + d.bias[size_t(i)]) + d.residual[at];
          mag += std::fabs(d.bias[size_t(i)]) + std::fabs(d.residual[at]);
        }
        ref[at] = s, scale[at] = mag;
      }
}

struct Run {
  std::vector<float> values;
  std::shared_ptr<const KernelInfo> gemm;  // the GEMM kernel's description
  size_t searches = 0, compiler_runs = 0;  // during this run
};

// One realize of the case on the CPU device as a new process would do it:
// nothing compiled in memory, the disk cache (kernels and tuning choices) in
// `cache_home`.
Run run_case(const Case& c, const Data& d, const QString& cache_home, const std::string& device = "cpu") {
  qputenv("XDG_CACHE_HOME", cache_home.toUtf8());
  forget_compiled_kernels();
  const Shape as = c.batch == 1 ? Shape{c.m, c.k} : Shape{c.batch, c.m, c.k};
  const Shape bs = c.batch == 1 ? Shape{c.k, c.n} : Shape{c.batch, c.k, c.n};
  const Shape cs = c.batch == 1 ? Shape{c.m, c.n} : Shape{c.batch, c.m, c.n};
  Tensor a = Tensor::from_data(d.a, as, device).realize();
  Tensor b = Tensor::from_data(d.b, bs, device).realize();
  Tensor out = a.matmul(b);
  if (c.epilogue) {
    Tensor bias = Tensor::from_data(d.bias, {c.m, 1}, device).realize();
    Tensor residual = Tensor::from_data(d.residual, cs, device).realize();
    out = (out + bias).relu() + residual;
  }
  Run run;
  const size_t searches = tune_searches(), compiles = compiler_runs();
  ProfileCapture capture;
  out.realize();
  run.searches = tune_searches() - searches;
  run.compiler_runs = compiler_runs() - compiles;
  for (auto& r : capture.records())
    if (r.kernel->name.rfind("GEMM_", 0) == 0) run.gemm = r.kernel;
  run.values = out.to_vector();
  return run;
}

// Every element within float32's rounding of the reference.
bool matches(const Case& c, const Data& d, const std::vector<float>& got, QString* why) {
  std::vector<double> ref, scale;
  reference(c, d, ref, scale);
  if (got.size() != ref.size()) return *why = "wrong size", false;
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(got[i] - ref[i]) <= 1e-5 * scale[i] + 1e-6))
      return *why = QString("element %1: %2, reference %3").arg(i).arg(got[i]).arg(ref[i]), false;
  return true;
}

// A clock that makes `winner` fastest: 1 ms for it, 2 ms for every other.
TuneClock prefer(const std::string& winner) {
  return [winner](const std::string& label, double) { return label == winner ? 1e-3 : 2e-3; };
}

const Case kCases[] = {
    {"large, every knob", 1, 200, 600, 300, false},
    {"large with fused epilogue", 1, 200, 600, 300, true},
    {"skinny: 3 rows, K=27", 1, 3, 1000, 27, false},
    {"skinny: 7 columns, K=147", 1, 1000, 7, 147, true},
    {"batched", 3, 20, 50, 40, true},
    // Short K: B read in place by default, packed as the other candidate;
    // ragged rows and columns, K from 1 to 32, batches.
    {"short K=1, ragged", 1, 17, 45, 1, true},
    {"short K=27 (a 3x3x3 im2col), odd sizes", 1, 33, 331, 27, false},
    {"short K=9, batched", 2, 19, 70, 9, true},
    {"short K=32, 129 columns", 1, 64, 129, 32, true},
    {"K=64 splitting rows", 1, 300, 40, 64, false},
    // 49 columns (a 7x7 map): the library computes C^T by default.
    {"49 columns, 256 rows", 1, 256, 49, 300, true},
};

}  // namespace

class TestTune : public QObject {
  Q_OBJECT
  tltest::ScratchDirs scratch_;
  QString fresh_cache() { return scratch_.fresh(); }

  // Each candidate of case c on `device`, made the winner by the clock in a
  // cache of its own, gives the reference's numbers, and the candidates are
  // really different code. Returns the candidates' labels (none: the kernel
  // offered none).
  std::vector<std::string> check_every_candidate(const Case& c, const std::string& device) {
    const Data d = make_data(c);
    set_tune_clock(prefer("default"));
    Run first = run_case(c, d, fresh_cache(), device);
    if (!first.gemm) return QTest::qFail(c.name, __FILE__, __LINE__), std::vector<std::string>{};
    if (first.gemm->tuned.empty()) return {};
    if (first.gemm->tuned != "default") return QTest::qFail("default did not win", __FILE__, __LINE__), std::vector<std::string>{};
    std::vector<std::string> labels;
    for (auto& [label, seconds] : first.gemm->tune_candidates) labels.push_back(label);
    std::set<std::string> sources;
    for (const auto& label : labels) {
      set_tune_clock(prefer(label));
      Run run = run_case(c, d, fresh_cache(), device);
      QString why;
      const QString what = QString("%1 on %2, %3").arg(c.name, device.c_str(), label.c_str());
      if (run.searches != 1 || run.gemm->tuned != label || !run.gemm->tune_searched)
        return QTest::qFail(qPrintable(what + ": not searched or not chosen"), __FILE__, __LINE__), labels;
      if (!matches(c, d, run.values, &why)) return QTest::qFail(qPrintable(what + ": " + why), __FILE__, __LINE__), labels;
      sources.insert(run.gemm->source + " launch " + std::to_string(run.gemm->local[0]) + "," +
                     std::to_string(run.gemm->local[1]));
    }
    if (sources.size() != labels.size()) QTest::qFail(qPrintable(QString(c.name) + ": candidates share code"), __FILE__, __LINE__);
    return labels;
  }

 private slots:
  void initTestCase() {
    QVERIFY(scratch_.isValid());
    qputenv("TINYLENS_NOREPLAY", "1");  // every realize plans its kernels; none replays a remembered plan
    QVERIFY(Registry::instance().get_available("cpu").available());
  }

  void cleanup() {
    set_tune_clock(nullptr);
    qunsetenv("TINYLENS_TUNE");
  }

  // The CPU device, and PoCL's register-blocked GEMM (kernels/gemm_regs.cl)
  // where an OpenCL CPU device is installed.
  void everyCandidateComputesTheProduct() {
    qputenv("TINYLENS_TUNE", "1");
    std::vector<std::string> devices{"cpu"};
    for (auto& dev : Registry::instance().devices())
      if (dev->available() && dev->name().rfind("opencl:", 0) == 0 && dev->info().kind == "CPU")
        devices.push_back(dev->name());
    for (const std::string& device : devices) {
      size_t tuned_cases = 0;
      for (const Case& c : kCases) {
        const auto labels = check_every_candidate(c, device);
        if (QTest::currentTestFailed()) return;
        // The CPU device offers candidates for every shape; PoCL's kernel
        // none where K and the rows are too small to cut differently.
        QVERIFY2(device != "cpu" || !labels.empty(), c.name);
        if (labels.empty()) continue;
        ++tuned_cases;
        QVERIFY2(labels.size() >= 2 && labels.size() <= 9, c.name);
      }
      QVERIFY2(tuned_cases >= 2, device.c_str());
    }
    // The large shape offers every kind of knob.
    const Data d = make_data(kCases[0]);
    set_tune_clock(prefer("default"));
    std::string all;
    const Run run = run_case(kCases[0], d, fresh_cache());
    for (auto& [label, seconds] : run.gemm->tune_candidates) all += label + ";";
    for (const char* knob : {"split=", "kc=", "mc=", "nc=", "b="}) QVERIFY2(all.find(knob) != std::string::npos, all.c_str());
  }

  // The tiled template (kernels/gemm.cl, what OpenCL GPUs get; forced onto
  // PoCL with TINYLENS_GEMM=tiled) offers the other tiles that fit the
  // device, and each computes the product.
  void tiledTemplateOffersItsOtherTiles() {
    qputenv("TINYLENS_TUNE", "1");
    qputenv("TINYLENS_GEMM", "tiled");
    auto restore = qScopeGuard([] { qunsetenv("TINYLENS_GEMM"); });
    std::vector<std::string> devices;
    for (auto& dev : Registry::instance().devices())
      if (dev->available() && dev->name().rfind("opencl:", 0) == 0) devices.push_back(dev->name());
    TL_REQUIRE(!devices.empty(), "an OpenCL device (PoCL)");
    // A fused epilogue, a skinny product, a batch, and K shorter than a tile.
    for (const std::string& device : devices)
      for (const Case& c : {kCases[1], kCases[3], kCases[4], kCases[5]}) {
        const auto labels = check_every_candidate(c, device);
        if (QTest::currentTestFailed()) return;
        QVERIFY2(labels.size() >= 2, qPrintable(QString("%1 on %2").arg(c.name, device.c_str())));
        QCOMPARE(labels[0], std::string("default"));
        for (size_t i = 1; i < labels.size(); ++i) QVERIFY2(labels[i].rfind("tile=", 0) == 0, labels[i].c_str());
      }
  }

  // The fastest by the clock wins, its time is what the table shows, the
  // choice is stored, and a fresh process with the same cache reads it
  // without searching or compiling even when the clock now prefers another.
  void keepsFastestStoresAndReusesTheChoice() {
    qputenv("TINYLENS_TUNE", "1");
    const Case& c = kCases[1];
    const Data d = make_data(c);
    set_tune_clock(prefer("default"));
    std::vector<std::string> labels;
    const Run first = run_case(c, d, fresh_cache());
    for (auto& [label, seconds] : first.gemm->tune_candidates) labels.push_back(label);
    QVERIFY(labels.size() >= 3);
    // Distinct times, the fastest neither first nor last.
    std::map<std::string, double> times;
    for (size_t i = 0; i < labels.size(); ++i) times[labels[i]] = 1e-3 * double(1 + (i + labels.size() - 1) % labels.size());
    const std::string fastest = labels[1];
    QCOMPARE(times[fastest], 1e-3);
    set_tune_clock([&](const std::string& label, double) { return times.at(label); });
    const QString cache = fresh_cache();
    Run cold = run_case(c, d, cache);
    QCOMPARE(cold.searches, size_t(1));
    QCOMPARE(cold.gemm->tuned, fastest);
    QVERIFY(cold.gemm->tune_searched);
    QCOMPARE(cold.gemm->tune_candidates.size(), labels.size());
    for (auto& [label, seconds] : cold.gemm->tune_candidates) QCOMPARE(seconds, times.at(label));
    ProfileRecord record;
    record.kernel = cold.gemm;
    const std::string table = format_profile_table({record});
    QVERIFY2(table.find("\n      tuned: " + fastest + " 1000.0 us (searched; default ") != std::string::npos,
             table.c_str());

    set_tune_clock(prefer(labels.back()));
    Run warm = run_case(c, d, cache);
    QCOMPARE(warm.searches, size_t(0));
    QCOMPARE(warm.compiler_runs, size_t(0));
    QCOMPARE(warm.gemm->tuned, fastest);
    QVERIFY(!warm.gemm->tune_searched);
    QCOMPARE(warm.gemm->source, cold.gemm->source);
    for (auto& [label, seconds] : warm.gemm->tune_candidates) QCOMPARE(seconds, times.at(label));
    QVERIFY(format_tune_line(*warm.gemm).find("from the cache") != std::string::npos);
    QString why;
    QVERIFY2(matches(c, d, warm.values, &why), qPrintable(why));

    // TINYLENS_TUNE=retune searches again although a choice is stored, and
    // replaces it: the next tuned process reads the new one.
    qputenv("TINYLENS_TUNE", "retune");
    QVERIFY(tune_enabled() && retune_requested());
    Run again = run_case(c, d, cache);
    QCOMPARE(again.searches, size_t(1));
    QCOMPARE(again.gemm->tuned, labels.back());
    QVERIFY(again.gemm->tune_searched);
    qputenv("TINYLENS_TUNE", "1");
    QVERIFY(!retune_requested());
    set_tune_clock(prefer(fastest));
    Run after = run_case(c, d, cache);
    QCOMPARE(after.searches, size_t(0));
    QCOMPARE(after.gemm->tuned, labels.back());
    QVERIFY2(matches(c, d, after.values, &why), qPrintable(why));
  }

  // A stored choice belongs to one kernel: a product that differs from a
  // tuned one in a single size (n) is searched afresh, not answered with
  // the other's choice, and each reads back its own (the key holds the
  // default rendering's source and the sizes passed at run time).
  void choiceIsKeyedByItsKernel() {
    qputenv("TINYLENS_TUNE", "1");
    const Case a = kCases[1];
    Case b = a;
    b.n = a.n + 8;
    const Data da = make_data(a), db = make_data(b);
    const QString cache = fresh_cache();
    set_tune_clock(prefer("default"));
    QCOMPARE(run_case(a, da, cache).searches, size_t(1));
    Run other = run_case(b, db, cache);
    QCOMPARE(other.searches, size_t(1));
    QVERIFY(other.gemm->tune_searched);
    QString why;
    QVERIFY2(matches(b, db, other.values, &why), qPrintable(why));
    QCOMPARE(run_case(a, da, cache).searches, size_t(0));
    QCOMPARE(run_case(b, db, cache).searches, size_t(0));
  }

  // Timed launches read large weights from memory, as a model's do: up to
  // an L2's size one copy; from there enough copies (at most 8) that the
  // others pass 32 MiB through the cache between two reads of one; past a
  // last-level cache's size, one copy again. kCases[0]'s operands and packed
  // A pass 1 MiB, so everyCandidateComputesTheProduct tunes through copies.
  void largeWeightsAreTimedFromMemory() {
    QCOMPARE(tune_weight_copies(0), 1);
    QCOMPARE(tune_weight_copies(64 << 10), 1);
    QCOMPARE(tune_weight_copies((1 << 20) - 1), 1);
    QCOMPARE(tune_weight_copies(1 << 20), 8);
    QCOMPARE(tune_weight_copies(5 << 20), 7);   // 6 others x 5 MiB
    QCOMPARE(tune_weight_copies(8 << 20), 5);   // 4 x 8
    QCOMPARE(tune_weight_copies(20 << 20), 2);  // 1 x 20: as far as two go
    QCOMPARE(tune_weight_copies(32 << 20), 1);
    const Case& c = kCases[0];
    const size_t operands = size_t(c.m * c.k + c.k * c.n) * sizeof(float);
    QVERIFY(operands + size_t(c.m * c.k) * sizeof(float) >= size_t(1) << 20);
  }

  // Before a tuned realize times kernels it has just built, the host waits
  // busy for 0.3 s (tune.cpp: right after the compilers exit, kernels ran
  // at half speed on the test machine); a test's clock needs no wait.
  void settlesBeforeRealTimings() {
    QElapsedTimer timer;
    timer.start();
    settle_before_tuning();
    QVERIFY2(timer.elapsed() >= 300, qPrintable(QString::number(timer.elapsed()) + " ms"));
    set_tune_clock(prefer("default"));
    timer.restart();
    settle_before_tuning();
    QVERIFY2(timer.elapsed() < 100, qPrintable(QString::number(timer.elapsed()) + " ms"));
  }

  // TINYLENS_TUNE unset or "0": no search, no stored choice read, the
  // default rendering runs; its numbers are the reference's too.
  void offMeansNoSearch() {
    const Case& c = kCases[1];
    const Data d = make_data(c);
    qputenv("TINYLENS_TUNE", "1");
    set_tune_clock(prefer("default"));
    const QString cache = fresh_cache();
    const Run first = run_case(c, d, fresh_cache());
    const std::string default_source = first.gemm->source;
    std::string other;
    for (auto& [label, seconds] : first.gemm->tune_candidates)
      if (label != "default") other = label;
    set_tune_clock(prefer(other));
    QCOMPARE(run_case(c, d, cache).gemm->tuned, other);  // a stored choice the runs below must ignore
    set_tune_clock([](const std::string&, double) -> double { throw std::logic_error("searched while off"); });
    for (const char* off : {"", "0"}) {
      if (*off)
        qputenv("TINYLENS_TUNE", off);
      else
        qunsetenv("TINYLENS_TUNE");
      QVERIFY(!tune_enabled());
      Run run = run_case(c, d, cache);
      QCOMPARE(run.searches, size_t(0));
      QVERIFY(run.gemm->tuned.empty());
      QVERIFY(run.gemm->tune_candidates.empty());
      QCOMPARE(run.gemm->source, default_source);
      QString why;
      QVERIFY2(matches(c, d, run.values, &why), qPrintable(why));
      QVERIFY(format_tune_line(*run.gemm).empty());
    }
  }
};

QTEST_GUILESS_MAIN(TestTune)
#include "test_tune.moc"
