// Data loading and the training loop: MNIST IDX parsing (fixtures written
// here), OpenCV's digits image, the seeded split and batches, trainer
// determinism, and the proof that the small CNN learns digits.
#include <QtTest/QtTest>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>

#include "core/data/dataset.h"
#include "core/error.h"
#include "core/graph.h"
#include "core/realize.h"
#include "core/io/image.h"
#include "core/train/models.h"
#include "core/train/trainer.h"
#include "tests/testing.h"

using tl::Tensor;
namespace data = tl::data;
namespace fs = std::filesystem;

namespace {

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}

std::vector<uint8_t> idx_images(uint32_t n, uint32_t h, uint32_t w, uint32_t magic = 2051) {
  std::vector<uint8_t> b;
  put32(b, magic);
  put32(b, n);
  put32(b, h);
  put32(b, w);
  for (uint32_t i = 0; i < n * h * w; ++i) b.push_back(uint8_t((i * 37) % 256));
  return b;
}
std::vector<uint8_t> idx_labels(uint32_t n, uint32_t magic = 2049) {
  std::vector<uint8_t> b;
  put32(b, magic);
  put32(b, n);
  for (uint32_t i = 0; i < n; ++i) b.push_back(uint8_t(i % 10));
  return b;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tinylens_test_train_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream f(path / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return (path / name).string();
  }
};

std::string idx_error(const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels) {
  TempDir d;
  try {
    data::load_idx(d.write("img", images), d.write("lab", labels));
  } catch (const tl::IOError& e) {
    return e.what();
  }
  return "no error";
}

bool has_digits() { return fs::exists(data::default_digits_path()); }

}  // namespace

class TestTrain : public QObject {
  Q_OBJECT

 private slots:
  void idxLoadsValuesAndLabels() {
    TempDir d;
    auto ds = data::load_idx(d.write("img", idx_images(3, 2, 4)), d.write("lab", idx_labels(3)));
    QCOMPARE(ds.size(), int64_t(3));
    QCOMPARE(ds.height, int64_t(2));
    QCOMPARE(ds.width, int64_t(4));
    QCOMPARE(ds.labels, (std::vector<int32_t>{0, 1, 2}));
    QCOMPARE(ds.pixels[9], float((9 * 37) % 256) / 255.f);
  }

  void idxErrorsNameTheProblem() {
    auto expect = [](const std::string& what, const std::string& needle) {
      QVERIFY2(what.find(needle) != std::string::npos, (what + " (expected: " + needle + ")").c_str());
    };
    expect(idx_error(idx_images(3, 2, 2, 2049), idx_labels(3)), "wrong IDX magic 2049 (expected 2051");
    expect(idx_error(idx_images(3, 2, 2), idx_labels(3, 2051)), "wrong IDX magic 2051 (expected 2049");
    auto cut = idx_images(3, 2, 2);
    cut.resize(cut.size() - 5);
    expect(idx_error(cut, idx_labels(3)), "truncated IDX data: header promises 12 bytes, file has 7");
    expect(idx_error({0, 0, 8}, idx_labels(3)), "truncated IDX file");
    auto header_only = idx_images(3, 2, 2);
    header_only.resize(10);
    expect(idx_error(header_only, idx_labels(3)), "truncated IDX header");
    expect(idx_error(idx_images(3, 2, 2), idx_labels(4)), "holds 3 images but");
    auto bad = idx_labels(3);
    bad.back() = 12;
    expect(idx_error(idx_images(3, 2, 2), bad), "label 12 at index 2");
    auto extra = idx_images(3, 2, 2);
    extra.push_back(0);
    expect(idx_error(extra, idx_labels(3)), "1 bytes after the data");
    auto huge = idx_images(0, 2, 2);
    huge[4] = 0xff;  // 4 billion images promised
    expect(idx_error(huge, idx_labels(3)), "truncated IDX data");
    TempDir d;
    try {
      data::load_mnist_dir(d.path.string());
      QFAIL("no exception");
    } catch (const tl::IOError& e) {
      expect(e.what(), "missing train-images-idx3-ubyte");
    }
  }

  void mnistFolderLoadsBothSplits() {
    TempDir d;
    d.write("train-images-idx3-ubyte", idx_images(5, 28, 28));
    d.write("train-labels-idx1-ubyte", idx_labels(5));
    d.write("t10k-images-idx3-ubyte", idx_images(2, 28, 28));
    d.write("t10k-labels-idx1-ubyte", idx_labels(2));
    auto [train, test] = data::load_mnist_dir(d.path.string());
    QCOMPARE(train.size(), int64_t(5));
    QCOMPARE(test.size(), int64_t(2));
    QCOMPARE(train.height, int64_t(28));
  }

  void digitsImageIsCutIntoClasses() {
    TL_REQUIRE(has_digits(), "opencv-doc's digits.png is not installed");
    auto ds = data::load_digits(data::default_digits_path());
    QCOMPARE(ds.size(), int64_t(5000));
    QCOMPARE(ds.height, int64_t(20));
    for (int c = 0; c < 10; ++c) QCOMPARE(int(std::count(ds.labels.begin(), ds.labels.end(), c)), 500);
    QCOMPARE(ds.labels[499], 0);   // row 4, the last of class 0
    QCOMPARE(ds.labels[500], 1);
    QCOMPARE(ds.labels[4999], 9);
    // digit 101 (row 1, column 1) is the block at x 20..39, y 20..39
    tl::Image img = tl::load_image(data::default_digits_path());
    for (int y = 0; y < 20; ++y)
      for (int x = 0; x < 20; ++x)
        QCOMPARE(ds.image(101)[y * 20 + x], img.rgb[(size_t(20 + y) * 2000 + size_t(20 + x)) * 3]);
    QVERIFY_THROWS_EXCEPTION(tl::IOError, data::load_digits(tltest::source_dir() + "/tests/data/io/rgb.png"));
  }

  void splitIsStratifiedAndSeeded() {
    data::Dataset all;
    all.height = all.width = 1;
    for (int i = 0; i < 500; ++i) {
      all.labels.push_back(i % 10);
      all.pixels.push_back(float(i));
    }
    auto [train, test] = data::split(all, 0.2, 7);
    QCOMPARE(train.size(), int64_t(400));
    QCOMPARE(test.size(), int64_t(100));
    for (int c = 0; c < 10; ++c) QCOMPARE(int(std::count(test.labels.begin(), test.labels.end(), c)), 10);
    std::set<float> seen(train.pixels.begin(), train.pixels.end());
    seen.insert(test.pixels.begin(), test.pixels.end());
    QCOMPARE(seen.size(), size_t(500));  // a partition
    for (int64_t i = 0; i < test.size(); ++i) QCOMPARE(int(test.pixels[size_t(i)]) % 10, test.labels[size_t(i)]);
    QCOMPARE(data::split(all, 0.2, 7).second.pixels, test.pixels);
    QVERIFY(data::split(all, 0.2, 8).second.pixels != test.pixels);
  }

  void batchesShuffleByEpochAndShift() {
    data::Dataset ds;
    ds.height = ds.width = 6;
    for (int i = 0; i < 10; ++i) {
      ds.labels.push_back(i);
      for (int p = 0; p < 36; ++p) ds.pixels.push_back(p == 14 ? float(i + 1) : 0.f);  // one dot at (2, 2)
    }
    data::Batches plain(ds, 4, true, 3);
    auto epoch_labels = [](data::Batches& b, int e) -> std::vector<int32_t> {
      b.start_epoch(e);
      std::vector<int32_t> out;
      data::Batch batch;
      while (b.next(batch)) {
        if (batch.images.dim(0) > 4) throw std::runtime_error("batch larger than 4");
        out.insert(out.end(), batch.label_values.begin(), batch.label_values.end());
      }
      return out;
    };
    auto e0 = epoch_labels(plain, 0), e1 = epoch_labels(plain, 1);
    QCOMPARE(e0.size(), size_t(10));
    QCOMPARE(std::set<int32_t>(e0.begin(), e0.end()).size(), size_t(10));
    QVERIFY(e0 != e1);
    QCOMPARE(epoch_labels(plain, 0), e0);
    QCOMPARE(plain.batches_per_epoch(), int64_t(3));
    data::Batches shifted(ds, 10, false, 3, true, 2);
    data::Batch b;
    QVERIFY(shifted.next(b));
    auto px = b.images.to_vector();
    std::set<int> offsets;
    for (int i = 0; i < 10; ++i) {
      int where = -1;
      for (int p = 0; p < 36; ++p)
        if (px[size_t(i * 36 + p)] != 0) {
          QCOMPARE(px[size_t(i * 36 + p)], float(i + 1));
          where = p;
        }
      QVERIFY(where >= 0);  // a shift of at most 2 keeps the dot at (2, 2) inside
      int dy = where / 6 - 2, dx = where % 6 - 2;
      QVERIFY(std::abs(dy) <= 2 && std::abs(dx) <= 2);
      offsets.insert(dy * 10 + dx);
    }
    QVERIFY(offsets.size() > 1);
  }

  // The library's choice of model and optimizer by name, shared by the CLI
  // and the window: the defaults the CLI documents, and unknown names refused.
  void modelsAndOptimizersByName() {
    data::Dataset ds;
    ds.height = 12;
    ds.width = 8;
    ds.classes = 5;
    tl::Generator gen(3);
    auto mlp = tl::train::make_model("mlp", ds, gen, "cpu");
    QCOMPARE(mlp->state_dict().at("1.weight").shape, tl::Shape({128, 96}));
    QCOMPARE(mlp->state_dict().at("3.weight").shape, tl::Shape({5, 128}));
    auto cnn = tl::train::make_model("cnn", ds, gen, "cpu");
    QCOMPARE(cnn->state_dict().at("15.weight").shape, tl::Shape({5, 64 * 3 * 2}));
    struct Want {
      const char* name;
      double lr;
    };
    for (Want w : {Want{"sgd", 0.05}, Want{"adam", 0.002}, Want{"adamw", 0.002}}) {
      auto opt = tl::train::make_optimizer(w.name, mlp->parameters(), -1, 0);
      QCOMPARE(opt->name(), std::string(w.name));
      QCOMPARE(opt->lr(), w.lr);
      QCOMPARE(tl::train::make_optimizer(w.name, mlp->parameters(), 0.125, 0)->lr(), 0.125);
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, tl::train::make_model("resnet", ds, gen, "cpu"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, tl::train::make_optimizer("rmsprop", mlp->parameters(), -1, 0));
  }

  void trainerIsDeterministicAndReportsKernels() {
    // QVERIFY cannot leave a lambda that returns a value: throw instead
    auto check = [](bool ok, const char* what) {
      if (!ok) throw std::runtime_error(what);
    };
    auto run = [&]() -> std::vector<double> {
      data::Dataset ds;
      ds.height = ds.width = 8;
      std::mt19937 rng(1);
      for (int i = 0; i < 24; ++i) {
        ds.labels.push_back(i % 3);
        for (int p = 0; p < 64; ++p) ds.pixels.push_back(float(rng() % 100) / 100.f + (p % 3 == i % 3 ? 0.5f : 0.f));
      }
      tl::Generator gen(4);
      auto m = tl::train::make_cnn(8, 8, 3, gen);
      tl::nn::Adam opt(m->parameters(), 0.01);
      tl::train::Trainer t(*m, opt);
      data::Batches batches(ds, 8, true, 2);
      std::vector<double> losses;
      data::Batch b;
      // Four epochs of three steps: batch norm over 8 images is noisy, the
      // trend shows over a dozen steps, not three.
      for (int epoch = 0; epoch < 4; ++epoch)
        for (batches.start_epoch(epoch); batches.next(b);) {
          auto s = t.step(b);
          losses.push_back(s.loss);
          check(!s.kernels.empty(), "a step reported no kernels");
          check(s.seconds > 0, "a step took no time");
          bool gemm = false;
          for (auto& k : s.kernels) gemm |= k.kernel->name.rfind("GEMM", 0) == 0;
          check(gemm, "a step ran no GEMM");
        }
      losses.push_back(t.evaluate(ds).loss);
      return losses;
    };
    auto a = run(), b = run();
    QCOMPARE(a.size(), size_t(13));
    QCOMPARE(a, b);
    QVERIFY(a.back() < a.front());
  }

  // A training step is one realize: forward + loss, gradients, optimizer
  // update and the running statistics and batch count of make_cnn's four
  // batch-norm layers (before issue 13: 3 + 3 * 4 = 15 realizes). The
  // observer sees it before it runs, so its snapshot holds every node the
  // step's kernels computed.
  void realizeObserverSeesEveryRealizeOfAStep() {
    data::Dataset ds;
    ds.height = ds.width = 8;
    ds.classes = 3;
    for (int i = 0; i < 8; ++i) {
      ds.labels.push_back(i % 3);
      for (int p = 0; p < 64; ++p) ds.pixels.push_back(float((p * 7 + i) % 10) / 10.f);
    }
    tl::Generator gen(1);
    auto m = tl::train::make_cnn(8, 8, 3, gen);
    tl::nn::Adam opt(m->parameters(), 1e-3);
    tl::train::Trainer t(*m, opt);
    data::Batches batches(ds, 8, false);
    data::Batch b;
    QVERIFY(batches.next(b));
    int calls = 0;
    std::set<uint64_t> seen;
    tl::train::StepResult s;
    {
      tl::RealizeObserver observer([&](const std::vector<tl::NodeRef>& roots) {
        ++calls;
        for (auto& n : tl::snapshot_graph(roots)) seen.insert(n.id);
      });
      s = t.step(b);
    }
    QCOMPARE(calls, 1);
    QVERIFY(!s.kernels.empty());
    for (auto& k : s.kernels)
      for (uint64_t id : k.kernel->node_ids) QVERIFY2(seen.count(id), k.kernel->name.c_str());
    // Gone with its scope: the next step is not observed.
    t.step(b);
    QCOMPARE(calls, 1);
  }

  void cnnLearnsDigits() {
    TL_REQUIRE(has_digits(), "opencv-doc's digits.png is not installed");
    // `tinylens-cli train --dataset digits --epochs 5` with its defaults:
    // batch 32, Adam 0.002 on a cosine schedule, shifts of up to 1 pixel.
    // About a minute of training; under the sanitizers the same run stops
    // after its first epoch (which checks the same code) and meets that
    // epoch's bar instead.
    const bool sanitized = qEnvironmentVariableIsSet("TINYLENS_SANITIZED");
    auto [train, test] = data::split(data::load_digits(data::default_digits_path()), 0.2, 0);
    tl::Generator gen(0);
    auto m = tl::train::make_cnn(20, 20, 10, gen, "cpu");
    tl::nn::Adam opt(m->parameters(), 0.002);
    tl::train::Trainer t(*m, opt);
    data::Batches batches(train, 32, true, 0, true, 1, "cpu");
    const int epochs = 5, run = sanitized ? 1 : epochs;
    double last = 0;
    for (int e = 0; e < run; ++e) {
      opt.set_lr(tl::nn::cosine_lr(0.002, e, epochs));
      auto r = t.train_epoch(batches, e, &test);
      std::printf("epoch %d: train loss %.4f, train accuracy %.2f%%, test accuracy %.2f%%, %.1f s\n", e + 1,
                  r.train_loss, 100 * r.train_accuracy, 100 * r.test_accuracy, r.seconds);
      last = r.test_accuracy;
      QVERIFY(r.train_loss < 2.31);
    }
    // The bar: 98% on the held-out fifth within 5 epochs. Measured:
    // 95.1 / 97.1 / 97.1 / 98.4 / 98.5%. The CPU run is deterministic, so a
    // drop below the bar is a change in the numbers, not luck.
    const double bar = sanitized ? 0.94 : 0.98;
    QVERIFY2(last >= bar, std::to_string(last).c_str());
  }
};

QTEST_GUILESS_MAIN(TestTrain)
#include "test_train.moc"
