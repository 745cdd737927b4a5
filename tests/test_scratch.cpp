// The GEMM library's scratch (core/runtime/scratch.h): each thread's block
// hands a call's pieces out one after another, and the next call gets the
// same memory again; a call that outgrows the block gets malloc's memory and
// the block grows once it is whole; a need past the cap never grows it. On
// the C device the library's calls take every piece from the blocks once
// they have grown, and the convolutions they compute stay right.
#include <QtTest/QtTest>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/runtime/scratch.h"
#include "core/tensor.h"
#include "tests/testing.h"

using tl::ScratchArena;
using tl::Tensor;

namespace {

std::vector<float> normal(size_t n, uint32_t seed) { return tltest::normal_floats(n, seed); }

// relu(conv(x, w) + b) for one image, stride 1, zero padding `pad`, in double.
std::vector<double> conv_reference(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, int64_t cin, int64_t cout, int64_t hw, int64_t k,
                                   int64_t pad) {
  const int64_t out_hw = hw + 2 * pad - k + 1;
  std::vector<double> y(size_t(cout * out_hw * out_hw));
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t oy = 0; oy < out_hw; ++oy)
      for (int64_t ox = 0; ox < out_hw; ++ox) {
        double acc = b[size_t(o)];
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t iy = oy + ky - pad, ix = ox + kx - pad;
              if (iy < 0 || ix < 0 || iy >= hw || ix >= hw) continue;
              acc += double(w[size_t(((o * cin + c) * k + ky) * k + kx)]) * double(x[size_t((c * hw + iy) * hw + ix)]);
            }
        y[size_t((o * out_hw + oy) * out_hw + ox)] = acc > 0 ? acc : 0;
      }
  return y;
}

}  // namespace

class TestScratch : public QObject {
  Q_OBJECT
 private slots:
  void theNextCallGetsTheSameMemory() {
    ScratchArena arena;
    // First call: no block yet, so malloc serves; the block is then sized to it.
    void* a = arena.take(1000);
    void* b = arena.take(5000);
    QVERIFY(a && b);
    QVERIFY(!arena.in_block(a) && !arena.in_block(b));
    arena.give(a);
    arena.give(b);
    std::vector<void*> seen;
    for (int call = 0; call < 3; ++call) {
      void* p = arena.take(1000);
      void* q = arena.take(5000);
      QVERIFY(arena.in_block(p) && arena.in_block(q));
      QCOMPARE(static_cast<unsigned char*>(q) - static_cast<unsigned char*>(p), std::ptrdiff_t(1024));
      if (call > 0) QCOMPARE(p, seen[0]);
      seen.push_back(p);
      arena.give(q);  // any order
      arena.give(p);
    }
    QVERIFY(arena.block_bytes() >= 6016);
  }

  void piecesAreAlignedAndDisjoint() {
    ScratchArena arena;
    const std::vector<size_t> sizes = {1, 63, 64, 65, 0, 4096, 7};
    for (int call = 0; call < 2; ++call) {  // from malloc, then from the block
      std::vector<unsigned char*> pieces;
      for (size_t i = 0; i < sizes.size(); ++i) {
        auto* p = static_cast<unsigned char*>(arena.take(sizes[i]));
        QVERIFY(p);
        QCOMPARE(reinterpret_cast<uintptr_t>(p) % 64, uintptr_t(0));
        std::memset(p, int(i + 1), std::max<size_t>(sizes[i], 1));
        pieces.push_back(p);
      }
      for (size_t i = 0; i < sizes.size(); ++i)
        for (size_t j = 0; j < std::max<size_t>(sizes[i], 1); ++j) QCOMPARE(int(pieces[i][j]), int(i + 1));
      QCOMPARE(arena.in_block(pieces.back()), call == 1);
      for (auto* p : pieces) arena.give(p);
    }
    arena.give(nullptr);  // ignored
  }

  void aCallThatOutgrowsTheBlockGrowsItAfterwards() {
    ScratchArena arena;
    arena.give(arena.take(6000));  // the block grows when the next call starts
    void* p = arena.take(6000);
    QVERIFY(arena.in_block(p));
    const size_t block = arena.block_bytes();  // rounded up
    QVERIFY(block >= 6000);
    void* q = arena.take(block);  // past what is left: malloc's, for this call
    QVERIFY(q && !arena.in_block(q));
    std::memset(q, 1, block);
    arena.give(p);
    arena.give(q);
    p = arena.take(6000);
    q = arena.take(block);
    QVERIFY(arena.in_block(p) && arena.in_block(q));
    QVERIFY(arena.block_bytes() >= block + 6000);
    arena.give(p);
    arena.give(q);
  }

  void aNeedPastTheCapNeverGrowsTheBlock() {
    ScratchArena arena;
    const size_t big = ScratchArena::kMaxBlock + 64;
    for (int call = 0; call < 2; ++call) {
      void* small = arena.take(1000);
      void* p = arena.take(big);
      QVERIFY(p && !arena.in_block(p));
      arena.give(p);
      arena.give(small);
      QVERIFY(arena.block_bytes() <= ScratchArena::kMaxBlock);
    }
    void* p = arena.take(1000);
    QVERIFY(arena.in_block(p));  // the calls' small needs are still served
    arena.give(p);
  }

  // Gathered 3x3 (Winograd or direct), strided and 1x1 convolutions on the C
  // device: once every thread's block has grown to what its pieces need,
  // every piece of a run comes from the blocks, and the values match a
  // double-precision convolution. Which thread runs which piece depends on
  // the machine's load (the pool shares pieces), so a thread may first meet
  // a larger need in any run and grow its block after it; blocks only grow,
  // so within a few runs one takes nothing from outside them.
  void theGemmLibraryTakesItsScratchFromTheBlocks() {
    struct Case {
      int64_t cin, cout, hw, k, pad;
    };
    const std::vector<Case> cases = {{16, 64, 28, 3, 1}, {32, 48, 14, 1, 0}, {8, 24, 17, 5, 2}};
    std::vector<std::vector<Tensor>> inputs;  // x, w, b: realized once, like a model's weights
    std::vector<std::vector<double>> expected;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const auto xv = normal(size_t(c.cin * c.hw * c.hw), uint32_t(10 * i + 1));
      const auto wv = normal(size_t(c.cout * c.cin * c.k * c.k), uint32_t(10 * i + 2));
      const auto bv = normal(size_t(c.cout), uint32_t(10 * i + 3));
      expected.push_back(conv_reference(xv, wv, bv, c.cin, c.cout, c.hw, c.k, c.pad));
      inputs.push_back({Tensor::from_data(xv, {1, c.cin, c.hw, c.hw}, "cpu"),
                        Tensor::from_data(wv, {c.cout, c.cin, c.k, c.k}, "cpu"), Tensor::from_data(bv, {c.cout}, "cpu")});
    }
    tl::ScratchCounts before{}, after{};
    int run = 0;
    for (; run < 12; ++run) {
      before = tl::scratch_counts();
      for (size_t i = 0; i < cases.size(); ++i) {
        tl::Conv2dOptions opt;
        opt.pad_h = opt.pad_w = cases[i].pad;
        const std::vector<float> got = inputs[i][0].conv2d(inputs[i][1], inputs[i][2], opt).relu().to_vector();
        QCOMPARE(got.size(), expected[i].size());
        for (size_t j = 0; j < got.size(); ++j) {
          const double tol = 1e-4 * (1.0 + std::abs(expected[i][j])) * double(cases[i].cin * cases[i].k);
          if (std::abs(double(got[j]) - expected[i][j]) > tol)
            QFAIL(qPrintable(QString("case %1, element %2: %3 against %4").arg(i).arg(j).arg(got[j]).arg(expected[i][j])));
        }
      }
      after = tl::scratch_counts();
      QVERIFY(after.takes > before.takes);  // the library took its scratch through the device
      if (run >= 2 && after.from_block - before.from_block == after.takes - before.takes) break;
    }
    QVERIFY2(run < 12, qPrintable(QString("after 12 runs, %1 of the last run's %2 takes came from outside the blocks")
                                      .arg((after.takes - before.takes) - (after.from_block - before.from_block))
                                      .arg(after.takes - before.takes)));
  }
};

QTEST_GUILESS_MAIN(TestScratch)
#include "test_scratch.moc"
