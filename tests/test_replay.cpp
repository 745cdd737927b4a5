// Replay (core/replay.h) and training steps as one realize: a replayed
// realize gives the same bits as a freshly planned one on every device, for
// a classifier and for a training step; a change of structure plans afresh;
// a cancel leaves tensors as they were; the plan cache stays bounded.
#include <QtTest/QtTest>

#include <cstdlib>
#include <cstring>
#include <random>

#include "core/data/dataset.h"
#include "core/io/image.h"
#include "core/jit.h"
#include "core/models/classifier.h"
#include "core/nn/layers.h"
#include "core/nn/optim.h"
#include "core/realize.h"
#include "core/replay.h"
#include "core/runtime/buffer_pool.h"
#include "core/runtime/device.h"
#include "core/tensor.h"
#include "core/train/models.h"
#include "core/train/trainer.h"
#include "tests/compare.h"
#include "tests/testing.h"

using tl::Tensor;
namespace data = tl::data;

namespace {

// Sets TINYLENS_NOREPLAY for its lifetime.
struct NoReplay {
  NoReplay() { ::setenv("TINYLENS_NOREPLAY", "1", 1); }
  ~NoReplay() { ::unsetenv("TINYLENS_NOREPLAY"); }
};

// A device that only counts its allocations and frees (for the pool).
struct CountingDevice : tl::Device {
  struct Counted : tl::Buffer {
    Counted(tl::Device* d, size_t bytes, int* frees) : tl::Buffer(d, bytes), frees(frees) {}
    ~Counted() override { ++*frees; }
    int* frees;
  };
  CountingDevice() { info_.name = "counting", info_.available = true; }
  const tl::DeviceInfo& info() const override { return info_; }
  std::shared_ptr<tl::Buffer> allocate(size_t bytes) override {
    ++allocations;
    return std::make_shared<Counted>(this, bytes, &frees);
  }
  void copy_in(tl::Buffer&, const void*, size_t) override {}
  void copy_out(const tl::Buffer&, void*, size_t) override {}
  const tl::Dialect& dialect() const override { return dialect_; }
  tl::Built build(const std::string&, const std::string&) override { return {}; }
  std::shared_ptr<tl::Program> load(const std::string&, const std::string&) override { return nullptr; }
  tl::DeviceInfo info_;
  tl::Dialect dialect_;
  int allocations = 0, frees = 0;
};

size_t replayed(const std::vector<tl::ProfileRecord>& records) {
  size_t n = 0;
  for (auto& r : records) n += r.replayed;
  return n;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// x * 3 + 1 summed over axis 1, for a (rows, 4) input.
std::vector<float> small_graph(const std::vector<float>& x, int64_t rows, const std::string& device, double scale,
                               std::vector<tl::ProfileRecord>& records) {
  Tensor t = Tensor::from_data(x, {rows, 4}, device);
  tl::ProfileCapture capture;
  auto out = (t * scale + 1.0).sum({1}).to_vector();
  records = capture.records();
  return out;
}

// A small data set the CNN can take steps on: three classes of 8x8 images.
data::Dataset toy_digits() {
  data::Dataset ds;
  ds.height = ds.width = 8;
  ds.classes = 3;
  std::mt19937 rng(7);
  for (int i = 0; i < 24; ++i) {
    ds.labels.push_back(i % 3);
    for (int p = 0; p < 64; ++p) ds.pixels.push_back(float(rng() % 100) / 100.f + (p % 3 == i % 3 ? 0.5f : 0.f));
  }
  return ds;
}

struct StepRun {
  std::vector<float> losses;
  std::vector<size_t> replayed_per_step, kernels_per_step;
  std::vector<std::vector<float>> state;  // every parameter and buffer after the last step
};

// `steps` training steps of the digits CNN on `device`; `one_plan` runs them
// through Trainer::step (one realize per step), otherwise through the old
// sequence of realizes (forward, gradients, each batch norm, update).
StepRun train_steps(const std::string& device, int steps, bool one_plan) {
  data::Dataset ds = toy_digits();
  tl::Generator gen(3);
  auto model = tl::train::make_cnn(8, 8, 3, gen, device);
  tl::nn::SGD opt(model->parameters(), 0.05, {.momentum = 0.9});
  tl::train::Trainer trainer(*model, opt);
  data::Batches batches(ds, 8, true, 5, false, 0, device);
  StepRun run;
  data::Batch b;
  batches.start_epoch(0);
  for (int s = 0; s < steps; ++s) {
    if (!batches.next(b)) batches.start_epoch(s), batches.next(b);
    if (one_plan) {
      auto r = trainer.step(b);
      run.losses.push_back(float(r.loss));
      run.replayed_per_step.push_back(replayed(r.kernels));
      run.kernels_per_step.push_back(r.kernels.size());
    } else {
      model->train(true);
      opt.zero_grad();
      Tensor logits = (*model)(b.images);
      Tensor loss = logits.cross_entropy(b.labels);
      tl::realize_nodes({loss.node(), logits.node()});
      loss.backward();
      opt.step();
      run.losses.push_back(loss.item());
    }
  }
  for (auto& [name, t] : model->named_parameters()) run.state.push_back(t->to_vector());
  for (auto& [name, t] : model->named_buffers()) run.state.push_back(t->to_vector());
  return run;
}

}  // namespace

class TestReplay : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { ::unsetenv("TINYLENS_NOREPLAY"); }

  // The same structure with new data replays; a new shape or a new constant
  // (baked into the kernel) is planned afresh; results are never overwritten.
  // The buffer pool under replay: a released buffer of the same size comes
  // back instead of a new allocation; other sizes allocate; past its
  // capacity, or once the pool is gone, a released buffer is freed.
  void bufferPoolReusesBySizeWithinItsCapacity() {
    ::unsetenv("TINYLENS_POOL_MB");
    CountingDevice dev;
    {
      tl::BufferPool pool(300);
      tl::Buffer* first = nullptr;
      {
        auto a = pool.get(dev, 100);
        first = a.get();
        QCOMPARE(a->bytes(), size_t(100));
      }
      QCOMPARE(dev.frees, 0);
      QCOMPARE(pool.held_bytes(), size_t(100));
      auto b = pool.get(dev, 100);
      QCOMPARE(b.get(), first);  // the same buffer, not a new one
      QCOMPARE(dev.allocations, 1);
      auto c = pool.get(dev, 200);
      QCOMPARE(dev.allocations, 2);
      auto d = pool.get(dev, 200);
      QCOMPARE(dev.allocations, 3);
      b.reset(), c.reset();  // 100 + 200 fit the capacity of 300
      QCOMPARE(pool.held_bytes(), size_t(300));
      d.reset();  // does not fit: freed
      QCOMPARE(dev.frees, 1);
      auto e = pool.get(dev, 100);
      QCOMPARE(pool.held_bytes(), size_t(200));
      pool.clear();
      QCOMPARE(dev.frees, 2);
      tl::BufferPool off(0);  // capacity 0: every buffer is freed on release
      off.get(dev, 64).reset();
      QCOMPARE(dev.frees, 3);
      // A pool that dies first: what it handed out is freed when released.
      std::shared_ptr<tl::Buffer> orphan;
      {
        tl::BufferPool gone(1000);
        orphan = gone.get(dev, 48);
      }
      const int before = dev.frees;
      orphan.reset();
      QCOMPARE(dev.frees, before + 1);
    }
  }

  void sameStructureReplaysAndNewStructureDoesNot() {
    for (auto& device : tltest::available_devices()) {
      std::vector<tl::ProfileRecord> rec;
      // 17: a scale no other test uses, so the first run here plans.
      auto a = small_graph({1, 2, 3, 4, 5, 6, 7, 8}, 2, device, 17, rec);
      QVERIFY(!rec.empty());
      QCOMPARE(replayed(rec), size_t(0));
      QCOMPARE(a, (std::vector<float>{174, 446}));
      auto b = small_graph({0, 1, 0, 1, 2, 2, 2, 2}, 2, device, 17, rec);
      QCOMPARE(replayed(rec), rec.size());
      QCOMPARE(b, (std::vector<float>{38, 140}));
      // another row: a different shape, planned
      auto c = small_graph({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 3, device, 17, rec);
      QCOMPARE(replayed(rec), size_t(0));
      QCOMPARE(c, (std::vector<float>{72, 72, 72}));
      // another constant: a different kernel, planned
      auto d = small_graph({1, 2, 3, 4, 5, 6, 7, 8}, 2, device, 19, rec);
      QCOMPARE(replayed(rec), size_t(0));
      QCOMPARE(d, (std::vector<float>{194, 498}));
      // off by the environment
      {
        NoReplay off;
        small_graph({1, 2, 3, 4, 5, 6, 7, 8}, 2, device, 17, rec);
        QCOMPARE(replayed(rec), size_t(0));
      }
      // Earlier outputs keep their values: a replay writes fresh buffers.
      Tensor x = Tensor::from_data({1, 2, 3, 4}, {1, 4}, device);
      Tensor first = (x * 17.0 + 1.0).sum({1}).realize();
      Tensor y = Tensor::from_data({4, 3, 2, 1}, {1, 4}, device);
      Tensor second = (y * 17.0 + 1.0).sum({1}).realize();
      QCOMPARE(first.to_vector(), std::vector<float>{174});
      QCOMPARE(second.to_vector(), std::vector<float>{174});
      Tensor z = Tensor::from_data({0, 0, 0, 1}, {1, 4}, device);
      Tensor third = (z * 17.0 + 1.0).sum({1}).realize();
      QCOMPARE(third.to_vector(), std::vector<float>{21});
      QCOMPARE(first.to_vector(), std::vector<float>{174});
    }
  }

  // Which inputs are realized is part of the key: the same expression over a
  // realized input and over an unrealized one are different plans.
  void realizedInputsArePartOfTheKey() {
    Tensor a = Tensor::from_data({1, 2, 3, 4}, {4}, "cpu");
    std::vector<tl::ProfileRecord> rec;
    {
      tl::ProfileCapture cap;
      QVERIFY(std::fabs((a * 0.5).exp().log().to_vector()[3] - 2) < 1e-6);
    }
    Tensor b = Tensor::from_data({1, 2, 3, 4}, {4}, "cpu") * 1.0;  // unrealized: computed in the same realize
    tl::ProfileCapture cap;
    auto v = (b * 0.5).exp().log().to_vector();
    QCOMPARE(replayed(cap.records()), size_t(0));
    QVERIFY(std::fabs(v[3] - 2) < 1e-6);
  }

  void planCacheIsBounded() {
    std::vector<tl::ProfileRecord> rec;
    small_graph({1, 2, 3, 4}, 1, "cpu", 1000, rec);
    small_graph({1, 2, 3, 4}, 1, "cpu", 1000, rec);
    QCOMPARE(replayed(rec), rec.size());
    for (size_t i = 0; i < tl::kMaxPlans; ++i) small_graph({1, 2, 3, 4}, 1, "cpu", 2000 + double(i), rec);
    auto v = small_graph({1, 2, 3, 4}, 1, "cpu", 1000, rec);  // evicted: planned again
    QCOMPARE(replayed(rec), size_t(0));
    QCOMPARE(v, std::vector<float>{10004});
  }

  // A cancel between kernels leaves the graph unrealized, replay or not.
  void cancelLeavesTensorsUnchanged() {
    std::vector<tl::ProfileRecord> rec;
    small_graph({1, 2, 3, 4}, 1, "cpu", 31, rec);  // now remembered
    std::atomic<bool> cancel{true};
    Tensor x = Tensor::from_data({1, 2, 3, 4}, {1, 4}, "cpu");
    Tensor y = (x * 31.0 + 1.0).sum({1});
    tl::set_cancel_flag(&cancel);
    QVERIFY_THROWS_EXCEPTION(tl::Cancelled, y.realize());
    tl::set_cancel_flag(nullptr);
    QVERIFY(!y.node()->realized());
    QCOMPARE(y.to_vector(), std::vector<float>{314});

    // A training step cancelled in its one realize changes no weight, no
    // optimizer state and no running statistic.
    data::Dataset ds = toy_digits();
    tl::Generator gen(3);
    auto model = tl::train::make_cnn(8, 8, 3, gen, "cpu");
    tl::nn::SGD opt(model->parameters(), 0.05, {.momentum = 0.9});
    tl::train::Trainer trainer(*model, opt);
    data::Batches batches(ds, 8, false, 0, false, 0, "cpu");
    data::Batch b;
    batches.start_epoch(0);
    QVERIFY(batches.next(b));
    trainer.step(b);
    std::vector<tl::NodeRef> before;
    for (auto& [n, t] : model->named_parameters()) before.push_back(t->node());
    for (auto& [n, t] : model->named_buffers()) before.push_back(t->node());
    tl::set_cancel_flag(&cancel);
    QVERIFY_THROWS_EXCEPTION(tl::Cancelled, trainer.step(b));
    tl::set_cancel_flag(nullptr);
    size_t i = 0;
    for (auto& [n, t] : model->named_parameters()) QVERIFY2(t->node() == before[i++], n.c_str());
    for (auto& [n, t] : model->named_buffers()) QVERIFY2(t->node() == before[i++], n.c_str());
    auto after = trainer.step(b);  // and it still trains, replayed
    QCOMPARE(replayed(after.kernels), after.kernels.size());
  }

  // EfficientNet-Lite0 on the squirrel photo and on a second image: replayed
  // logits equal freshly planned ones bit for bit, on every device.
  void classifierReplaysBitForBit() {
    TL_REQUIRE(tltest::weights_installed(), "EfficientNet-Lite0 weights (scripts/setup downloads them)");
    auto model = tl::load_classifier("efficientnet-lite0");
    tl::Image squirrel = tl::load_image(tltest::kSquirrel);
    tl::Image mirrored = squirrel;  // a second input: the photo mirrored left to right
    for (int y = 0; y < mirrored.height; ++y)
      for (int x = 0; x < mirrored.width; ++x)
        for (int c = 0; c < 3; ++c)
          mirrored.rgb[size_t((y * mirrored.width + x) * 3 + c)] =
              squirrel.rgb[size_t((y * squirrel.width + (squirrel.width - 1 - x)) * 3 + c)];
    tl::NoGrad ng;
    for (auto& device : tltest::available_devices()) {
      auto logits = [&](const tl::Image& image, std::vector<tl::ProfileRecord>& records) {
        Tensor input = model->preprocess(image, device).realize();
        tl::ProfileCapture cap;
        auto v = model->forward(input).to_vector();
        records = cap.records();
        return v;
      };
      std::vector<tl::ProfileRecord> rec;
      std::vector<float> fresh_a, fresh_b;
      {
        NoReplay off;
        fresh_a = logits(squirrel, rec);
        fresh_b = logits(mirrored, rec);
        QCOMPARE(replayed(rec), size_t(0));
      }
      logits(squirrel, rec);  // plans (or replays a plan of an earlier test)
      auto b = logits(mirrored, rec);
      QVERIFY2(rec.size() > 50, qPrintable(QString::number(rec.size())));
      QCOMPARE(replayed(rec), rec.size());
      QVERIFY2(same_bits(b, fresh_b), device.c_str());
      QVERIFY(!same_bits(fresh_a, fresh_b));  // the two inputs do differ
      auto a = logits(squirrel, rec);
      QCOMPARE(replayed(rec), rec.size());
      QVERIFY2(same_bits(a, fresh_a), device.c_str());

      // Through the classifier's Jit: the same bits, every kernel replayed,
      // and the earlier result untouched by the later run.
      Tensor in_a = model->preprocess(squirrel, device).realize();
      Tensor in_b = model->preprocess(mirrored, device).realize();
      Tensor ja = model->infer(in_a);
      Tensor jb;
      {
        tl::ProfileCapture cap;
        jb = model->infer(in_b);
        rec = cap.records();
      }
      QVERIFY2(model->jit_captured(), device.c_str());
      QCOMPARE(replayed(rec), rec.size());
      QVERIFY2(same_bits(jb.to_vector(), fresh_b), device.c_str());
      QVERIFY2(same_bits(ja.to_vector(), fresh_a), device.c_str());
    }
  }

  // Plan::Kernel::keep and frees: an intermediate that only later kernels of
  // the plan read is not kept (reading it afterwards computes it again), and
  // its buffer serves later kernels once its last reader has run. Here h1 is
  // read by the next kernel and again two kernels on (a residual): freed
  // after its first reader, the residual's kernel would write over it. Same
  // bits as with every output in its own buffer (TINYLENS_NOREUSE=1), on
  // every device; a node that a gradient may flow through is kept.
  void intermediateBuffersServeLaterKernels() {
    NoReplay fresh_plans;  // reuse_enabled() is read when a plan is made
    auto values = [](int64_t n, int seed) {
      std::vector<float> v(static_cast<size_t>(n));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 29 + size_t(seed) * 7) % 31) - 15) * 0.03125f;
      return v;
    };
    for (auto& device : tltest::available_devices()) {
      Tensor x = Tensor::from_data(values(16 * 32, 1), {16, 32}, device).realize();
      Tensor w1 = Tensor::from_data(values(32 * 32, 2), {32, 32}, device).realize();
      Tensor w2 = Tensor::from_data(values(32 * 32, 3), {32, 32}, device).realize();
      Tensor w3 = Tensor::from_data(values(32 * 32, 4), {32, 32}, device).realize();
      struct Run {
        std::vector<float> out, h1;
        bool h1_kept = false;
      };
      auto run = [&](bool reuse, bool grad) {
        if (!reuse) ::setenv("TINYLENS_NOREUSE", "1", 1);
        Tensor a = grad ? Tensor::from_data(values(32 * 32, 2), {32, 32}, device).requires_grad() : w1;
        Tensor h1 = x.matmul(a).relu();
        Tensor h2 = h1.matmul(w2).relu();
        Tensor h3 = h2.matmul(w3) + h1;
        Tensor out = (h3.matmul(w1) * 0.25).exp().sum({1});
        out.realize();
        ::unsetenv("TINYLENS_NOREUSE");
        Run r;
        r.h1_kept = h1.node()->realized();
        r.out = out.to_vector();
        r.h1 = h1.to_vector();  // computed again when it was not kept
        return r;
      };
      const Run reused = run(true, false), plain = run(false, false);
      QVERIFY2(same_bits(reused.out, plain.out), device.c_str());
      QVERIFY2(same_bits(reused.h1, plain.h1), device.c_str());
      QVERIFY2(!reused.h1_kept, device.c_str());
      QVERIFY2(plain.h1_kept, device.c_str());
      const Run with_grad = run(true, true);
      QVERIFY2(with_grad.h1_kept, device.c_str());
      QVERIFY2(same_bits(with_grad.out, plain.out), device.c_str());
    }
  }

  // core/jit.h: the second call replays without calling the function; a new
  // input is bound in; earlier results survive; another shape, or a function
  // that realizes something made from its input, runs the function.
  void jitReplaysWithoutCallingTheFunction() {
    tl::Generator gen(5);
    Tensor w = Tensor::randn({4, 3}, gen).realize(), bias = Tensor::randn({3}, gen).realize();
    int calls = 0;
    tl::Jit jit([&](const Tensor& x) {
      ++calls;
      return (x.matmul(w) + bias).relu() * 2.0;
    });
    auto direct = [&](const Tensor& x) { return ((x.matmul(w) + bias).relu() * 2.0).to_vector(); };
    Tensor x1 = Tensor::randn({5, 4}, gen), x2 = Tensor::randn({5, 4}, gen), x3 = Tensor::randn({2, 4}, gen);
    Tensor r1 = jit(x1);
    QVERIFY(r1.node()->realized());
    QVERIFY(jit.captured());
    Tensor r2 = jit(x2);
    QCOMPARE(calls, 1);
    QVERIFY(same_bits(r2.to_vector(), direct(x2)));
    QVERIFY(same_bits(r1.to_vector(), direct(x1)));  // not overwritten by the replay
    QVERIFY(!same_bits(r1.to_vector(), r2.to_vector()));
    {
      // A replay makes a node only where the plan keeps an output (here the
      // result alone); a timed profile names every fused node of each kernel,
      // so it makes them all, new ones.
      const uint64_t before = tl::Node::next_id();
      Tensor r = jit(x1);
      QCOMPARE(tl::Node::next_id() - before - 1, uint64_t(1));  // next_id() takes an id itself
      QVERIFY(same_bits(r.to_vector(), direct(x1)));
      tl::ProfileCapture capture;
      const uint64_t timed_before = tl::Node::next_id();
      QVERIFY(same_bits(jit(x2).to_vector(), direct(x2)));
      QVERIFY(!capture.records().empty());
      size_t named = 0;
      for (const auto& rec : capture.records()) {
        QVERIFY(rec.replayed);
        QVERIFY(rec.kernel->output_node >= timed_before);
        for (uint64_t id : rec.kernel->node_ids) {
          QVERIFY(id >= timed_before);
          ++named;
        }
      }
      QVERIFY(named > 1);
      QCOMPARE(calls, 1);
    }
    Tensor r3 = jit(x3);  // another shape: the function runs
    QCOMPARE(calls, 2);
    QVERIFY(same_bits(r3.to_vector(), direct(x3)));
    {
      NoReplay off;  // replay off: the function runs every time
      Tensor r = jit(x3);
      QCOMPARE(calls, 3);
      QVERIFY(same_bits(r.to_vector(), direct(x3)));
    }

    int impure_calls = 0;
    tl::Jit impure([&](const Tensor& x) {
      ++impure_calls;
      Tensor mean = x.mean();
      mean.realize();  // realized inside, from the input: a replay would reuse it
      return x - mean;
    });
    auto want = [](const Tensor& x) { return (x - x.mean()).to_vector(); };
    impure(x1);
    QVERIFY(!impure.captured());
    QVERIFY(same_bits(impure(x2).to_vector(), want(x2)));
    QCOMPARE(impure_calls, 2);

    // Reading the input back to the host and computing with what it held
    // (no realize: the input is already computed) is impure too.
    tl::Jit reader([&](const Tensor& x) { return x * double(x.to_vector()[0]); });
    for (const Tensor* x : {&x1, &x2, &x1}) {
      const float first = x->to_vector()[0];
      QVERIFY(same_bits(reader(*x).to_vector(), (*x * double(first)).to_vector()));
    }
    QVERIFY(!reader.captured());
  }

  // Training steps: with replay the losses, weights, optimizer state and
  // running statistics equal those of TINYLENS_NOREPLAY=1 bit for bit; from
  // the second step on (when the momentum exists) every kernel is replayed.
  void trainingStepReplaysBitForBit() {
    for (auto& device : tltest::available_devices()) {
      StepRun fresh;
      {
        NoReplay off;
        fresh = train_steps(device, 4, true);
      }
      StepRun replay = train_steps(device, 4, true);
      QCOMPARE(replay.losses, fresh.losses);
      QCOMPARE(replay.state.size(), fresh.state.size());
      for (size_t i = 0; i < fresh.state.size(); ++i) QVERIFY2(same_bits(replay.state[i], fresh.state[i]), device.c_str());
      for (int s = 1; s < 4; ++s) QCOMPARE(replay.replayed_per_step[size_t(s)], replay.kernels_per_step[size_t(s)]);
      for (size_t r : fresh.replayed_per_step) QCOMPARE(r, size_t(0));
    }
  }

  // One realize per step gives the numbers of the old sequence of realizes
  // (forward; gradients; each batch norm's statistics; update) within float
  // rounding: the two fuse differently, so a reduction may read a stored
  // value in one (summed in vector lanes) and recompute it in the other
  // (summed in order); after five steps of SGD the losses differ by up to
  // 2e-5 relative (3e-5 allowed, against the 1e-5 of one step's PyTorch
  // goldens in tests/test_nn.cpp).
  void oneRealizePerStepMatchesSeparateRealizes() {
    StepRun together = train_steps("cpu", 5, true);
    StepRun separate = train_steps("cpu", 5, false);
    std::string why;
    QVERIFY2(tltest::all_close(together.losses, separate.losses, 3e-5, 1e-6, &why), why.c_str());
    QCOMPARE(together.state.size(), separate.state.size());
    for (size_t i = 0; i < together.state.size(); ++i)
      QVERIFY2(tltest::all_close(together.state[i], separate.state[i], 3e-5, 1e-6, &why), why.c_str());
  }

  // train_epoch reads step k's loss and logits only after step k + 1's graph
  // is built (a GPU's realize returns before its kernels finish, and the
  // host builds the next step meanwhile), and calls on_step once step k + 1
  // is queued (where the callback may compute). Two epochs of it give the losses,
  // accuracies, weights, optimizer state and running statistics of step()
  // after step(), bit for bit, on every device; the epoch's figures are
  // those steps' averages and the steps' seconds add up to the epoch's.
  void epochOverlapsStepsWithTheSameNumbers() {
    for (auto& device : tltest::available_devices()) {
      std::string problems;  // QVERIFY cannot return from the lambda below
      auto expect = [&](bool ok, const std::string& what) {
        if (!ok) problems += device + ": " + what + "\n";
      };
      auto run = [&](bool by_epoch, std::vector<double>& losses, std::vector<double>& accuracies) {
        data::Dataset ds = toy_digits();
        tl::Generator gen(3);
        auto model = tl::train::make_cnn(8, 8, 3, gen, device);
        tl::nn::Adam opt(model->parameters(), 0.01);
        tl::train::Trainer trainer(*model, opt);
        trainer.time_kernels(false);  // as `tinylens-cli train` without --profile: nothing waits
        data::Batches batches(ds, 8, true, 5, false, 0, device);
        for (int epoch = 0; epoch < 2; ++epoch) {
          if (by_epoch) {
            double seconds = 0, loss = 0, accuracy = 0;
            int64_t launches = 0;
            auto e = trainer.train_epoch(batches, epoch, nullptr, [&](const tl::train::StepResult& s) {
              losses.push_back(s.loss), accuracies.push_back(s.accuracy);
              expect(s.seconds > 0 && s.samples == 8, "a step's seconds or samples");
              // on_step runs outside the next step's collection: it may compute and read
              try {
                expect(std::isfinite((model->parameters()[0]->detach() * 2.0).sum().item()), "a weight's sum");
              } catch (const std::exception& e) {
                expect(false, std::string("on_step could not compute: ") + e.what());
              }
              seconds += s.seconds, loss += s.loss / 3, accuracy += s.accuracy / 3;
              launches += int64_t(s.kernels.size());
            });
            expect(e.seconds == seconds, "the epoch's seconds are not its steps'");
            expect(std::abs(e.train_loss - loss) < 1e-12, "the epoch's loss is not its steps' average");
            expect(std::abs(e.train_accuracy - accuracy) < 1e-12, "the epoch's accuracy is not its steps' average");
            expect(e.kernel_launches == launches && launches > 0, "the epoch's launches");
          } else {
            data::Batch b;
            for (batches.start_epoch(epoch); batches.next(b);) {
              auto s = trainer.step(b);
              losses.push_back(s.loss), accuracies.push_back(s.accuracy);
            }
          }
        }
        std::vector<std::vector<float>> state;
        for (auto& [name, t] : model->named_parameters()) state.push_back(t->to_vector());
        for (auto& [name, t] : model->named_buffers()) state.push_back(t->to_vector());
        return state;
      };
      std::vector<double> epoch_losses, step_losses, epoch_accuracies, step_accuracies;
      auto by_epoch = run(true, epoch_losses, epoch_accuracies);
      auto by_step = run(false, step_losses, step_accuracies);
      QVERIFY2(problems.empty(), problems.c_str());
      QCOMPARE(epoch_losses.size(), size_t(6));
      QCOMPARE(epoch_losses, step_losses);
      QCOMPARE(epoch_accuracies, step_accuracies);
      QVERIFY2(epoch_losses.back() < epoch_losses.front(), device.c_str());
      QCOMPARE(by_epoch.size(), by_step.size());
      for (size_t i = 0; i < by_step.size(); ++i) QVERIFY2(same_bits(by_epoch[i], by_step[i]), device.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(TestReplay)
#include "test_replay.moc"
