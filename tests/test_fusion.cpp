// What the scheduler computes once and what a kernel reads, for the shapes
// of architectures nobody tuned for (issue 44): a transformer's residual
// stream and a DenseNet's concatenations. Each test checks the fused values
// against the same computation realized step by step, on every device, and
// that the kernels have the form that makes them fast.
#include <QtTest/QtTest>

#include <cmath>

#include <string>
#include <vector>

#include "core/profile.h"
#include "core/tensor.h"
#include "tests/kernel_checks.h"
#include "tests/testing.h"

using tl::Tensor;
using tltest::first_difference;
using tltest::launches;
using tltest::ramp;

namespace {

// A transformer's blocks over a residual stream that starts as a transposed
// embedding: x = x + normalise(x) @ w, `blocks` times. `step` realizes the
// stream after each block (the unfused reference).
Tensor residual_blocks(const Tensor& embedding, const std::vector<Tensor>& weights, bool step) {
  Tensor x = embedding.permute({1, 0});
  for (const auto& w : weights) {
    Tensor mean = x.mean({1}, true);
    Tensor centred = x - mean;
    Tensor y = centred / (centred * centred).mean({1}, true).add(1e-5).sqrt();
    x = x + y.matmul(w);
    if (step) x.realize();
  }
  return x;
}

}  // namespace

class TestFusion : public QObject {
  Q_OBJECT

 private:
  static void add_device_rows() {
    QTest::addColumn<QString>("device");
    for (auto& d : tltest::available_devices()) QTest::newRow(d.c_str()) << QString::fromStdString(d);
  }

 private slots:
  // The residual stream is read by each block's two statistics and by the
  // next residual add. Recomputed, every normalisation of block k read k + 2
  // buffers, one of them the embedding through a transpose (ViT's LayerNorm
  // reductions took 0.2-0.4 ms for 197 x 768). Now a stream that reads more
  // than four buffers gets one of its own: no reduction reads the embedding
  // after the first block's.
  void residualStreamIsStored_data() { add_device_rows(); }
  void residualStreamIsStored() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t tokens = 33, width = 64;
    Tensor embedding = Tensor::from_data(ramp(size_t(width * tokens), 1.3f, -0.6f), {width, tokens}, dev);
    std::vector<Tensor> weights;
    for (int k = 0; k < 6; ++k)
      weights.push_back(Tensor::from_data(ramp(size_t(width * width), 0.05f * float(k + 1), -0.02f), {width, width}, dev));
    for (auto* t : {&embedding}) t->realize();
    for (auto& w : weights) w.realize();
    std::vector<float> fused;
    const auto recs = launches([&] { fused = residual_blocks(embedding, weights, false).to_vector(); });
    int reductions_reading_the_embedding = 0;
    for (const auto& r : recs) {
      const auto& ops = r.kernel->ops;
      if (r.kernel->name.rfind("R", 0) == 0 && std::find(ops.begin(), ops.end(), "PERMUTE") != ops.end())
        ++reductions_reading_the_embedding;
    }
    // The first block's two statistics read it; no later one does.
    QVERIFY2(reductions_reading_the_embedding <= 2,
             ("reductions reading the transposed embedding: " + std::to_string(reductions_reading_the_embedding) +
              "; kernels: " + tltest::kernel_names(recs))
                 .c_str());
    const std::vector<float> unfused = residual_blocks(embedding, weights, true).to_vector();
    QCOMPARE(fused.size(), size_t(tokens * width));
    const std::string bad = first_difference(fused, unfused);
    QVERIFY2(bad.empty(), bad.c_str());
  }

  // A squeeze-and-excite block scales each channel of an image by a number
  // of its own (the sigmoid of two small products over its mean) before a
  // 1x1 convolution. The product then scales the weights' columns (O x C
  // numbers an image) instead of writing the scaled image (C x H x W): no
  // kernel but the GEMM reads the image. Per image and shared scales, values
  // as with the scaled image realized first.
  void squeezeExciteScalesTheWeights_data() { add_device_rows(); }
  void squeezeExciteScalesTheWeights() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t N = 2, C = 12, H = 9, W = 7, O = 8;
    Tensor image = Tensor::from_data(ramp(size_t(N * C * H * W), 1.7f, -0.8f), {N, C, H, W}, dev);
    Tensor weight = Tensor::from_data(ramp(size_t(O * C), 0.6f, -0.3f), {O, C, 1, 1}, dev);
    Tensor bias = Tensor::from_data(ramp(size_t(O), 0.2f, 0.1f), {O}, dev);
    for (int64_t images : {N, int64_t(1)}) {
      Tensor gate = Tensor::from_data(ramp(size_t(images * C), 3.0f, -1.5f), {images, C, 1, 1}, dev);
      for (auto* t : {&image, &weight, &bias, &gate}) t->realize();
      std::vector<float> fused;
      const auto recs = launches([&] { fused = (image * gate.sigmoid()).conv2d(weight, bias).to_vector(); });
      for (const auto& r : recs)
        if (r.kernel->name.rfind("GEMM", 0) != 0)
          QVERIFY2(r.kernel->bytes < double(N * C * H * W * 4),
                   (r.kernel->name + " moves " + std::to_string(r.kernel->bytes) +
                    " bytes: the scaled image was written; kernels: " + tltest::kernel_names(recs))
                       .c_str());
      Tensor scaled = image * gate.sigmoid();
      scaled.realize();
      const std::vector<float> unfused = scaled.conv2d(weight, bias).to_vector();
      QCOMPARE(fused.size(), size_t(N * O * H * W));
      const std::string bad = first_difference(fused, unfused);
      QVERIFY2(bad.empty(), (bad + " with " + std::to_string(images) + " scale(s) per channel").c_str());
    }
  }

  // SiLU after a convolution, read by a squeeze-and-excite's mean and by its
  // scale: an exp is a dozen operations on the C device, so the value is
  // stored once by the GEMM (its epilogue) instead of recomputed, exp and
  // all, by both readers.
  void expensiveValuesAreComputedOnce() {
    const int64_t C = 6, H = 5, W = 8, O = 4;
    Tensor image = Tensor::from_data(ramp(size_t(C * H * W), 1.7f, -0.8f), {1, C, H, W}, "cpu");
    Tensor weight = Tensor::from_data(ramp(size_t(O * C), 0.6f, -0.3f), {O, C, 1, 1}, "cpu");
    image.realize();
    weight.realize();
    auto block = [&](bool step) {
      Tensor v = image.conv2d(weight, Tensor()).silu();
      if (step) v.realize();
      return (v * v.mean({2, 3}, true)).to_vector();
    };
    std::vector<float> fused;
    const auto recs = launches([&] { fused = block(false); });
    int with_exp = 0;
    for (const auto& r : recs) with_exp += r.kernel->source.find("tl_expf(v") != std::string::npos;
    QVERIFY2(with_exp == 1, ("kernels computing exp: " + std::to_string(with_exp) + " of " + tltest::kernel_names(recs)).c_str());
    const std::string bad = first_difference(fused, block(true));
    QVERIFY2(bad.empty(), bad.c_str());
  }

  // GELU as ONNX writes it, x * 0.5 * (1 + erf(x / sqrt(2))), after a
  // linear layer. The quotient costs more than the recompute limit and Erf
  // reads it several times, but all those reads are in one kernel: it gets
  // no buffer of its own, and the whole GELU becomes the GEMM's epilogue
  // (was three passes over the product). A costly value read by two
  // kernels keeps its buffer.
  void sharedValuesReadByOneKernelAreFused() {
    const int64_t M = 9, K = 12, N = 16;
    Tensor x = Tensor::from_data(ramp(size_t(M * K), 1.3f, -0.6f), {M, K}, "cpu");
    Tensor w = Tensor::from_data(ramp(size_t(N * K), 0.7f, -0.35f), {N, K}, "cpu");
    Tensor b = Tensor::from_data(ramp(size_t(N), 0.5f, -0.2f), {N}, "cpu");
    Tensor root2 = Tensor::from_data({1.41421356f}, {1}, "cpu");
    for (Tensor* t : {&x, &w, &b, &root2}) t->realize();
    auto erf = [](const Tensor& v) {  // core/io/onnx's form: v read five times
      Tensor av = v.abs(), t = (av * 0.3275911f + 1.0f).reciprocal();
      return v.sign() * (1.0f - t * (0.2548296f + t * -0.2844967f) * (-(av * av)).exp());
    };
    auto gelu = [&](const Tensor& h, bool step) {
      Tensor r = root2.reciprocal(), q = h * r;
      Tensor refined = q + (h - q * root2) * r;  // a correctly rounded quotient, as the ONNX Div does
      Tensor z = refined - refined;
      Tensor d = Tensor::where(z.eq(z), refined, q);
      if (step) d.realize();
      return h * 0.5f * (erf(d) + 1.0f);
    };
    std::vector<float> fused, twice;
    const auto recs = launches([&] { fused = gelu(x.linear(w, b), false).to_vector(); });
    QVERIFY2(recs.size() == 1 && recs[0].kernel->source.find("tinylens_gemm") != std::string::npos,
             tltest::kernel_names(recs).c_str());
    std::string bad = first_difference(fused, gelu(x.linear(w, b), true).to_vector());
    QVERIFY2(bad.empty(), bad.c_str());
    // a costly value read by a row sum and by the rest keeps its buffer:
    // one kernel computes it, one reads it (the sum computed there: fuse_rows)
    const auto two = launches([&] {
      Tensor d = (x * 1.7f + 0.3f).exp() * (x * 0.9f - 0.1f).exp();
      twice = (erf(d) * d + d.sum({1}, true)).to_vector();
    });
    QVERIFY2(two.size() == 2 && two[0].kernel->name.rfind("E_", 0) == 0 && two[1].kernel->name.rfind("ROWS_", 0) == 0,
             tltest::kernel_names(two).c_str());
  }

  // A linear layer over a sequence-first view of a batch-first activation,
  // (L, N, E) read from an (N, L, E) buffer (ViT's attention at a batch
  // above 1): one GEMM of L*N rows in memory order, not L products of N
  // rows. Values against the sums written out.
  void permutedRowsMakeOneProduct() {
    const int64_t N = 3, L = 5, E = 8, F = 6;
    const std::vector<float> xs = ramp(size_t(N * L * E), 1.1f, -0.5f), ws = ramp(size_t(E * F), 0.8f, -0.4f);
    Tensor x = Tensor::from_data(xs, {N, L, E}, "cpu");
    Tensor w = Tensor::from_data(ws, {E, F}, "cpu");
    x.realize();
    w.realize();
    std::vector<float> got;
    const auto recs = launches([&] { got = x.permute({1, 0, 2}).matmul(w).to_vector(); });
    const std::string want_gemm = "GEMM_1_" + std::to_string(L * N) + "_" + std::to_string(F) + "_" + std::to_string(E);
    bool one = false;
    for (const auto& r : recs) one = one || r.kernel->name == want_gemm;
    QVERIFY2(one, tltest::kernel_names(recs).c_str());
    std::vector<float> want(size_t(L * N * F));
    for (int64_t l = 0; l < L; ++l)
      for (int64_t b = 0; b < N; ++b)
        for (int64_t f = 0; f < F; ++f) {
          double acc = 0;
          for (int64_t e = 0; e < E; ++e) acc += double(xs[size_t((b * L + l) * E + e)]) * double(ws[size_t(e * F + f)]);
          want[size_t((l * N + b) * F + f)] = float(acc);
        }
    const std::string bad = first_difference(got, want);
    QVERIFY2(bad.empty(), bad.c_str());
  }

  // A batch norm and ReLU over the concatenation of many parts along the
  // channels (a DenseNet layer reads all earlier layers' outputs so). Each
  // element read every part through its guard; the C device's row kernel
  // now dispatches each row to the one part it lies in. Values as with the
  // concatenation realized first, including parts of one channel and rows
  // at the parts' edges.
  void concatenationReadsOnePart_data() { add_device_rows(); }
  void concatenationReadsOnePart() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    std::vector<Tensor> parts;
    const std::vector<int64_t> channels = {5, 1, 4, 4, 3, 1, 6, 2};
    int64_t total = 0;
    for (size_t i = 0; i < channels.size(); ++i) {
      parts.push_back(Tensor::from_data(ramp(size_t(2 * channels[i] * 5 * 9), 0.9f + 0.1f * float(i), -0.45f),
                                        {2, channels[i], 5, 9}, dev));
      parts.back().realize();
      total += channels[i];
    }
    Tensor scale = Tensor::from_data(ramp(size_t(total), 1.5f, 0.3f), {1, total, 1, 1}, dev);
    Tensor shift = Tensor::from_data(ramp(size_t(total), 1.0f, -0.5f), {1, total, 1, 1}, dev);
    scale.realize();
    shift.realize();
    std::vector<float> fused;
    const auto recs = launches([&] { fused = (Tensor::cat(parts, 1) * scale + shift).relu().to_vector(); });
    if (dev == "cpu") {
      QCOMPARE(recs.size(), size_t(1));
      const std::string& source = recs[0].kernel->source;
      // One branch per part: the row tests its channel against the parts' edges.
      for (const char* edge : {" < 5)", " < 6)", " < 10)", " < 14)", " < 17)", " < 18)", " < 24)"})
        QVERIFY2(source.find(edge) != std::string::npos, (std::string(edge) + " missing in:\n" + source).c_str());
    }
    Tensor joined = Tensor::cat(parts, 1);
    joined.realize();
    const std::vector<float> unfused = (joined * scale + shift).relu().to_vector();
    QCOMPARE(fused.size(), size_t(2 * total * 5 * 9));
    const std::string bad = first_difference(fused, unfused);
    QVERIFY2(bad.empty(), bad.c_str());
  }

  // A realized right operand (a linear layer's weights: X @ W) is packed
  // once, with its buffer, as a left one is: products with the same weights
  // run again, with other rows, and with other weights of the same shape,
  // each give their own values; a weight dropped and another made in its
  // buffer is packed afresh. K = 300 spans two of the C template's K blocks,
  // N = 70 leaves a ragged panel.
  void rightWeightsArePackedPerBuffer_data() { add_device_rows(); }
  void rightWeightsArePackedPerBuffer() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t k = 300, n = 70;
    Tensor w1 = Tensor::from_data(ramp(size_t(k * n), 0.013f, -0.9f), {k, n}, dev);
    Tensor w2 = Tensor::from_data(ramp(size_t(k * n), -0.007f, 0.5f), {k, n}, dev);
    w1.realize();
    w2.realize();
    auto check = [&](int64_t m, const Tensor& w, float seed, const std::string& what) {
      Tensor x = Tensor::from_data(ramp(size_t(m * k), seed, -0.35f), {m, k}, dev) * 1.0;  // computed: A is not a weight
      std::vector<float> y;
      const auto recs = launches([&] { y = x.matmul(w).to_vector(); });
      if (dev == "cpu" && m > 16)
        for (const auto& r : recs)
          if (r.kernel->name.rfind("GEMM", 0) == 0)
            QVERIFY2(r.kernel->source.find(".packed_b = ") != std::string::npos &&
                         r.kernel->source.find(".packed_b = -1") == std::string::npos,
                     r.kernel->source.c_str());
      const auto xv = x.to_vector(), wv = w.to_vector();
      QCOMPARE(y.size(), size_t(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (int64_t p = 0; p < k; ++p) ref += double(xv[size_t(i * k + p)]) * wv[size_t(p * n + j)];
          const float got = y[size_t(i * n + j)];
          QVERIFY2(std::fabs(got - ref) <= 1e-4 * std::max(1.0, std::fabs(ref)),
                   (what + " at (" + std::to_string(i) + ", " + std::to_string(j) + "): " + std::to_string(got) +
                    " vs " + std::to_string(ref)).c_str());
        }
    };
    for (int round = 0; round < 2; ++round) {
      check(40, w1, 0.021f, "40 rows @ w1");
      check(40, w2, 0.017f, "40 rows @ w2");
      check(97, w1, 0.05f, "97 rows @ w1");
    }
    for (int round = 0; round < 3; ++round) {
      Tensor w = Tensor::from_data(ramp(size_t(k * n), 0.011f * float(round + 1), 0.3f - 0.2f * float(round)), {k, n}, dev);
      w.realize();
      check(40, w, 0.03f, "a new weight, round " + std::to_string(round));
    }
  }
  // A 7x7 map's elementwise kernel walks each channel's 49 elements as one
  // loop (the C device's rows of 7 did not fill a vector); a value that
  // indexes the map by row and column apart (a shifted window: a pad, then
  // a crop) keeps the loops over rows and columns. Values against a host
  // computation in double.
  void smallMapsAreOneLoop_data() { add_device_rows(); }
  void smallMapsAreOneLoop() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t n = 2, c = 16, h = 7, w = 7;
    const auto xs = ramp(size_t(n * c * h * w), 2.3f, -1.2f), bs = ramp(size_t(c), 1.1f, -0.5f),
               ss = ramp(size_t(c), 0.9f, 0.2f);
    Tensor x = Tensor::from_data(xs, {n, c, h, w}, dev), b = Tensor::from_data(bs, {1, c, 1, 1}, dev),
           s = Tensor::from_data(ss, {1, c, 1, 1}, dev);
    for (Tensor* t : {&x, &b, &s}) t->realize();
    std::vector<float> scaled, shifted;
    const auto recs = launches([&] { scaled = ((x + b).silu() * s).to_vector(); });
    const auto shift_recs = launches([&] { shifted = (x.pad({{0, 0}, {0, 0}, {1, 0}, {1, 0}}).slice(2, 0, h).slice(3, 0, w) * s).to_vector(); });
    for (int64_t i = 0; i < n * c * h * w; ++i) {
      const int64_t ch = i / (h * w) % c, row = i / w % h, col = i % w;
      const double v = double(xs[size_t(i)]) + bs[size_t(ch)];
      const double want = v / (1 + std::exp(-v)) * ss[size_t(ch)];
      QVERIFY2(std::fabs(scaled[size_t(i)] - want) <= 1e-5 * std::max(1.0, std::fabs(want)), std::to_string(i).c_str());
      const double moved = row > 0 && col > 0 ? double(xs[size_t(i - w - 1)]) * ss[size_t(ch)] : 0.0;
      QVERIFY2(std::fabs(shifted[size_t(i)] - moved) <= 1e-6 * std::max(1.0, std::fabs(moved)), std::to_string(i).c_str());
    }
    if (dev == "cpu") {
      const std::string& one = recs.at(0).kernel->source;
      QVERIFY2(one.find("x < 49") != std::string::npos && one.find("int y") == std::string::npos, one.c_str());
      const std::string& two = shift_recs.at(0).kernel->source;
      QVERIFY2(two.find("int y") != std::string::npos, two.c_str());
    }
  }

  // A softmax and a LayerNorm over the last axis are one kernel each: the
  // reductions they read (the maximum and the sum; the mean and the
  // variance, the second reading the first) are computed row by row in the
  // kernel that reads them (schedule.cpp's fuse_rows), on each device's form
  // (a row a parallel item, or a work-group a row). Rows of 37 and 300
  // elements: fewer and more than a work-group's items. A NaN in a row gives
  // that row NaN, as the separate maximum did. A softmax of the transposed
  // input reads it as any kernel does, to the same values.
  void rowReductionsAreComputedInTheirReader_data() { add_device_rows(); }
  void rowReductionsAreComputedInTheirReader() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    for (const int64_t len : {37, 300}) {
      const int64_t rows = 6;
      auto xs = ramp(size_t(rows * len), -3.0f, 0.011f);
      for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(std::sin(double(i) * 0.37) * 4.0);
      xs[size_t(5 * rows + 2)] = NAN;  // row 2, element 5
      Tensor stored = Tensor::from_data(xs, {len, rows}, dev);  // transposed: x[r, i] = xs[i * rows + r]
      stored.realize();
      const auto x_at = [&](int64_t r, int64_t i) { return double(xs[size_t(i * rows + r)]); };
      const auto gs = ramp(size_t(len), 0.5f, 0.01f), bs = ramp(size_t(len), -0.2f, 0.003f);
      Tensor g = Tensor::from_data(gs, {len}, dev), b = Tensor::from_data(bs, {len}, dev);
      g.realize();
      b.realize();
      std::vector<float> row_major(xs.size());  // the same rows stored as rows
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < len; ++i) row_major[size_t(r * len + i)] = xs[size_t(i * rows + r)];
      Tensor direct = Tensor::from_data(row_major, {rows, len}, dev);
      direct.realize();
      std::vector<float> soft, soft_t, norm;
      const auto soft_recs = launches([&] { soft = direct.softmax(-1).to_vector(); });
      // Through the transpose exp(x - max) is stored for its two readers (a
      // transposed load counts four). On the C device the maximum is then
      // computed with it a block of neighbouring rows an item (their elements
      // a row apart, the rows neighbours): two kernels, each with its
      // reduction. With work-groups the maximum over such rows stays a
      // reduction of its own (a row an item would store a row apart); the
      // sum over the stored exp is computed by its reader.
      const auto soft_t_recs = launches([&] { soft_t = stored.permute({1, 0}).softmax(-1).to_vector(); });
      const std::string names = tltest::kernel_names(soft_t_recs);
      if (dev == "cpu")
        QVERIFY2(names == "ROWS_6_" + std::to_string(len) + ", ROWS_6_" + std::to_string(len) &&
                     soft_t_recs.front().kernel->source.find("for (int b = 0; b < 6; ++b) {") != std::string::npos,
                 (names + "\n" + soft_t_recs.front().kernel->source).c_str());
      else
        QVERIFY2(names.rfind("R_", 0) == 0 && names.find("ROWS_") != std::string::npos, names.c_str());
      if (dev.rfind("opencl", 0) == 0) QVERIFY2(soft_recs.front().kernel->local[0] >= 32, soft_recs.front().kernel->source.c_str());
      const auto norm_recs = launches([&] {
        const Tensor& x = direct;
        Tensor centred = x - x.mean({1}, true);
        norm = (centred / (centred * centred).mean({1}, true).add(1e-5).sqrt() * g + b).to_vector();
      });
      for (const auto* recs : {&soft_recs, &norm_recs})
        QVERIFY2(recs->size() == 1 && recs->front().kernel->name == "ROWS_6_" + std::to_string(len),
                 tltest::kernel_names(*recs).c_str());
      // The softmax computes exp(x - max) once an element: the sum's loop
      // leaves it in the output row, and the output loop scales it there.
      // The LayerNorm's values are cheap: nothing stored early.
      const std::string& soft_src = soft_recs.front().kernel->source;
      const std::string early = "b0[gid*" + std::to_string(len) + "+r] = ";
      QVERIFY2(soft_src.find(early) != std::string::npos, soft_src.c_str());
      if (dev == "cpu") {
        size_t exps = 0;
        for (size_t at = soft_src.find("= tl_expf("); at != std::string::npos; at = soft_src.find("= tl_expf(", at + 1)) ++exps;
        QVERIFY2(exps == 1, soft_src.c_str());
      }
      QVERIFY2(norm_recs.front().kernel->source.find(early) == std::string::npos,
               norm_recs.front().kernel->source.c_str());
      for (int64_t r = 0; r < rows; ++r) {
        double most = -INFINITY, sum = 0, mean = 0, var = 0;
        for (int64_t i = 0; i < len; ++i) most = std::max(most, x_at(r, i)), mean += x_at(r, i) / double(len);
        for (int64_t i = 0; i < len; ++i) sum += std::exp(x_at(r, i) - most), var += std::pow(x_at(r, i) - mean, 2) / double(len);
        for (int64_t i = 0; i < len; ++i) {
          const size_t at = size_t(r * len + i);
          const std::string where = "row " + std::to_string(r) + " of " + std::to_string(len) + ", element " + std::to_string(i);
          if (r == 2) {  // the row with a NaN
            QVERIFY2(std::isnan(soft[at]) && std::isnan(soft_t[at]) && std::isnan(norm[at]), where.c_str());
            continue;
          }
          QVERIFY2(std::isnan(soft_t[at]) ? std::isnan(soft[at]) : soft_t[at] == soft[at], where.c_str());
          const double want_soft = std::exp(x_at(r, i) - most) / sum;
          const double want_norm = (x_at(r, i) - mean) / std::sqrt(var + 1e-5) * gs[size_t(i)] + bs[size_t(i)];
          QVERIFY2(std::fabs(soft[at] - want_soft) <= 1e-6 + 1e-5 * want_soft, (where + ": " + std::to_string(soft[at])).c_str());
          QVERIFY2(std::fabs(norm[at] - want_norm) <= 2e-5 * (1 + std::fabs(want_norm)), (where + ": " + std::to_string(norm[at])).c_str());
        }
      }
    }
  }

  // A reduction stays a kernel of its own when another kernel reads it too
  // (the caller asks for the maximum as well), or when it is over leading
  // axes (a softmax over the first axis reads its statistics down columns).
  void rowReductionsReadElsewhereStayApart_data() { add_device_rows(); }
  void rowReductionsReadElsewhereStayApart() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const auto xs = ramp(4 * 40, -2.0f, 0.03f);
    Tensor x = Tensor::from_data(xs, {4, 40}, dev);
    x.realize();
    Tensor most = x.max({1}, true), shifted = x - most;
    std::vector<float> got_shifted, got_most;
    const auto recs = launches([&] {
      Tensor::realize_all({shifted, most});
      got_shifted = shifted.to_vector();
      got_most = most.to_vector();
    });
    QVERIFY2(recs.size() == 2 && recs[0].kernel->name.rfind("R_", 0) == 0 && recs[1].kernel->name.rfind("E_", 0) == 0,
             tltest::kernel_names(recs).c_str());
    for (int64_t r = 0; r < 4; ++r) {
      const float want = *std::max_element(xs.begin() + r * 40, xs.begin() + (r + 1) * 40);
      QCOMPARE(got_most[size_t(r)], want);
      for (int64_t i = 0; i < 40; ++i)
        QVERIFY(std::fabs(got_shifted[size_t(r * 40 + i)] - (xs[size_t(r * 40 + i)] - want)) <= 1e-6);
    }
    std::vector<float> columns;
    const auto column_recs = launches([&] { columns = x.softmax(0).to_vector(); });
    for (const auto& r : column_recs) QVERIFY2(r.kernel->name.rfind("ROWS", 0) != 0, tltest::kernel_names(column_recs).c_str());
    for (int64_t i = 0; i < 40; ++i) {
      double sum = 0, most = -INFINITY;
      for (int64_t r = 0; r < 4; ++r) most = std::max(most, double(xs[size_t(r * 40 + i)]));
      for (int64_t r = 0; r < 4; ++r) sum += std::exp(double(xs[size_t(r * 40 + i)]) - most);
      for (int64_t r = 0; r < 4; ++r) {
        const double want = std::exp(double(xs[size_t(r * 40 + i)]) - most) / sum;
        QVERIFY(std::fabs(columns[size_t(r * 40 + i)] - want) <= 1e-6 + 1e-5 * want);
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestFusion)
#include "test_fusion.moc"
