// Memory of a run (core/memory.h): the values each launch wrote, their
// buffers, lifetimes and reuse, and the peak of live memory. The peak is
// checked against the sum of the live buffers at each launch, computed here
// from the raw records by a walk of its own; the sizes against the tensors'.
#include <QtTest/QtTest>

#include <map>

#include "core/memory.h"
#include "core/profile.h"
#include "core/tensor.h"

using tl::Tensor;

namespace {

// A chain of products: each one's output is read only by the next, so
// run_plan may hand a finished value's buffer to a later kernel.
struct Chain {
  Tensor x;
  std::vector<Tensor> w;
  Tensor run() const {
    Tensor h = x;
    for (auto& wk : w) h = h.matmul(wk).relu();
    return h.sum({1});
  }
};

Chain make_chain() {
  tl::Generator gen(7);
  Chain c;
  c.x = Tensor::randn({48, 40}, gen, "cpu");
  c.x.realize();
  const int64_t sizes[] = {40, 56, 40, 56, 40, 56, 40};
  for (int i = 0; i + 1 < 7; ++i) {
    c.w.push_back(Tensor::randn({sizes[i], sizes[i + 1]}, gen, "cpu") * 0.2);
    c.w.back().realize();
  }
  return c;
}

std::vector<tl::ProfileRecord> records_of(const Chain& c, Tensor* result = nullptr) {
  tl::ProfileCapture capture;
  Tensor y = c.run();
  y.realize();
  if (result) *result = y;
  return capture.records();
}

// The live bytes at each launch, from the records alone: per buffer, its
// uses in order; a write after a read opens a new value; a value is live
// from its first write to its last read, a kept one to the end.
std::vector<size_t> live_by_walk(const std::vector<tl::ProfileRecord>& records) {
  struct Use {
    size_t at;
    bool write, kept;
    size_t bytes;
  };
  std::map<uint64_t, std::vector<Use>> uses;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& b = records[i].buffers;
    if (b.output == 0) continue;
    for (auto& in : b.inputs) uses[in.first].push_back({i, false, false, in.second});
    uses[b.output].push_back({i, true, b.kept, b.output_bytes});
  }
  std::vector<size_t> live(records.size(), 0);
  for (auto& [id, list] : uses) {
    bool open = false, read = false, kept = false;
    size_t first = 0, last = 0, bytes = 0;
    auto close = [&] {
      if (!open) return;
      const size_t end = kept ? records.size() - 1 : last;
      for (size_t i = first; i <= end; ++i) live[i] += bytes;
      open = false;
    };
    for (const Use& u : list) {
      if (u.write) {
        if (open && read) close();
        if (!open) open = true, read = false, kept = false, first = u.at, bytes = u.bytes;
        last = std::max(last, u.at);
        kept = kept || u.kept;
        if (last < first) last = first;
      } else if (open) {
        read = true;
        last = u.at;
      }
    }
    close();
  }
  return live;
}

}  // namespace

class TestMemory : public QObject {
  Q_OBJECT

 private slots:
  void peakIsTheSumOfLiveBuffersAtTheBusiestLaunch() {
    const Chain c = make_chain();
    (void)records_of(c);  // plans and compiles; the next run replays
    Tensor y;
    const auto records = records_of(c, &y);
    QVERIFY(records.size() >= 7);
    const tl::MemoryProfile m = tl::memory_profile(records);
    const std::vector<size_t> live = live_by_walk(records);
    QCOMPARE(m.live_bytes, live);
    size_t peak = 0, at = 0;
    for (size_t i = 0; i < live.size(); ++i)
      if (live[i] > peak) peak = live[i], at = i;
    QVERIFY(peak > 0);
    QCOMPARE(m.peak_bytes, peak);
    QCOMPARE(m.peak_launch, at);
  }

  // Sizes are the tensors': the inputs are x and the weights, only read;
  // the result is kept to the end of the run.
  void sizesWritersAndReaders() {
    const Chain c = make_chain();
    Tensor y;
    const auto records = records_of(c, &y);
    const tl::MemoryProfile m = tl::memory_profile(records);
    size_t weights = size_t(c.x.numel()) * 4;
    for (auto& w : c.w) weights += size_t(w.numel()) * 4;
    QCOMPARE(m.input_buffers, size_t(1 + c.w.size()));
    QCOMPARE(m.input_bytes, weights);
    const tl::MemoryValue& result = m.values.back();
    QVERIFY(result.kept);
    QCOMPARE(result.value_bytes, size_t(48) * 4);
    QCOMPARE(result.last, records.size() - 1);
    for (auto& v : m.values) {
      QVERIFY(v.value_bytes <= v.bytes);
      QVERIFY(!v.writers.empty() && v.writers.front() == v.first);
      for (size_t r : v.readers) QVERIFY(r > v.first && r <= v.last);
      if (!v.kept) QCOMPARE(v.last, v.readers.back());
    }
  }

  // run_plan's reuse, seen in the values: a buffer holds a later value only
  // after the earlier one's last read; with TINYLENS_NOREUSE=1 none does.
  void reuseNeverOverlapsAndCanBeTurnedOff() {
    const Chain c = make_chain();
    const tl::MemoryProfile reused = tl::memory_profile(records_of(c));
    QVERIFY(reused.reused_buffers > 0);
    std::map<uint64_t, size_t> last_of;
    for (auto& v : reused.values) {
      if (auto it = last_of.find(v.buffer); it != last_of.end()) QVERIFY(v.first > it->second);
      last_of[v.buffer] = v.last;
    }
    qputenv("TINYLENS_NOREUSE", "1");
    const tl::MemoryProfile own = tl::memory_profile(records_of(c));
    qunsetenv("TINYLENS_NOREUSE");
    QCOMPARE(own.reused_buffers, size_t(0));
    QCOMPARE(own.buffers, own.values.size());
    QVERIFY(own.buffer_bytes > reused.buffer_bytes);
    const std::string text = tl::format_memory(reused, records_of(c));
    QVERIFY(text.find("peak") != std::string::npos && text.find("reused") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestMemory)
#include "test_memory.moc"
