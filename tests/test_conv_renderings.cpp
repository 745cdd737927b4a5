// The renderings of a convolution's GEMM on the CPU device, each made the
// winner by a fake clock and checked against a direct double-precision
// convolution. Every candidate of gathered GEMMs (a stem's 3 channels at
// stride 2, a 5x5 window, a 7x7 map of 256 outputs, a 13x13 map of two
// images): the splits, the cache blocks, B read in place from the image or
// packed, C computed as C^T or as it is, C^T split by its columns. And
// Winograd's F(2x2, 3x3) (kernels/gemm_cpu_winograd.c): the default
// rendering of a 3x3 convolution at stride 1 from 16 channels or more whose
// transformed weights fit the cache or whose map has 49 tiles, a tuner
// candidate ("winograd") of the others, and the
// direct product ("direct") the other way round. Either, made the winner by
// a fake clock, gives a direct double-precision convolution's numbers for
// maps whose sides are odd and even, one pixel, valid windows, explicit
// asymmetric pads, output channels that fill no whole panel, a
// batch of two, chunks of tile rows and a fused bias, ReLU and residual.
// Windows it does not compute (stride 2, dilation 2, 5x5) are not offered
// it.
#include <QtTest/QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>

#include "tests/testing.h"

#include "core/profile.h"
#include "core/realize.h"
#include "core/tensor.h"
#include "core/tune.h"

using namespace tl;

namespace {

struct Case {
  const char* name;
  int N, C, O, H, W;
  int top, bottom, left, right;  // zeros around the image
  bool epilogue;                 // relu(conv + bias) + residual
  int KH = 3, SH = 1, DH = 1;    // the window (square)
  bool winograd_default = true;  // else direct by default
};

const Case kCases[] = {
    {"13x13, 16 -> 40 channels (no whole panel)", 1, 16, 40, 13, 13, 1, 1, 1, 1, false},
    // Fewer than 16 channels: the direct product by default (an RGB image's 3).
    {"8x11, two images, 3 -> 64 channels", 2, 3, 64, 8, 11, 1, 1, 1, 1, true, 3, 1, 1, false},
    {"valid window: 10x9 -> 8x7", 1, 16, 17, 10, 9, 0, 0, 0, 0, true},
    {"asymmetric pads 2,0 / 0,1", 1, 16, 20, 7, 12, 2, 0, 0, 1, false},
    {"one pixel", 1, 16, 16, 1, 1, 1, 1, 1, 1, false},
    {"28x28, 128 -> 96: several chunks of tile rows", 1, 128, 96, 28, 28, 1, 1, 1, 1, true},
    {"56x56, 64 -> 64 with bias, ReLU and residual", 1, 64, 64, 56, 56, 1, 1, 1, 1, true},
    {"7x7, 384 -> 384: 9 MiB of transformed weights", 1, 384, 384, 7, 7, 1, 1, 1, 1, true, 3, 1, 1, false},
    // As large, but 14x14: 49 tiles repay streaming them.
    {"14x14, 384 -> 384: 9 MiB of transformed weights", 1, 384, 384, 14, 14, 1, 1, 1, 1, false},
};

// Winograd's F(2x2, 3x3) (1) or F(4x4, 3x3) (2), or 0: the direct product.
int winograd_size(const KernelInfo& k) {
  return k.source.find(".winograd = 1") != std::string::npos   ? 1
         : k.source.find(".winograd = 2") != std::string::npos ? 2
                                                                : 0;
}
bool runs_winograd(const KernelInfo& k) { return winograd_size(k) > 0; }

struct Data {
  std::vector<float> x, w, bias, residual;
  int OH, OW;
};

Data make_data(const Case& c) {
  std::mt19937 gen(uint32_t(c.C * 977 + c.O * 31 + c.H * 7 + c.W));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Data d;
  d.OH = (c.H + c.top + c.bottom - (c.KH - 1) * c.DH - 1) / c.SH + 1;
  d.OW = (c.W + c.left + c.right - (c.KH - 1) * c.DH - 1) / c.SH + 1;
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (auto& e : v) e = normal(gen);
  };
  fill(d.x, size_t(c.N * c.C * c.H * c.W));
  fill(d.w, size_t(c.O * c.C * c.KH * c.KH));
  fill(d.bias, size_t(c.O));
  fill(d.residual, size_t(c.N * c.O * d.OH * d.OW));
  return d;
}

struct Run {
  std::vector<float> values;
  std::shared_ptr<const KernelInfo> gemm;
};

// The case's convolution on the CPU device, the tuner preferring `winner`
// (nothing searched before: a cache of its own). `tail`, when given, is
// applied to the convolution instead of the case's epilogue.
Run run_case(const Case& c, const Data& d, const QString& cache_home, const std::string& winner,
             const std::function<Tensor(const Tensor&)>& tail = nullptr) {
  qputenv("XDG_CACHE_HOME", cache_home.toUtf8());
  qputenv("TINYLENS_TUNE", "1");
  forget_compiled_kernels();
  set_tune_clock([winner](const std::string& label, double) { return label == winner ? 1e-3 : 2e-3; });
  Tensor x = Tensor::from_data(d.x, {c.N, c.C, c.H, c.W}, "cpu").realize();
  Tensor w = Tensor::from_data(d.w, {c.O, c.C, c.KH, c.KH}, "cpu").realize();
  Tensor padded = x.pad({{0, 0}, {0, 0}, {c.top, c.bottom}, {c.left, c.right}});
  Conv2dOptions opt;
  opt.stride_h = opt.stride_w = c.SH;
  opt.dilation_h = opt.dilation_w = c.DH;
  Tensor out = padded.conv2d(w, Tensor(), opt);
  if (tail) {
    out = tail(out);
  } else if (c.epilogue) {
    Tensor bias = Tensor::from_data(d.bias, {1, c.O, 1, 1}, "cpu").realize();
    Tensor residual = Tensor::from_data(d.residual, {c.N, c.O, d.OH, d.OW}, "cpu").realize();
    out = (out + bias).relu() + residual;
  }
  Run run;
  ProfileCapture capture;
  out.realize();
  for (auto& r : capture.records())
    if (r.kernel->name.rfind("GEMM_", 0) == 0) run.gemm = r.kernel;
  run.values = out.to_vector();
  set_tune_clock(nullptr);
  return run;
}

// The convolution's output (n, o, oy, ox) in double precision, and the sum
// of the magnitudes that make it.
double convolved(const Case& c, const Data& d, int n, int o, int oy, int ox, double* mag) {
  double s = 0;
  *mag = 0;
  for (int ci = 0; ci < c.C; ++ci)
    for (int ky = 0; ky < c.KH; ++ky)
      for (int kx = 0; kx < c.KH; ++kx) {
        const int iy = oy * c.SH + ky * c.DH - c.top, ix = ox * c.SH + kx * c.DH - c.left;
        if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
        const double p = double(d.x[size_t(((n * c.C + ci) * c.H + iy) * c.W + ix)]) *
                         d.w[size_t(((o * c.C + ci) * c.KH + ky) * c.KH + kx)];
        s += p, *mag += std::fabs(p);
      }
  return s;
}

// What follows the convolution in the reference: conv's value for output
// channel o at flat position `at` becomes the returned one, whose bound
// grows `mag` by the magnitudes it adds.
using RefTail = std::function<double(double conv, int o, size_t at, double* mag)>;

// Every output within `tol` of the sum of the magnitudes that make it (NaN
// where the reference is NaN; `nans` counts those), after `tail` or else
// the case's epilogue.
bool matches(const Case& c, const Data& d, const std::vector<float>& got, double tol, QString* why,
             const RefTail& tail = nullptr, size_t* nans = nullptr) {
  if (got.size() != size_t(c.N * c.O * d.OH * d.OW)) return *why = "wrong size", false;
  size_t at = 0;
  for (int n = 0; n < c.N; ++n)
    for (int o = 0; o < c.O; ++o)
      for (int oy = 0; oy < d.OH; ++oy)
        for (int ox = 0; ox < d.OW; ++ox, ++at) {
          double mag;
          double s = convolved(c, d, n, o, oy, ox, &mag);
          if (tail) {
            s = tail(s, o, at, &mag);
          } else if (c.epilogue) {
            s = std::max(0.0, s + d.bias[size_t(o)]) + d.residual[at];
            mag += std::fabs(d.bias[size_t(o)]) + std::fabs(d.residual[at]);
          }
          if (nans) *nans += std::isnan(s);
          if (std::isnan(s) ? !std::isnan(got[at]) : !(std::fabs(got[at] - s) <= tol * mag + 1e-6))
            return *why = QString("image %1, channel %2, pixel (%3, %4): %5, reference %6")
                              .arg(n).arg(o).arg(oy).arg(ox).arg(got[at]).arg(s),
                   false;
        }
  return true;
}

}  // namespace

class TestConvRenderings : public QObject {
  Q_OBJECT
  tltest::ScratchDirs scratch_;
  QString fresh_cache() { return scratch_.fresh(); }

 private slots:
  void initTestCase() { qputenv("TINYLENS_NOREPLAY", "1"); }

  // The default is Winograd's where the case says so, the other algorithm
  // is a candidate, and both compute the convolution.
  void computesTheConvolution() {
    for (const Case& c : kCases) {
      const Data d = make_data(c);
      const Run first = run_case(c, d, fresh_cache(), "default");
      QVERIFY2(first.gemm, c.name);
      QCOMPARE(first.gemm->tuned, std::string("default"));
      QVERIFY2(runs_winograd(*first.gemm) == c.winograd_default, c.name);
      const std::string other = c.winograd_default ? "direct" : "winograd";
      const Run second = run_case(c, d, fresh_cache(), other);
      QCOMPARE(second.gemm->tuned, other);
      QVERIFY2(runs_winograd(*second.gemm) != c.winograd_default, c.name);
      // F(4x4, 3x3) is a rendering wherever F(2x2, 3x3) is, never the default.
      if (c.winograd_default) QCOMPARE(winograd_size(*first.gemm), 1);
      const Run third = run_case(c, d, fresh_cache(), "winograd4");
      QCOMPARE(third.gemm->tuned, std::string("winograd4"));
      QCOMPARE(winograd_size(*third.gemm), 2);
      QString why;
      // F(2x2, 3x3)'s transforms add a few roundings of float32, F(4x4,
      // 3x3)'s more (constants up to 8 and 1/24); all stay within the
      // direct product's bound here.
      QVERIFY2(matches(c, d, first.values, 1e-5, &why), qPrintable(QString(c.name) + ": " + why));
      QVERIFY2(matches(c, d, second.values, 1e-5, &why), qPrintable(QString(c.name) + ": " + why));
      QVERIFY2(matches(c, d, third.values, 1e-5, &why), qPrintable(QString(c.name) + ", " + third.gemm->tuned.c_str() + ": " + why));
    }
  }

  // Every rendering the tuner may pick computes the convolution.
  void everyCandidateComputesTheConvolution() {
    const Case cases[] = {
        {"a stem: 3 channels, 3x3 at stride 2 to rows of 38, 64 outputs", 1, 3, 64, 70, 75, 1, 1, 1, 1, true, 3, 2, 1},
        {"5x5 at stride 1, K=200", 2, 8, 40, 12, 13, 2, 2, 2, 2, false, 5, 1, 1},
        {"3x3 at stride 2 to a 7x7 map, 256 outputs", 1, 24, 256, 14, 14, 1, 1, 1, 1, true, 3, 2, 1},
        {"3x3 at stride 1, 16 -> 40 channels", 1, 16, 40, 13, 13, 1, 1, 1, 1, false},
        {"3x3 at stride 2 to a 13x13 map, two images, 128 outputs", 2, 16, 128, 26, 26, 1, 1, 1, 1, true, 3, 2, 1},
    };
    std::set<std::string> seen;
    for (const Case& c : cases) {
      const Data d = make_data(c);
      const Run first = run_case(c, d, fresh_cache(), "default");
      QVERIFY2(first.gemm && first.gemm->tune_candidates.size() >= 3, c.name);
      for (auto& [label, seconds] : first.gemm->tune_candidates) {
        const Run run = label == "default" ? first : run_case(c, d, fresh_cache(), label);
        QCOMPARE(run.gemm->tuned, label);
        QString why;
        QVERIFY2(matches(c, d, run.values, 1e-5, &why), qPrintable(QString(c.name) + ", " + label.c_str() + ": " + why));
        for (const char* knob : {"b=", "c=", "split=", "winograd", "direct", "split=cols c=transposed"})
          if (label.find(knob) != std::string::npos) seen.insert(knob);
      }
    }
    for (const char* knob : {"b=", "c=", "split=", "direct", "split=cols c=transposed"}) QVERIFY2(seen.count(knob), knob);
  }

  // Strides, dilations and other windows are not Winograd's.
  void offeredOnlyToThreeByThreeAtStrideOne() {
    const Case others[] = {
        {"3x3 stride 2", 1, 8, 16, 12, 12, 1, 1, 1, 1, false, 3, 2, 1},
        {"3x3 dilation 2", 1, 8, 16, 12, 12, 2, 2, 2, 2, false, 3, 1, 2},
        {"5x5 stride 1", 1, 8, 16, 12, 12, 2, 2, 2, 2, false, 5, 1, 1},
    };
    for (const Case& c : others) {
      const Data d = make_data(c);
      const Run run = run_case(c, d, fresh_cache(), "default");
      QVERIFY2(run.gemm && !run.gemm->tune_candidates.empty(), c.name);
      QVERIFY2(!runs_winograd(*run.gemm), c.name);
      for (auto& [label, seconds] : run.gemm->tune_candidates)
        QVERIFY2(label.find("winograd") == std::string::npos && label.find("direct") == std::string::npos, c.name);
      QString why;
      QVERIFY2(matches(c, d, run.values, 1e-5, &why), qPrintable(QString(c.name) + ": " + why));
    }
    // ... while a 3x3 stride-1 one is, and the direct product stays a candidate.
    const Data d = make_data(kCases[0]);
    const Run run = run_case(kCases[0], d, fresh_cache(), "default");
    QVERIFY(runs_winograd(*run.gemm));
    bool offered = false;
    for (auto& [label, seconds] : run.gemm->tune_candidates) offered |= label == "direct";
    QVERIFY(offered);
  }

  // A bias and a clamp (ReLU, ReLU6, any bounds) after a convolution are
  // applied in registers by the direct product's micro-kernel and by
  // Winograd's output transform (the GEMM's source says .fused = 1 and
  // names them), in every rendering the tuner may pick: over two K blocks (K = 306: the sums start from the bias in
  // the first, the clamp bounds the last), on edge tiles of rows and
  // columns, over two images, on a plain B (1x1), and with a NaN in the
  // image, which stays NaN through the clamp.
  void biasAndClampInTheMicroKernel() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    struct Tail {
      const char* name;
      Case c;
      bool bias;
      double lo, hi;
      const char* source;  // what the default's source says
    };
    const Tail tails[] = {
        {"relu(conv + bias), K = 306 at stride 2, 17 outputs, two images",
         {"", 2, 34, 17, 15, 23, 1, 1, 1, 1, false, 3, 2, 1}, true, 0.0, INFINITY,
         ".fused = 1, .bias = 3, .lo = (float)0, .hi = INFINITY"},
        {"relu6(conv + bias), 1x1, 30 outputs (panels of 14, 8 and 8 rows: wide_rows)",
         {"", 1, 20, 30, 9, 21, 0, 0, 0, 0, false, 1, 1, 1}, true, 0.0, 6.0,
         ".fused = 1, .bias = 3, .lo = (float)0, .hi = (float)6"},
        {"clip(conv, -0.5, 0.25), 5x5", {"", 1, 6, 40, 12, 13, 2, 2, 2, 2, false, 5, 1, 1}, false, -0.5, 0.25,
         ".fused = 1, .bias = -1, .lo = (float)-0.5, .hi = (float)0.25"},
        {"conv + bias, 3x3 at stride 2", {"", 1, 7, 64, 20, 37, 1, 1, 1, 1, false, 3, 2, 1}, true, -INFINITY, INFINITY,
         ".fused = 1, .bias = 3, .lo = -INFINITY, .hi = INFINITY"},
        {"relu6(conv + bias), 3x3 at stride 1 (Winograd's by default), 20 outputs",
         {"", 1, 16, 20, 11, 14, 1, 1, 1, 1, false, 3, 1, 1}, true, 0.0, 6.0,
         ".fused = 1, .bias = 3, .lo = (float)0, .hi = (float)6"},
    };
    for (const Tail& t : tails) {
      const Case& c = t.c;
      Data d = make_data(c);
      for (auto& v : d.x) v *= 3.0f;  // past ReLU6's 6 now and then
      d.x[size_t(c.C * c.H * c.W / 2 + 5)] = nan;  // channel C/2 of the first image
      auto tail = [&](const Tensor& conv) {
        Tensor out = conv;
        if (t.bias) out = out + Tensor::from_data(d.bias, {1, c.O, 1, 1}, "cpu").realize();
        if (t.lo == 0.0 && t.hi == 6.0) return out.relu6();
        if (t.lo == 0.0 && std::isinf(t.hi)) return out.relu();
        return std::isinf(t.lo) ? out : out.clip(t.lo, t.hi);
      };
      auto run = [&](const std::string& winner) { return run_case(c, d, fresh_cache(), winner, tail); };
      const Run first = run("default");
      QVERIFY2(first.gemm && first.gemm->source.find(t.source) != std::string::npos, t.name);
      QVERIFY2(runs_winograd(*first.gemm) == (c.KH == 3 && c.SH == 1), t.name);
      QVERIFY2(first.gemm->tune_candidates.size() >= 2, t.name);
      for (auto& [label, seconds] : first.gemm->tune_candidates) {
        const Run got = label == "default" ? first : run(label);
        QCOMPARE(got.gemm->tuned, label);
        size_t nans = 0;
        QString why;
        const RefTail reference = [&](double s, int o, size_t, double* mag) {
          if (t.bias) s += d.bias[size_t(o)], *mag += std::fabs(d.bias[size_t(o)]);
          if (s <= t.lo) s = t.lo;
          if (s >= t.hi) s = t.hi;
          return s;
        };
        QVERIFY2(matches(c, d, got.values, 1e-5, &why, reference, &nans),
                 qPrintable(QString(t.name) + ", " + label.c_str() + ": " + why));
        QVERIFY2(nans > 0, t.name);  // the planted NaN reached some outputs
      }
    }
  }

  // A 1x1 window at a stride (ResNet's downsampling shortcut) is a plain
  // product over a dense copy of the pixels it reads, not a gather, in
  // every rendering the tuner may pick.
  void stridedOneByOneIsAPlainProduct() {
    const Case cases[] = {
        {"1x1 stride 2, 56x56 -> 28x28, 16 -> 40 channels", 1, 16, 40, 56, 56, 0, 0, 0, 0, true, 1, 2, 1},
        {"1x1 stride 2, odd 15x9, two images", 2, 8, 24, 15, 9, 0, 0, 0, 0, true, 1, 2, 1},
        {"1x1 stride 3, padded 1,0 / 2,1", 1, 6, 20, 10, 11, 1, 0, 2, 1, false, 1, 3, 1},
    };
    for (const Case& c : cases) {
      const Data d = make_data(c);
      const Run first = run_case(c, d, fresh_cache(), "default");
      QVERIFY2(first.gemm, c.name);
      QVERIFY2(first.gemm->source.find(".gather = {0}") != std::string::npos, c.name);
      for (auto& [label, seconds] : first.gemm->tune_candidates) {
        const Run run = label == "default" ? first : run_case(c, d, fresh_cache(), label);
        QCOMPARE(run.gemm->tuned, label);
        QString why;
        QVERIFY2(matches(c, d, run.values, 1e-5, &why), qPrintable(QString(c.name) + ", " + label.c_str() + ": " + why));
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestConvRenderings)
#include "test_conv_renderings.moc"
