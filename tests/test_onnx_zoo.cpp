// The model zoo (scripts/export_zoo.py: torchvision architectures with seeded
// random weights, and the clean EfficientNet-Lite0, each with PyTorch's
// logits) run the way users run models: all of them in one process, one
// after another, in a shuffled order, twice, on every device, each within
// the conformance tolerance of PyTorch's answer. A cache whose key misses
// something that decides its content shows here as a model that passes alone
// and fails after another.
//
// The order is drawn from TINYLENS_ZOO_SEED when set, else from the clock,
// and printed: a failure names the seed that reproduces it. Under the
// sanitizers (TINYLENS_SANITIZED=1) a subset runs, on the cpu device.
// TINYLENS_ZOO_MODELS=a,b,... picks models; TINYLENS_ZOO_DIR another zoo.
#include <QtTest/QtTest>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "app/onnx_conformance.h"
#include "core/realize.h"
#include "tests/testing.h"

namespace fs = std::filesystem;

namespace {

std::string zoo_dir() {
  if (const char* d = std::getenv("TINYLENS_ZOO_DIR"); d && *d) return d;
  return tltest::source_dir() + "/resources/onnx-zoo";
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The sanitized pass: architectures that between them cover every class of
// kernel (pooled convolutions with two paddings, concatenations, depthwise,
// squeeze-excite, channel shuffles, LayerNorm and attention) at a cost the
// sanitizers can pay.
const std::vector<std::string> kSanitizedSubset = {"resnet18", "googlenet", "squeezenet1_1", "mobilenet_v3_large",
                                                   "shufflenet_v2_x1_0", "efficientnet_lite0"};

}  // namespace

class TestOnnxZoo : public QObject {
  Q_OBJECT

 private slots:
  void wholeZooShuffledTwiceOnEveryDevice() {
    const std::string dir = zoo_dir();
    TL_REQUIRE(fs::is_regular_file(fs::path(dir) / ".complete"), "the model zoo is missing: run scripts/setup");
    std::vector<std::string> cases = tl::onnx_case_dirs(dir);
    const bool sanitized = qEnvironmentVariableIntValue("TINYLENS_SANITIZED") != 0;
    std::vector<std::string> only;
    if (const char* m = std::getenv("TINYLENS_ZOO_MODELS"); m && *m) only = split(m);
    else if (sanitized) only = kSanitizedSubset;
    if (!only.empty()) {
      std::erase_if(cases, [&](const std::string& c) {
        return std::find(only.begin(), only.end(), fs::path(c).filename().string()) == only.end();
      });
      QCOMPARE(cases.size(), only.size());  // every model asked for is in the zoo
    }
    QVERIFY2(cases.size() >= 12 || !only.empty(), qPrintable(QString("only %1 models in %2").arg(cases.size()).arg(dir.c_str())));

    uint64_t seed = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
    if (const char* s = std::getenv("TINYLENS_ZOO_SEED"); s && *s) seed = std::strtoull(s, nullptr, 10);
    std::vector<std::string> devices = tltest::available_devices();
    if (sanitized) devices = {"cpu"};
    int failures = 0, runs = 0;
    for (const std::string& device : devices) {
      std::mt19937_64 rng(seed);
      for (int round = 1; round <= 2; ++round) {
        std::vector<std::string> order = cases;
        std::shuffle(order.begin(), order.end(), rng);
        std::string names;
        for (auto& c : order) names += " " + fs::path(c).filename().string();
        qInfo("%s, round %d, TINYLENS_ZOO_SEED=%llu:%s", device.c_str(), round, (unsigned long long)seed,
              names.c_str());
        for (const auto& c : order) {
          const auto t0 = std::chrono::steady_clock::now();
          tl::OnnxCaseResult r = tl::run_onnx_case(c, device);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          qInfo("  %-11s %-22s %6.2f s %s", tl::onnx_status_name(r.status), r.name.c_str(), s,
                r.detail.empty() ? "" : r.detail.c_str());
          ++runs;
          if (r.status != tl::OnnxCaseResult::Status::Pass) {
            ++failures;
            qWarning("%s on %s, round %d after the models before it (TINYLENS_ZOO_SEED=%llu): %s %s", r.name.c_str(),
                     device.c_str(), round, (unsigned long long)seed, tl::onnx_status_name(r.status), r.detail.c_str());
          }
        }
      }
    }
    qInfo("zoo: %d of %d runs pass (%zu models x %zu devices x 2 rounds)", runs - failures, runs, cases.size(),
          devices.size());
    QCOMPARE(failures, 0);
  }
};

QTEST_GUILESS_MAIN(TestOnnxZoo)
#include "test_onnx_zoo.moc"
