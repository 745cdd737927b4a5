// Issue 46: what the window's ONNX costs and Re-tune stand on, in the core.
// Each kernel of an ONNX run names the nodes of the file it was made for
// (KernelInfo::origins, from Node::origin), also in the launches a Jit
// replays, timed or not; a TuneSearch (core/tune.h) searches the kernels it
// selects, reports its progress, and stores nothing until commit().
#include <QtTest/QtTest>

#include <cmath>
#include <filesystem>

#include "core/io/onnx.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "core/tune.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"

namespace fs = std::filesystem;

namespace {

using Origins = std::vector<std::pair<int32_t, float>>;
std::vector<Origins> originsOf(const std::vector<tl::ProfileRecord>& records) {
  std::vector<Origins> out;
  for (const auto& r : records) {
    Origins o;
    for (const auto& x : r.kernel->origins) o.push_back({x.node, x.share});
    out.push_back(o);
  }
  return out;
}

}  // namespace

class TestOnnxOrigins : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_, cache_;
  std::unique_ptr<tl::OnnxModel> model_;
  tl::Tensor input_;

  std::vector<tl::ProfileRecord> run(bool timed = true) {
    tl::ProfileCapture capture(timed);
    (void)model_->run({input_}).at(0).to_vector();
    return capture.records();
  }

 private slots:
  void initTestCase() {
    qputenv("XDG_CACHE_HOME", cache_.path().toUtf8());  // the tuner's choices: this suite's own
    model_ = std::make_unique<tl::OnnxModel>(tltest::two_convs(fs::path(tmp_.path().toStdString()) / "two.onnx"));
    std::vector<float> x(3 * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i)));
    input_ = tl::Tensor::from_data(x, {1, 3, 8, 8}, "cpu");
  }

  void cleanup() {
    tl::set_tune_clock(nullptr);
    qunsetenv("TINYLENS_TUNE");
    qunsetenv("TINYLENS_NOREPLAY");
  }

  // The first run plans, the second captures the model's Jit, the rest
  // replay it: every launch names the same nodes with the same shares.
  void originsSurviveReplay() {
    tl::NoGrad noGrad;
    const auto first = run();
    QVERIFY(!first.empty());
    const auto expected = originsOf(first);
    bool convWithRelu = false;
    for (const auto& o : expected) {
      QVERIFY(!o.empty());
      double sum = 0;
      for (const auto& [node, share] : o) {
        QVERIFY(node >= 0 && node < 5);
        sum += share;
      }
      QVERIFY(std::fabs(sum - 1) < 1e-5);
      convWithRelu = convWithRelu || (o.size() == 2 && o[0].first == 0 && o[1].first == 1 && o[0].second > o[1].second);
    }
    QVERIFY(convWithRelu);
    (void)run();
    QVERIFY(model_->jit_captured("cpu"));
    for (bool timed : {true, false}) {
      const auto replayed = run(timed);
      QVERIFY(!replayed.empty());
      for (const auto& r : replayed) QVERIFY(r.replayed);
      QCOMPARE(originsOf(replayed), expected);
    }
    // Outside any ONNX node, nothing is named.
    tl::Tensor a = tl::Tensor::from_data(std::vector<float>(16, 1.0f), {16}, "cpu");
    tl::ProfileCapture capture;
    (void)(a * 2.0f + 1.0f).to_vector();
    QVERIFY(!capture.records().empty());
    for (const auto& r : capture.records()) QVERIFY(r.kernel->origins.empty());
  }

  // A search of one kernel: progress counts it, a search not committed
  // stores nothing, a committed one is what a tuned run reads; the other
  // kernels keep their default (no choice stored) unsearched.
  void tuneSearchSelectsAndCommits() {
    tl::NoGrad noGrad;
    std::string gemm;
    tl::Shape shape;
    for (const auto& r : run())
      if (r.kernel->name.rfind("GEMM", 0) == 0 && gemm.empty()) gemm = r.kernel->name;
    QVERIFY(!gemm.empty());
    auto selects = [&](const std::string& k, const tl::Shape& s) {
      if (k != gemm) return false;
      shape = s;
      return true;
    };
    std::vector<std::pair<size_t, size_t>> progress;
    auto told = [&](size_t done, size_t total) { progress.push_back({done, total}); };
    std::string winner;
    tl::set_tune_clock([&winner](const std::string& label, double) {
      if (winner.empty() && label != "default") winner = label;
      return label == winner ? 1e-4 : 5e-4;
    });
    const size_t searches = tl::tune_searches();
    {
      tl::TuneSearch search(selects, told);
      QVERIFY(tl::tune_enabled());
      (void)run();
      QCOMPARE(search.searched(), size_t(1));
    }  // not committed
    QCOMPARE(tl::tune_searches(), searches + 1);
    QCOMPARE(progress.size(), size_t(2));  // found 1, then searched 1
    QCOMPARE(progress[0], (std::pair<size_t, size_t>{0, 1}));
    QCOMPARE(progress[1], (std::pair<size_t, size_t>{1, 1}));
    QVERIFY(!winner.empty());
    QVERIFY(!tl::tune_enabled());
    // A tuned run that does not replay finds no stored choice, so it searches.
    qputenv("TINYLENS_NOREPLAY", "1");
    qputenv("TINYLENS_TUNE", "1");
    tl::set_tune_clock([](const std::string& label, double) { return label == "default" ? 1e-4 : 5e-4; });
    const size_t before = tl::tune_searches();
    (void)run();
    QVERIFY(tl::tune_searches() > before);  // nothing stored: searched afresh, default chosen and stored
    // Now a committed search of the one kernel: the tuned run reads its choice.
    tl::set_tune_clock([&winner](const std::string& label, double) { return label == winner ? 1e-4 : 5e-4; });
    {
      tl::TuneSearch search(selects, told);
      (void)run();
      search.commit();
    }
    tl::set_tune_clock([](const std::string&, double) { return 1e-4; });
    const size_t searched = tl::tune_searches();
    const auto tuned = run();
    QCOMPARE(tl::tune_searches(), searched);  // every choice read from the cache
    int checked = 0;
    for (const auto& r : tuned) {
      if (r.kernel->tuned.empty()) continue;
      QVERIFY(!r.kernel->tune_searched);
      QCOMPARE(r.kernel->tuned, r.kernel->name == gemm ? winner : std::string("default"));
      ++checked;
    }
    QVERIFY(checked >= 2);
  }
};

QTEST_MAIN(TestOnnxOrigins)
#include "test_onnx_origins.moc"
