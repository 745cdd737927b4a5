// Concatenations assembled in place (core/assemble.h): on the C device the
// kernels of a concatenation's inputs write their outputs into its buffer
// and it is not launched. The values are the pieces' own, bit for bit, on a
// first run and on replays, in a chain of fire modules (concatenation, pool,
// convolutions, concatenation) against the same graph computed with copies,
// and where a piece is also read after it; a chain of joins (a dense block)
// nests, each join inside the next. What cannot be assembled (pieces
// not one after another in memory, a piece used twice, a piece that is a
// realized tensor or kept) is still a kernel, and right.
#include <QtTest/QtTest>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/profile.h"
#include "core/tensor.h"
#include "tests/testing.h"

using tl::Tensor;

namespace {

std::vector<float> normal(size_t n, uint32_t seed) { return tltest::normal_floats(n, seed); }

// relu(conv(x, w) + bias), a fire module's expand convolution: 1x1 or 3x3 with a pad of 1.
Tensor expand(const Tensor& x, int64_t out, int64_t kernel, uint32_t seed) {
  const int64_t in = x.shape()[1];
  Tensor w = Tensor::from_data(normal(size_t(out * in * kernel * kernel), seed), {out, in, kernel, kernel}, "cpu");
  Tensor b = Tensor::from_data(normal(size_t(out), seed + 1), {out}, "cpu");
  tl::Conv2dOptions opt;
  opt.pad_h = opt.pad_w = kernel / 2;
  return x.conv2d(w, b, opt).relu();
}

Tensor image(int64_t batch, uint32_t seed) {
  return Tensor::from_data(normal(size_t(batch * 3 * 9 * 9), seed), {batch, 3, 9, 9}, "cpu");
}

// The pieces realized on their own, joined along `axis` on the host.
std::vector<float> joined(const std::vector<Tensor>& pieces, int axis) {
  const tl::Shape& s = pieces[0].shape();
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= s[size_t(d)];
  std::vector<std::vector<float>> values;
  for (auto& p : pieces) values.push_back(p.to_vector());
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o)
    for (auto& v : values) {
      const size_t part = v.size() / size_t(outer);
      out.insert(out.end(), v.begin() + long(o * part), v.begin() + long((o + 1) * part));
    }
  return out;
}

int assembled(const std::vector<tl::ProfileRecord>& records) {
  int n = 0;
  for (auto& r : records)
    if (r.kernel->assembled) {
      ++n;
      if (r.seconds != 0) return -1;  // it must not have been launched
    }
  return n;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Two fire modules: a squeeze, two expands joined, max-pooled (the pool
// reads the join through a Contiguous), then again.
Tensor fires(const Tensor& x) {
  Tensor y = x;
  for (uint32_t f = 0; f < 2; ++f) {
    Tensor s = expand(y, 4, 1, 10 * f + 1);
    y = Tensor::cat({expand(s, 6, 1, 10 * f + 3), expand(s, 5, 3, 10 * f + 5)}, 1);
    if (f == 0) y = y.max_pool2d(3, 2);
  }
  return y;
}

}  // namespace

class TestAssemble : public QObject {
  Q_OBJECT

 private slots:
  void piecesAreWrittenIntoTheConcatenation() {
    Tensor x = image(1, 7);
    const std::vector<float> want = joined({expand(x, 5, 1, 1), expand(x, 7, 3, 3)}, 1);
    for (int run = 0; run < 3; ++run) {  // planned, then replayed
      tl::ProfileCapture capture;
      const std::vector<float> got = Tensor::cat({expand(x, 5, 1, 1), expand(x, 7, 3, 3)}, 1).to_vector();
      QVERIFY2(same_bits(got, want), qPrintable(QString("run %1").arg(run)));
      QCOMPARE(assembled(capture.records()), 1);
      QCOMPARE(capture.records().size(), size_t(3));  // two convolutions and the join
    }
  }

  void aChainMatchesTheCopies() {
    Tensor x = image(1, 11);
    std::vector<float> copies;
    {
      // Kept outputs are never assembled: every join is a kernel that copies.
      ::setenv("TINYLENS_NOREUSE", "1", 1);
      ::setenv("TINYLENS_NOREPLAY", "1", 1);
      tl::ProfileCapture capture;
      copies = fires(x).to_vector();
      ::unsetenv("TINYLENS_NOREUSE");
      ::unsetenv("TINYLENS_NOREPLAY");
      QCOMPARE(assembled(capture.records()), 0);
    }
    for (int run = 0; run < 2; ++run) {
      tl::ProfileCapture capture;
      QVERIFY(same_bits(fires(x).to_vector(), copies));
      QCOMPARE(assembled(capture.records()), 2);
    }
  }

  void aPieceReadAfterTheJoin() {
    Tensor x = image(1, 13);
    Tensor a = expand(x, 5, 1, 1), b = expand(x, 7, 3, 3);
    const std::vector<float> want_a = a.to_vector(), want = joined({a, b}, 1);
    a = expand(x, 5, 1, 1), b = expand(x, 7, 3, 3);
    Tensor y = Tensor::cat({a, b}, 1), twice = a * 2.0f;
    tl::ProfileCapture capture;
    Tensor::realize_all({y, twice});
    QCOMPARE(assembled(capture.records()), 1);
    QVERIFY(same_bits(y.to_vector(), want));
    const std::vector<float> got = twice.to_vector();
    for (size_t i = 0; i < got.size(); ++i) QCOMPARE(got[i], want_a[i] * 2.0f);
  }

  // The join's buffer holds its pieces: it serves no later kernel while a
  // piece is still to be read. Here b is read, reversed, after the
  // convolution that last reads the join, into an intermediate that would
  // otherwise take the join's buffer and overwrite b as it reads it.
  void aPieceReadAfterTheJoinsLastReader() {
    Tensor x = image(1, 19);
    std::vector<float> reversed = expand(x, 7, 3, 3).to_vector();
    std::reverse(reversed.begin(), reversed.end());
    for (auto& v : reversed) v *= 5.0f;
    const std::vector<float> want = expand(Tensor::from_data(reversed, {1, 7, 9, 9}, "cpu"), 4, 1, 23).to_vector();
    for (int run = 0; run < 2; ++run) {
      Tensor a = expand(x, 5, 1, 1), b = expand(x, 7, 3, 3);
      Tensor squeezed = expand(Tensor::cat({a, b}, 1), 4, 1, 21);
      Tensor after = expand(b.flip({1, 2, 3}) * 5.0f, 4, 1, 23);
      tl::ProfileCapture capture;
      Tensor::realize_all({squeezed, after});
      QCOMPARE(assembled(capture.records()), 1);
      QVERIFY(same_bits(after.to_vector(), want));
    }
  }

  // A dense block (DenseNet): each layer joins its convolution's output
  // (without bias or activation: a reshaped GEMM) to all the features before
  // it, and the next layer reads the join through a ReLU. Every join is
  // stored (no kernel evaluates more than two pieces' bounds per element)
  // and assembled in place, inside the next one: views in views, the bits of
  // the same graph computed with copies, on a first run and on a replay.
  void aChainOfJoinsNests() {
    Tensor x = image(1, 29);
    auto block = [&] {
      Tensor features = expand(x, 4, 3, 31);
      for (uint32_t layer = 0; layer < 4; ++layer) {
        const int64_t in = features.shape()[1];
        Tensor w = Tensor::from_data(normal(size_t(3 * in * 9), 40 + layer), {3, in, 3, 3}, "cpu");
        tl::Conv2dOptions opt;
        opt.pad_h = opt.pad_w = 1;
        features = Tensor::cat({features, features.relu().conv2d(w, Tensor(), opt)}, 1);
      }
      return features;
    };
    std::vector<float> copies;
    {
      ::setenv("TINYLENS_NOREUSE", "1", 1);
      ::setenv("TINYLENS_NOREPLAY", "1", 1);
      tl::ProfileCapture capture;
      copies = block().to_vector();
      ::unsetenv("TINYLENS_NOREUSE");
      ::unsetenv("TINYLENS_NOREPLAY");
      QCOMPARE(assembled(capture.records()), 0);
    }
    for (int run = 0; run < 2; ++run) {
      tl::ProfileCapture capture;
      QVERIFY2(same_bits(block().to_vector(), copies), qPrintable(QString("run %1").arg(run)));
      QCOMPARE(assembled(capture.records()), 4);
      for (auto& r : capture.records())
        QVERIFY2(std::count(r.kernel->ops.begin(), r.kernel->ops.end(), "PAD") <= 2, r.kernel->name.c_str());
    }
  }

  void whatCannotBeAssembledIsCopied_data() {
    QTest::addColumn<int>("which");
    QTest::newRow("two images: pieces interleave") << 0;
    QTest::newRow("joined along rows") << 1;
    QTest::newRow("one piece twice") << 2;
    QTest::newRow("a piece already realized") << 3;
    QTest::newRow("a piece also kept") << 4;
  }
  void whatCannotBeAssembledIsCopied() {
    QFETCH(int, which);
    Tensor x = image(which == 0 ? 2 : 1, 17);
    auto a = [&] { return expand(x, 5, 1, 1); };
    auto b = [&] { return expand(x, which == 1 ? 5 : 7, 3, 3); };
    const int axis = which == 1 ? 2 : 1;
    const std::vector<float> want = which == 2 ? joined({a(), a()}, 1) : joined({a(), b()}, axis);
    Tensor pa = a(), pb = b();
    if (which == 3) pa.realize();
    Tensor y = which == 2 ? Tensor::cat({pa, pa}, 1) : Tensor::cat({pa, pb}, axis);
    tl::ProfileCapture capture;
    if (which == 4)
      Tensor::realize_all({y, pa});
    else
      y.realize();
    QCOMPARE(assembled(capture.records()), 0);
    QVERIFY(same_bits(y.to_vector(), want));
  }
};

QTEST_GUILESS_MAIN(TestAssemble)
#include "test_assemble.moc"
