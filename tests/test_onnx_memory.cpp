// What a run of a hostile ONNX model holds (issue 47, class 3): the bytes
// of its device buffers, bounded while it runs; TopK over 16M elements; a
// chain of many thousands of nodes, whose walk and run hold memory of the
// file, not of the whole lazy graph. This suite counts the heap itself
// (operator new below, off under AddressSanitizer, whose allocator it would
// replace), so it is a binary of its own.
#include <malloc.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <numeric>

#include "core/error.h"
#include "core/io/onnx.h"
#include "core/tensor.h"
#include "tests/onnx_builder.h"
#include "tests/onnx_hostile.h"
#include "tests/testing.h"

#if defined(__SANITIZE_ADDRESS__)
#define TL_COUNTS_HEAP 0
#else
#define TL_COUNTS_HEAP 1
#endif

namespace {
std::atomic<int64_t> heap_live{0}, heap_peak{0};

#if TL_COUNTS_HEAP
void count_in(void* p) {
  const int64_t now = heap_live += int64_t(malloc_usable_size(p));
  for (int64_t peak = heap_peak.load(); now > peak && !heap_peak.compare_exchange_weak(peak, now);) {
  }
}
#endif

// The peak of the C++ heap since the last reset, above what was live then.
struct HeapWatch {
  int64_t base = heap_live.load();
  HeapWatch() { heap_peak = base; }
  int64_t growth() const { return heap_peak.load() - base; }
};
}  // namespace

#if TL_COUNTS_HEAP
void* operator new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  count_in(p);
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  heap_live -= int64_t(malloc_usable_size(p));
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }
#endif

namespace fs = std::filesystem;
using namespace tl;
using tltest::Builder;
using namespace tltest::hostile;

class TestOnnxMemory : public QObject {
  Q_OBJECT

 private slots:
  // The estimate before a run stops at a shape computed from the weights (a
  // large initializer's values): here its maximum, 3600, sizes twelve
  // MatMuls of 59 MB each, all read by one Sum: 700 MB of buffers from a
  // 150 KB file, past its run budget of about 520 MB. Before the guard the
  // run made them all; now the buffer that would pass the budget is refused,
  // with an error that says so.
  void deviceBytesAreBoundedWhileARunRuns() {
    Builder b;
    std::vector<float> w(5000, 0.0f);
    w[17] = 3600;
    floats(b, "w", {5000}, w);
    floats(b, "v", {8, 4096}, std::vector<float>(8 * 4096, 0.5f));
    ints(b, "eight", {1}, {8});
    b.node("ReduceMax", {"w"}, {"wmax"});
    int_attr(b.node("Cast", {"wmax"}, {"n"}), "to", onnx::TensorProto::INT64);
    int_attr(b.node("Concat", {"n", "eight"}, {"shape"}), "axis", 0);
    b.node("ConstantOfShape", {"shape"}, {"zeros"});
    floats(b, "one", {1}, {1});
    b.node("Add", {"zeros", "one"}, {"a"});
    std::vector<std::string> parts;
    for (int i = 0; i < 12; ++i) {
      const std::string s = std::to_string(i);
      floats(b, "c" + s, {1}, {float(i + 1)});
      b.node("Mul", {"a", "c" + s}, {"a" + s});
      parts.push_back("m" + s);
      b.node("MatMul", {"a" + s, "v"}, {parts.back()});
    }
    b.node("Sum", parts, {"y"});
    b.output("y", {});
    fs::path dir = tltest::fresh_temp_dir("memory", "guard");
    OnnxModel m(b.save(dir / "guard.onnx"));
    QVERIFY(!m.estimate_run({}).complete);  // why the estimate cannot refuse it
    const std::string msg = error_of([&] { m.run({}); });
    EXPECT_ERROR(msg, "guard.onnx run holds");
    EXPECT_ERROR(msg, "of device buffers and asked for 59 MB more while it ran, past the");
    EXPECT_ERROR(msg, "TINYLENS_TRUST_FILES=1");
    QVERIFY2(m.last_run_peak_bytes() == 0, "a refused run reports no peak");
    fs::remove_all(dir);
  }

  // A batch the caller chooses scales a run's budgets: each of 128 items
  // makes a value of 200,000 elements (25.6M in all, past one item's limit
  // of about 17M for a file this small), which batch inference needs (a
  // batch of 64 through EfficientNet-B0 was refused). A first dimension the
  // file fixes is the file's own: no scaling, so a hostile file cannot buy
  // memory by declaring (16384, 1).
  void aChosenBatchScalesTheBudgets() {
    fs::path dir = tltest::fresh_temp_dir("memory", "batch");
    for (const std::string first : {"N", "128"}) {
      Builder b;
      b.input("x", {first, "1"});
      ints(b, "wide", {2}, {1, 200000});
      b.node("ConstantOfShape", {"wide"}, {"zeros"});
      floats(b, "one", {1}, {1});
      b.node("Add", {"zeros", "one"}, {"ones"});
      b.node("Mul", {"x", "ones"}, {"spread"});
      b.node("ReduceSum", {"spread", "axis"}, {"y"});
      ints(b, "axis", {1}, {1});
      b.output("y", {});
      OnnxModel m(b.save(dir / ("batch" + first + ".onnx")));
      std::vector<float> x(128);
      std::iota(x.begin(), x.end(), 0.0f);
      const Tensor input = Tensor::from_data(x, {128, 1}, "cpu");
      if (first == "N") {
        const auto y = m.run({input}).at(0).to_vector();
        QCOMPARE(y.at(3), 600000.0f);
      } else {
        EXPECT_ERROR(error_of([&] { m.run({input}); }), "the most one value of this model may hold");
      }
    }
    fs::remove_all(dir);
  }

  // A run within its budget reports what it held: a chain of 300 Adds over
  // a 256 KB input holds its input's copy, a few chain values and the result.
  void aRunReportsItsPeakBytes() {
    Builder b;
    b.input("x", {"256", "256"});
    floats(b, "one", {1}, {1});
    std::string last = "x";
    for (int i = 0; i < 300; ++i) {
      b.node("Add", {last, "one"}, {"a" + std::to_string(i)});
      last = "a" + std::to_string(i);
    }
    b.output(last, {"256", "256"});
    fs::path dir = tltest::fresh_temp_dir("memory", "chain");
    OnnxModel m(b.save(dir / "chain.onnx"));
    Tensor x = Tensor::from_data(std::vector<float>(256 * 256, 0.5f), {256, 256}, "cpu");
    QCOMPARE(m.run({x}).at(0).to_vector().back(), 300.5f);
    const uint64_t value = 256 * 256 * 4;
    QVERIFY2(m.last_run_peak_bytes() >= value && m.last_run_peak_bytes() <= 4 * value,
             std::to_string(m.last_run_peak_bytes()).c_str());
    fs::remove_all(dir);
  }

  // TopK with k = 1000 over 16M elements (a 200-byte file): its rounds on the
  // device kept 16 copies of the input per group and ran 1000 reductions
  // over it (9 GB, then the run guard's error). On the host it is one partial
  // sort per row: the input once.
  void topKOverSixteenMillionElements() {
    Builder b;
    ints(b, "s", {2}, {1, int64_t(1) << 24});
    b.node("ConstantOfShape", {"s"}, {"c"});
    b.node("Range", {"zero", "count", "step"}, {"r"});
    floats(b, "zero", {}, {0});
    floats(b, "count", {}, {float(1 << 24)});
    floats(b, "step", {}, {1});
    b.node("Add", {"c", "r"}, {"d"});  // 0, 1, ..., 2^24 - 1
    ints(b, "k", {1}, {1000});
    b.node("TopK", {"d", "k"}, {"y", "i"});
    b.output("y", {});
    b.output("i", {});
    fs::path dir = tltest::fresh_temp_dir("memory", "topk");
    OnnxModel m(b.save(dir / "topk.onnx"));
    const auto out = m.run({});
    const auto y = out.at(0).to_vector(), i = out.at(1).to_vector();
    QCOMPARE(int64_t(y.size()), int64_t(1000));
    QCOMPARE(y.front(), float((1 << 24) - 1));
    QCOMPARE(y.back(), float((1 << 24) - 1000));
    QCOMPARE(i.back(), float((1 << 24) - 1000));
    const uint64_t input = uint64_t(4) << 24;
    QVERIFY2(m.last_run_peak_bytes() <= 4 * input, std::to_string(m.last_run_peak_bytes()).c_str());
    fs::remove_all(dir);
  }

  // A 300-byte model whose weights are 256 MiB of external uint8 data in a
  // sparse file (no disk used): classify took 6.3 GB, the loader holding the
  // bytes as doubles (8 an element) while its budget counted 1 each. Now
  // they count 8: 2 GiB, past the budget of a load of 256 MiB (4x and 64 MB).
  void sparseExternalBytesCountAsTheyAreHeld() {
    fs::path dir = tltest::fresh_temp_dir("memory", "sparse");
    const uint64_t bytes = uint64_t(256) << 20;
    fs::resize_file((std::ofstream(dir / "w.bin"), dir / "w.bin"), bytes);
    QCOMPARE(uint64_t(fs::file_size(dir / "w.bin")), bytes);
    Builder b;
    b.input("x", {"1"}, onnx::TensorProto::UINT8);
    b.output("y", {});
    auto* w = b.init("w", {int64_t(bytes)}, onnx::TensorProto::UINT8);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w->add_external_data();
    e->set_key("location");
    e->set_value("w.bin");
    b.node("Add", {"w", "x"}, {"y"});
    const std::string path = b.save(dir / "sparse.onnx");
    QVERIFY(fs::file_size(path) < 400);
    HeapWatch load;
    const std::string msg = error_of([&] { OnnxModel m(path); });
    EXPECT_ERROR(msg, "sparse.onnx");
    EXPECT_ERROR(msg, "TINYLENS_TRUST_FILES=1");
    if (TL_COUNTS_HEAP) QVERIFY2(load.growth() < int64_t(bytes) * 2, std::to_string(load.growth()).c_str());
    fs::remove_all(dir);
  }

  // TopK on the host (k past 16) against a sort: ties go to the lower
  // position, largest and smallest, along a middle axis.
  void topKOnTheHostMatchesASort() {
    const int64_t a = 2, n = 40, c = 3, k = 20;
    std::vector<float> x(size_t(a * n * c));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 7) % 11) - 5;
    for (int largest : {1, 0}) {
      Builder b;
      b.input("x", {"2", "40", "3"});
      ints(b, "k", {1}, {k});
      auto* t = b.node("TopK", {"x", "k"}, {"y", "i"});
      int_attr(t, "axis", 1);
      int_attr(t, "largest", largest);
      b.output("y", {});
      b.output("i", {});
      fs::path dir = tltest::fresh_temp_dir("memory", "topk_host");
      OnnxModel m(b.save(dir / "t.onnx"));
      const auto out = m.run({Tensor::from_data(x, {a, n, c}, "cpu")});
      const auto y = out.at(0).to_vector(), ix = out.at(1).to_vector();
      QCOMPARE(out.at(0).shape(), (Shape{a, k, c}));
      for (int64_t o = 0; o < a; ++o)
        for (int64_t j = 0; j < c; ++j) {
          std::vector<int64_t> order(static_cast<size_t>(n));
          std::iota(order.begin(), order.end(), 0);
          auto at = [&](int64_t p) { return x[size_t((o * n + p) * c + j)]; };
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t p, int64_t q) { return largest ? at(p) > at(q) : at(p) < at(q); });
          for (int64_t r = 0; r < k; ++r) {
            QCOMPARE(ix[size_t((o * k + r) * c + j)], float(order[size_t(r)]));
            QCOMPARE(y[size_t((o * k + r) * c + j)], at(order[size_t(r)]));
          }
        }
      fs::remove_all(dir);
    }
  }

  // A chain of 60,000 Adds (the file had 420,000 and took 2.8 GB):
  // the estimate's walk kept every lazy node (in the FLOP count's set and in
  // the values it kept for their shapes), so memory grew with the graph's
  // lazy nodes. Now the walk and the run hold the values later
  // nodes read, and what grows with the file is its shapes' table.
  void aVeryLongChainHoldsWhatTheFileDoes() {
    if (!TL_COUNTS_HEAP) QSKIP("the heap is AddressSanitizer's here: counted in the plain build");
    constexpr int kNodes = 60000;
    Builder b;
    b.input("x", {"1", "3", "8", "8"});
    floats(b, "one", {1}, {1});
    std::string last = "x";
    for (int i = 0; i < kNodes; ++i) {
      b.node("Add", {last, "one"}, {"a" + std::to_string(i)});
      last = "a" + std::to_string(i);
    }
    b.output(last, {"1", "3", "8", "8"});
    fs::path dir = tltest::fresh_temp_dir("memory", "long");
    OnnxModel m(b.save(dir / "long.onnx"));
    Tensor x = Tensor::from_data(std::vector<float>(192, 0.25f), {1, 3, 8, 8}, "cpu");
    std::map<std::string, Shape> shapes;
    HeapWatch walk;
    const OnnxRunCost cost = m.estimate_run({x}, &shapes);
    const int64_t walked = walk.growth();
    QVERIFY(cost.complete);
    QCOMPARE(int64_t(shapes.size()), int64_t(kNodes + 2));
    QCOMPARE(cost.flops, double(kNodes) * 192);
    HeapWatch run;
    QCOMPARE(m.run({x}).at(0).to_vector().front(), 0.25f + kNodes);
    const int64_t ran = run.growth();
    // Measured: about 270 bytes a node (the shapes' table), against 1500
    // when every value stayed alive.
    QVERIFY2(walked < 600 * kNodes, ("walk " + std::to_string(walked)).c_str());
    QVERIFY2(ran < 600 * kNodes, ("run " + std::to_string(ran)).c_str());
    fs::remove_all(dir);
  }
};

QTEST_GUILESS_MAIN(TestOnnxMemory)
#include "test_onnx_memory.moc"
