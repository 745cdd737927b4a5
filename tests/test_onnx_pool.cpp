// ONNX MaxPool after a convolution (issue 12, SqueezeNet, Inception):
// overlapping windows read the pool's input once it is stored. A
// convolution's bias and ReLU are stored by its GEMM (or by the Concat of two
// branches, as in a fire module), once, not recomputed at each of the
// window's taps; a Concat that a convolution reads as well (an Inception
// block) is read from that buffer, not copied into one of its own. The
// reference is a direct convolution, ReLU, Concat and max pool in double
// precision, for odd sizes, ceil mode, pads, strides and a batch of two.
//
// AveragePool: against the same average in double precision, with and
// without the padding counted; overlapping windows in two passes.
//
// LRN (AlexNet, GoogLeNet): against the same formula in double precision,
// with a base far from 1 so that a wrong exponent shows; its usual beta of
// 0.75 is computed with square roots, not the scalar pow().
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <random>

#include "core/io/onnx.h"
#include "core/profile.h"
#include "core/realize.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"

namespace fs = std::filesystem;
using namespace tl;
using TP = onnx::TensorProto;
using tltest::Builder;
using tltest::ints_attr;

namespace {

std::vector<double> random_values(size_t n, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = float(u(rng));  // exactly representable in the float32 file
  return v;
}

void float_init(Builder& b, const std::string& name, const Shape& shape, const std::vector<double>& values) {
  auto* t = b.init(name, std::vector<int64_t>(shape.begin(), shape.end()), TP::FLOAT);
  for (double v : values) t->add_float_data(float(v));
}

// (N, C, S, S) values in row-major order.
struct Map {
  int64_t n, c, s;
  std::vector<double> v;
  double& at(int64_t i, int64_t ch, int64_t y, int64_t x) { return v[size_t(((i * c + ch) * s + y) * s + x)]; }
  double at(int64_t i, int64_t ch, int64_t y, int64_t x) const { return v[size_t(((i * c + ch) * s + y) * s + x)]; }
};

// relu(conv(x, w) + b), square kernel, stride 1, `pad` on every side.
Map conv_relu(const Map& x, const std::vector<double>& w, const std::vector<double>& b, int64_t outputs,
              int64_t kernel, int64_t pad) {
  Map y{x.n, outputs, x.s + 2 * pad - kernel + 1, {}};
  y.v.assign(size_t(y.n * y.c * y.s * y.s), 0.0);
  for (int64_t i = 0; i < y.n; ++i)
    for (int64_t o = 0; o < outputs; ++o)
      for (int64_t oy = 0; oy < y.s; ++oy)
        for (int64_t ox = 0; ox < y.s; ++ox) {
          double s = b[size_t(o)];
          for (int64_t ci = 0; ci < x.c; ++ci)
            for (int64_t ky = 0; ky < kernel; ++ky)
              for (int64_t kx = 0; kx < kernel; ++kx) {
                const int64_t iy = oy + ky - pad, ix = ox + kx - pad;
                if (iy >= 0 && iy < x.s && ix >= 0 && ix < x.s)
                  s += x.at(i, ci, iy, ix) * w[size_t(((o * x.c + ci) * kernel + ky) * kernel + kx)];
              }
          y.at(i, o, oy, ox) = std::max(s, 0.0);
        }
  return y;
}

// ONNX MaxPool: a window whose start lies in the end padding is dropped.
Map max_pool(const Map& x, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = x.s + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= x.s + pad) --out;
  Map y{x.n, x.c, out, {}};
  y.v.assign(size_t(y.n * y.c * out * out), -INFINITY);
  for (int64_t i = 0; i < x.n; ++i)
    for (int64_t ch = 0; ch < x.c; ++ch)
      for (int64_t oy = 0; oy < out; ++oy)
        for (int64_t ox = 0; ox < out; ++ox)
          for (int64_t ky = 0; ky < kernel; ++ky)
            for (int64_t kx = 0; kx < kernel; ++kx) {
              const int64_t iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
              if (iy >= 0 && iy < x.s && ix >= 0 && ix < x.s)
                y.at(i, ch, oy, ox) = std::max(y.at(i, ch, oy, ox), x.at(i, ch, iy, ix));
            }
  return y;
}

// ONNX AveragePool: each window's sum over the real cells, divided by the
// cells it covers (the explicit padding too when `include_pad`, never the
// ceil-mode overhang past it).
Map average_pool(const Map& x, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode, bool include_pad) {
  const int64_t span = x.s + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= x.s + pad) --out;
  Map y{x.n, x.c, out, {}};
  y.v.assign(size_t(y.n * y.c * out * out), 0.0);
  auto inside = [&](int64_t p) { return include_pad ? p >= -pad && p < x.s + pad : p >= 0 && p < x.s; };
  for (int64_t i = 0; i < x.n; ++i)
    for (int64_t ch = 0; ch < x.c; ++ch)
      for (int64_t oy = 0; oy < out; ++oy)
        for (int64_t ox = 0; ox < out; ++ox) {
          double sum = 0, cells = 0;
          for (int64_t ky = 0; ky < kernel; ++ky)
            for (int64_t kx = 0; kx < kernel; ++kx) {
              const int64_t iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
              if (iy >= 0 && iy < x.s && ix >= 0 && ix < x.s) sum += x.at(i, ch, iy, ix);
              cells += inside(iy) && inside(ix);
            }
          y.at(i, ch, oy, ox) = sum / cells;
        }
  return y;
}

// A model of one convolution (3x3, pad 1, ReLU) read by a 3x3 stride-2 max
// pool, written to `path`, with its direct reference for `x`.
Map conv_pool_model(const Map& x, int64_t outputs, int64_t pad, bool ceil, uint32_t seed, const fs::path& path) {
  std::mt19937 rng(seed);
  const auto w = random_values(size_t(outputs * x.c * 9), rng, -0.5, 0.5);
  const auto b = random_values(size_t(outputs), rng, -0.5, 0.5);
  Map want = max_pool(conv_relu(x, w, b, outputs, 3, 1), 3, 2, pad, ceil);
  Builder m(12);
  m.input("x", tltest::dims({x.n, x.c, x.s, x.s}));
  m.output("y", tltest::dims({want.n, want.c, want.s, want.s}));
  float_init(m, "W", {outputs, x.c, 3, 3}, w);
  float_init(m, "B", {outputs}, b);
  ints_attr(m.node("Conv", {"x", "W", "B"}, {"c"}), "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  auto* pool = m.node("MaxPool", {"r"}, {"y"});
  ints_attr(pool, "kernel_shape", {3, 3});
  ints_attr(pool, "strides", {2, 2});
  ints_attr(pool, "pads", {pad, pad, pad, pad});
  auto* c = pool->add_attribute();
  c->set_name("ceil_mode"), c->set_type(onnx::AttributeProto::INT), c->set_i(ceil ? 1 : 0);
  m.save(path);
  return want;
}

}  // namespace

class TestOnnxPool : public QObject {
  Q_OBJECT

 private slots:
  void poolReadsStoredConvolution_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("pad");
    QTest::addColumn<bool>("ceil");
    QTest::addColumn<int>("block");  // 0: one convolution; 1: a fire module; 2: an Inception block
    // 3: one convolution of 16 channels, which the cpu device computes by
    // Winograd's transform: its pool is then a kernel of its own.
    QTest::newRow("3x3 s2 ceil, odd map (SqueezeNet)") << 13 << 3 << 2 << 0 << true << 0;
    QTest::newRow("3x3 s2 ceil, a window dropped") << 12 << 3 << 2 << 0 << true << 0;
    QTest::newRow("3x3 s2 pad 1, floor") << 14 << 3 << 2 << 1 << false << 0;
    QTest::newRow("3x3 s1 pad 1") << 9 << 3 << 1 << 1 << false << 0;
    QTest::newRow("2x2 s2 (no overlap)") << 11 << 2 << 2 << 0 << true << 0;
    // One channel in, 3 out: the pooled kernel's product takes its path for few rows.
    QTest::newRow("3x3 s2 ceil, 1 -> 3 channels") << 8 << 3 << 2 << 0 << true << 0;
    // 64 channels: the pooled kernel computes a map this wide in bands of rows.
    QTest::newRow("3x3 s2 ceil, 57x57 map in bands") << 57 << 3 << 2 << 0 << true << 0;
    QTest::newRow("3x3 s2 pad 1, 56x56 map in bands (ResNet's)") << 56 << 3 << 2 << 1 << false << 0;
    QTest::newRow("fire module: Concat of 1x1 and 3x3, 3x3 s2 ceil") << 15 << 3 << 2 << 0 << true << 1;
    QTest::newRow("fire module, pad 1") << 10 << 3 << 2 << 1 << true << 1;
    QTest::newRow("Inception block: the Concat also feeds a 1x1 conv, 3x3 s1 pad 1") << 11 << 3 << 1 << 1 << false << 2;
    QTest::newRow("2x2 s2 after a 3x3 convolution of 16 channels (VGG's)") << 20 << 2 << 2 << 0 << false << 3;
  }
  void poolReadsStoredConvolution() {
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(int, pad);
    QFETCH(bool, ceil);
    QFETCH(int, block);
    const bool concat = block == 1 || block == 2, winograd = block == 3;
    std::mt19937 rng(uint32_t(size * 100 + kernel * 10 + pad + block * 7));
    // Three images: a thread's units then span two of them (tinylens_gemm_f32's pooled
    // product keeps rows of C from one unit for the next only within an image).
    const int64_t batch = 3, channels = winograd ? 16 : size < 9 ? 1 : 5;
    const int64_t outputs = winograd ? 16 : size > 40 ? 64 : size < 9 ? 3 : 6;
    Map x{batch, channels, size, random_values(size_t(batch * channels * size * size), rng, -1, 1)};
    // Branch a: 3x3 pad 1 (or 1x1 before a Concat); branch b (Concat only): 3x3 pad 1.
    const int64_t ka = concat ? 1 : 3, pa = concat ? 0 : 1;
    const auto wa = random_values(size_t(outputs * channels * ka * ka), rng, -0.5, 0.5);
    const auto ba = random_values(size_t(outputs), rng, -0.5, 0.5);
    const auto wb = random_values(size_t(outputs * channels * 9), rng, -0.5, 0.5);
    const auto bb = random_values(size_t(outputs), rng, -0.5, 0.5);
    // Inception: relu(1x1 conv of the Concat) is added to the pool's output.
    const auto wc = random_values(size_t(4 * outputs * outputs), rng, -0.5, 0.5);
    const auto bc = random_values(size_t(2 * outputs), rng, -0.5, 0.5);
    Map pooled_in = conv_relu(x, wa, ba, outputs, ka, pa);
    if (concat) {
      const Map b = conv_relu(x, wb, bb, outputs, 3, 1);
      Map cat{batch, 2 * outputs, size, {}};
      for (int64_t i = 0; i < batch; ++i) {
        const auto plane = size_t(outputs * size * size);
        const auto from = [&](const Map& m) { return m.v.begin() + std::ptrdiff_t(size_t(i) * plane); };
        cat.v.insert(cat.v.end(), from(pooled_in), from(pooled_in) + std::ptrdiff_t(plane));
        cat.v.insert(cat.v.end(), from(b), from(b) + std::ptrdiff_t(plane));
      }
      pooled_in = cat;
    }
    Map want = max_pool(pooled_in, kernel, stride, pad, ceil);
    if (block == 2) {
      const Map side = conv_relu(pooled_in, wc, bc, 2 * outputs, 1, 0);
      QCOMPARE(side.v.size(), want.v.size());
      for (size_t i = 0; i < want.v.size(); ++i) want.v[i] += side.v[i];
    }

    const fs::path dir = tltest::fresh_temp_dir("onnx-pool", "fire");
    Builder m(12);
    auto dims = [](const Map& t) {
      return std::vector<std::string>{std::to_string(t.n), std::to_string(t.c), std::to_string(t.s),
                                      std::to_string(t.s)};
    };
    m.input("x", dims(x));
    m.output("y", dims(want));
    float_init(m, "Wa", {outputs, channels, ka, ka}, wa);
    float_init(m, "Ba", {outputs}, ba);
    ints_attr(m.node("Conv", {"x", "Wa", "Ba"}, {"ca"}), "pads", {pa, pa, pa, pa});
    m.node("Relu", {"ca"}, {concat ? "ra" : "p"});
    if (concat) {
      float_init(m, "Wb", {outputs, channels, 3, 3}, wb);
      float_init(m, "Bb", {outputs}, bb);
      ints_attr(m.node("Conv", {"x", "Wb", "Bb"}, {"cb"}), "pads", {1, 1, 1, 1});
      m.node("Relu", {"cb"}, {"rb"});
      auto* cat = m.node("Concat", {"ra", "rb"}, {"p"})->add_attribute();
      cat->set_name("axis"), cat->set_type(onnx::AttributeProto::INT), cat->set_i(1);
    }
    auto* pool = m.node("MaxPool", {"p"}, {block == 2 ? "q" : "y"});
    ints_attr(pool, "kernel_shape", {kernel, kernel});
    ints_attr(pool, "strides", {stride, stride});
    ints_attr(pool, "pads", {pad, pad, pad, pad});
    auto* c = pool->add_attribute();
    c->set_name("ceil_mode"), c->set_type(onnx::AttributeProto::INT), c->set_i(ceil ? 1 : 0);
    if (block == 2) {
      float_init(m, "Wc", {2 * outputs, 2 * outputs, 1, 1}, wc);
      float_init(m, "Bc", {2 * outputs}, bc);
      m.node("Conv", {"p", "Wc", "Bc"}, {"cc"});
      m.node("Relu", {"cc"}, {"rc"});
      m.node("Add", {"q", "rc"}, {"y"});
    }
    const std::string path = m.save(dir / "pool.onnx");

    OnnxModel model(path);
    const Tensor input = Tensor::from_data(std::vector<float>(x.v.begin(), x.v.end()), {batch, channels, size, size}, "cpu");
    model.run({input})[0].realize();  // compiles
    ProfileCapture capture;
    const Tensor y = model.run({input})[0];
    const std::vector<float> got = y.to_vector();
    QCOMPARE(y.shape(), (Shape{batch, pooled_in.c, want.s, want.s}));
    QCOMPARE(got.size(), want.v.size());
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(std::abs(got[i] - want.v[i]) <= 1e-5 * (1 + std::abs(want.v[i])),
               qPrintable(QString("element %1: %2, reference %3").arg(i).arg(got[i]).arg(want.v[i])));

    // Each convolution is one GEMM that stores its bias and ReLU; overlapping
    // windows take two passes (rows, then columns), others one, and the last
    // pass may be a later GEMM's epilogue (on the cpu device a max pool is
    // one MAXPOOL kernel: tests/test_depthwise.cpp). A Concat is stored once, by one
    // kernel that sums its padded halves. No kernel copies a stored value (a
    // kernel of CONTIGUOUS alone): the Inception block's pool reads the
    // Concat that its 1x1 convolution reads.
    int gemms = 0, others = 0, copies = 0;
    bool gemm_adds = false, last_adds = false;
    std::string names;
    for (const auto& r : capture.records()) {
      names += r.kernel->name + " ";
      const auto& ops = r.kernel->ops;
      last_adds = tltest::fuses(*r.kernel, "ADD");
      if (r.kernel->name.rfind("GEMM", 0) == 0) {
        ++gemms;
        gemm_adds |= last_adds;
      } else {
        ++others;
        copies += ops == std::vector<std::string>{"CONTIGUOUS"};
      }
    }
    QVERIFY(gemm_adds);
    QVERIFY2(gemms == (block == 0 || block == 3 ? 1 : block == 1 ? 2 : 3), names.c_str());
    QVERIFY2(copies == 0, names.c_str());
    // A convolution read by its max pool alone is pooled by its own kernel
    // (KernelPlan::pool): one kernel, which never stores the convolution.
    // With TINYLENS_NOPOOLFUSION=1 the pool is a kernel of its own, and so
    // it is after a convolution the cpu device computes faster alone (by
    // Winograd's transform, which a pooled product does not take).
    const bool pooled = names.find("_MAXPOOL_") != std::string::npos;
    if (block == 0 && pool_fusion_enabled()) QVERIFY2(pooled && others == 0, names.c_str());
    if (block == 3) QVERIFY2(!pooled && others == 1 && names.find("MAXPOOL_") != std::string::npos, names.c_str());
    QVERIFY2(others <= (kernel > stride ? 2 : 1) + (concat ? 1 : 0), names.c_str());
    // The pool's last pass reads stored values: it adds nothing (no bias, no
    // Concat's sum of padded halves). The Inception block's last kernel adds
    // the two branches.
    if (kernel > stride && block < 2 && !pooled) QVERIFY2(!last_adds, names.c_str());
    fs::remove_all(dir);
  }

  // Two models in one process whose convolution + max pool kernels differ
  // only in the pool's padding: ResNet's (pad 1) and GoogLeNet's (pad 0, ceil
  // mode) give one output shape on an even map, and one kernel name
  // (GEMM_..._MAXPOOL_9). Each must run its own kernel, in either order,
  // again after the other, and with replay (a process that opens model after
  // model, as the window and onnx-test over many folders do). The rendered
  // kernels were cached by a signature that left out the pool's window, so
  // the second model ran the first one's kernel.
  void poolPaddingsInOneProcess() {
    const int64_t n = 2, channels = 3, size = 14, outputs = 8;
    std::mt19937 rng(77);
    const Map x{n, channels, size, random_values(size_t(n * channels * size * size), rng, -1, 1)};
    const fs::path dir = tltest::fresh_temp_dir("onnx-pool", "two-models");
    const Map want_a = conv_pool_model(x, outputs, 1, false, 5, dir / "resnet_pool.onnx");
    const Map want_b = conv_pool_model(x, outputs, 0, true, 5, dir / "googlenet_pool.onnx");
    QCOMPARE(want_a.s, want_b.s);  // the same shape: only the window tells them apart
    for (const std::string& device : tltest::available_devices()) {
      forget_compiled_kernels();
      OnnxModel a((dir / "resnet_pool.onnx").string()), b((dir / "googlenet_pool.onnx").string());
      const Tensor input = Tensor::from_data(std::vector<float>(x.v.begin(), x.v.end()), {n, channels, size, size}, device);
      int step = 0;
      for (const bool first : {true, false, false, true, true, false}) {
        const Map& want = first ? want_a : want_b;
        const std::vector<float> got = (first ? a : b).run({input})[0].to_vector();
        QCOMPARE(got.size(), want.v.size());
        for (size_t i = 0; i < got.size(); ++i)
          QVERIFY2(std::abs(got[i] - want.v[i]) <= 1e-5 * (1 + std::abs(want.v[i])),
                   qPrintable(QString("%1, run %2 (%3): element %4 is %5, reference %6")
                                  .arg(device.c_str()).arg(step).arg(first ? "pad 1" : "ceil mode").arg(i)
                                  .arg(got[i]).arg(want.v[i])));
        ++step;
      }
    }
    fs::remove_all(dir);
  }

  // A dilated max pool of more taps than one node unrolls (ONNX's
  // pytorch-converted MaxPool2d_stride_padding_dilation: 60x80 taps, dilation
  // 10, stride 10, pads 10 and 20) is separable: folded one axis at a time it
  // unrolls 140 taps, not 4800, and runs on every device.
  void largeDilatedMaxPool() {
    const int64_t size = 1000, kh = 60, kw = 80, dil = 10, stride = 10, ph = 10, pw = 20;
    std::mt19937 rng(9);
    const auto x = random_values(size_t(size * size), rng, -1, 1);
    const int64_t oh = (size + 2 * ph - (kh - 1) * dil - 1) / stride + 1, ow = (size + 2 * pw - (kw - 1) * dil - 1) / stride + 1;
    std::vector<double> want(size_t(oh * ow), -INFINITY);
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t a = 0; a < kh; ++a)
          for (int64_t b = 0; b < kw; ++b) {
            const int64_t r = i * stride + a * dil - ph, q = j * stride + b * dil - pw;
            if (r >= 0 && r < size && q >= 0 && q < size)
              want[size_t(i * ow + j)] = std::max(want[size_t(i * ow + j)], x[size_t(r * size + q)]);
          }
    const fs::path dir = tltest::fresh_temp_dir("onnx-pool", "dilated");
    Builder m(12);
    m.input("x", tltest::dims({1, 1, size, size}));
    m.output("y", tltest::dims({1, 1, oh, ow}));
    auto* pool = m.node("MaxPool", {"x"}, {"y"});
    ints_attr(pool, "kernel_shape", {kh, kw});
    ints_attr(pool, "dilations", {dil, dil});
    ints_attr(pool, "strides", {stride, stride});
    ints_attr(pool, "pads", {ph, pw, ph, pw});
    OnnxModel model(m.save(dir / "dilated.onnx"));
    for (const std::string& device : tltest::available_devices()) {
      const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), {1, 1, size, size}, device);
      const Tensor y = model.run({input})[0];
      QCOMPARE(y.shape(), (Shape{1, 1, oh, ow}));
      const std::vector<float> got = y.to_vector();
      for (size_t i = 0; i < got.size(); ++i)
        QVERIFY2(double(got[i]) == want[i], qPrintable(QString("%1: element %2 is %3, reference %4")
                                                           .arg(device.c_str()).arg(i).arg(got[i]).arg(want[i])));
    }
    fs::remove_all(dir);
  }

  void lrnMatchesFormula_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<double>("alpha");
    QTest::addColumn<double>("beta");
    QTest::addColumn<double>("bias");
    QTest::newRow("beta 0.75, size 5 (GoogLeNet's form)") << 5 << 2.0 << 0.75 << 1.0;
    QTest::newRow("beta 0.75, size 3, bias 2") << 3 << 0.5 << 0.75 << 2.0;
    QTest::newRow("beta 0.6: pow") << 3 << 1.0 << 0.6 << 1.0;
    QTest::newRow("beta 0.75, bias 0: pow") << 3 << 1.0 << 0.75 << 0.0;
  }
  void lrnMatchesFormula() {
    QFETCH(int, size);
    QFETCH(double, alpha);
    QFETCH(double, beta);
    QFETCH(double, bias);
    const int64_t n = 2, c = 7, s = 5;
    std::mt19937 rng(uint32_t(size * 31 + int(beta * 100)));
    Map x{n, c, s, random_values(size_t(n * c * s * s), rng, -3, 3)};
    Map want = x;
    const int64_t before = (size - 1) / 2, after = size - 1 - before;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 0; y < s; ++y)
          for (int64_t z = 0; z < s; ++z) {
            double sum = 0;
            for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k)
              sum += x.at(i, k, y, z) * x.at(i, k, y, z);
            want.at(i, ch, y, z) = x.at(i, ch, y, z) / std::pow(bias + alpha / size * sum, beta);
          }
    const fs::path dir = tltest::fresh_temp_dir("onnx-pool", "lrn");
    Builder m(12);
    m.input("x", tltest::dims({n, c, s, s}));
    m.output("y", tltest::dims({n, c, s, s}));
    auto* lrn = m.node("LRN", {"x"}, {"y"});
    auto f = [&](const char* name, double v) {
      auto* a = lrn->add_attribute();
      a->set_name(name), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(float(v));
    };
    f("alpha", alpha), f("beta", beta), f("bias", bias);
    auto* sz = lrn->add_attribute();
    sz->set_name("size"), sz->set_type(onnx::AttributeProto::INT), sz->set_i(size);
    OnnxModel model(m.save(dir / "lrn.onnx"));
    const Tensor input = Tensor::from_data(std::vector<float>(x.v.begin(), x.v.end()), {n, c, s, s}, "cpu");
    ProfileCapture capture;
    const std::vector<float> got = model.run({input})[0].to_vector();
    QCOMPARE(got.size(), want.v.size());
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(std::abs(got[i] - want.v[i]) <= 2e-6 * (1 + std::abs(want.v[i])),
               qPrintable(QString("element %1: %2, reference %3").arg(i).arg(got[i]).arg(want.v[i])));
    QCOMPARE(tltest::any_kernel_fuses(capture.records(), "POW"), beta != 0.75 || bias <= 0);
    fs::remove_all(dir);
  }

  // AveragePool (Inception v2's 3x3 branches at stride 1): overlapping
  // windows add along rows, store, then along columns, as MaxPool does, and
  // the divisor is a product of per-axis counts made when the model loads.
  // Against a double-precision pool of relu(x) with pads counted or not,
  // ceil mode, odd and even maps and a batch of two.
  // An Inception reduction block joins a pool to convolutions. The pool of
  // overlapping windows is stored by its own kernel, so the Concat reads one
  // value per element and, on the C device, is assembled in place (it was a
  // kernel that recomputed the window at every element of its pool part).
  void poolJoinedToAConvolutionIsAssembled_data() {
    QTest::addColumn<bool>("max");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("pad");
    QTest::addColumn<bool>("ceil");
    QTest::newRow("MaxPool 3x3 s2 ceil (Inception v2)") << true << 14 << 0 << true;
    QTest::newRow("MaxPool 3x3 s2 pad 1") << true << 13 << 1 << false;
    QTest::newRow("AveragePool 3x3 s2 pad 1 (divisors per axis)") << false << 13 << 1 << false;
  }
  void poolJoinedToAConvolutionIsAssembled() {
    QFETCH(bool, max);
    QFETCH(int, size);
    QFETCH(int, pad);
    QFETCH(bool, ceil);
    const int64_t channels = 8, outputs = 16;
    std::mt19937 rng(uint32_t(size + pad + (max ? 100 : 0)));
    Map x{1, channels, size, random_values(size_t(channels * size * size), rng, -1, 1)};
    const Map p = max ? max_pool(x, 3, 2, pad, ceil) : average_pool(x, 3, 2, pad, ceil, false);
    // The other piece: relu of a 1x1 convolution of x at stride 2.
    const auto w = random_values(size_t(outputs * channels), rng, -0.5, 0.5);
    const auto b = random_values(size_t(outputs), rng, -0.5, 0.5);
    const int64_t s2 = (size - 1) / 2 + 1;
    QCOMPARE(p.s, s2);
    Map want{1, channels + outputs, s2, p.v};
    for (int64_t o = 0; o < outputs; ++o)
      for (int64_t y = 0; y < s2; ++y)
        for (int64_t xx = 0; xx < s2; ++xx) {
          double acc = b[size_t(o)];
          for (int64_t ch = 0; ch < channels; ++ch) acc += w[size_t(o * channels + ch)] * x.at(0, ch, 2 * y, 2 * xx);
          want.v.push_back(std::max(acc, 0.0));
        }

    const fs::path dir = tltest::fresh_temp_dir("onnx-pool", "join");
    Builder m(12);
    m.input("x", tltest::dims({1, channels, size, size}));
    m.output("y", tltest::dims({1, channels + outputs, s2, s2}));
    auto* pool = m.node(max ? "MaxPool" : "AveragePool", {"x"}, {"p"});
    ints_attr(pool, "kernel_shape", {3, 3});
    ints_attr(pool, "strides", {2, 2});
    ints_attr(pool, "pads", {pad, pad, pad, pad});
    auto* mode = pool->add_attribute();
    mode->set_name("ceil_mode"), mode->set_type(onnx::AttributeProto::INT), mode->set_i(ceil ? 1 : 0);
    float_init(m, "W", {outputs, channels, 1, 1}, w);
    float_init(m, "B", {outputs}, b);
    ints_attr(m.node("Conv", {"x", "W", "B"}, {"c"}), "strides", {2, 2});
    m.node("Relu", {"c"}, {"q"});
    auto* cat = m.node("Concat", {"p", "q"}, {"y"})->add_attribute();
    cat->set_name("axis"), cat->set_type(onnx::AttributeProto::INT), cat->set_i(1);
    OnnxModel model(m.save(dir / "join.onnx"));
    const Tensor input = Tensor::from_data(std::vector<float>(x.v.begin(), x.v.end()), {1, channels, size, size}, "cpu");
    model.run({input})[0].realize();  // compiles
    ProfileCapture capture;
    const std::vector<float> got = model.run({input})[0].to_vector();
    QCOMPARE(got.size(), want.v.size());
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(std::abs(got[i] - want.v[i]) <= 1e-5 * (1 + std::abs(want.v[i])),
               qPrintable(QString("element %1: %2, reference %3").arg(i).arg(got[i]).arg(want.v[i])));
    int assembled = 0;
    std::string names;
    for (const auto& r : capture.records()) {
      assembled += r.kernel->assembled ? 1 : 0;
      names += r.kernel->name + " ";
    }
    QVERIFY2(assembled == 1, names.c_str());
    fs::remove_all(dir);
  }

  void averagePoolAddsAlongOneAxisAtATime_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("pad");
    QTest::addColumn<bool>("ceil");
    QTest::addColumn<bool>("include_pad");
    QTest::newRow("3x3 s1 pad 1, pads not counted (Inception)") << 9 << 3 << 1 << 1 << false << false;
    QTest::newRow("3x3 s1 pad 1, pads counted") << 10 << 3 << 1 << 1 << false << true;
    QTest::newRow("3x3 s2 pad 1 ceil: an overhang never counted") << 12 << 3 << 2 << 1 << true << true;
    QTest::newRow("5x5 s1 pad 2") << 7 << 5 << 1 << 2 << false << false;
    QTest::newRow("2x2 s2 ceil (no overlap: one pass)") << 11 << 2 << 2 << 0 << true << false;
  }
  void averagePoolAddsAlongOneAxisAtATime() {
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(int, pad);
    QFETCH(bool, ceil);
    QFETCH(bool, include_pad);
    const int64_t n = 2, c = 3;
    std::mt19937 rng(uint32_t(size * 131 + kernel * 17 + stride * 5 + pad + (include_pad ? 3 : 0)));
    Map x{n, c, size, random_values(size_t(n * c * size * size), rng, -1, 1)};
    Map relu = x;
    for (double& v : relu.v) v = std::max(v, 0.0);
    const Map want = average_pool(relu, kernel, stride, pad, ceil, include_pad);

    const fs::path dir = tltest::fresh_temp_dir("onnx-pool", "average");
    Builder m(12);
    m.input("x", tltest::dims({n, c, size, size}));
    m.output("y", tltest::dims({n, c, want.s, want.s}));
    m.node("Relu", {"x"}, {"r"});
    auto* pool = m.node("AveragePool", {"r"}, {"y"});
    ints_attr(pool, "kernel_shape", {kernel, kernel});
    ints_attr(pool, "strides", {stride, stride});
    ints_attr(pool, "pads", {pad, pad, pad, pad});
    for (auto [name, value] : {std::pair{"ceil_mode", ceil}, std::pair{"count_include_pad", include_pad}}) {
      auto* a = pool->add_attribute();
      a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(value ? 1 : 0);
    }
    OnnxModel model(m.save(dir / "average.onnx"));
    const Tensor input = Tensor::from_data(std::vector<float>(x.v.begin(), x.v.end()), {n, c, size, size}, "cpu");
    model.run({input})[0].realize();  // compiles
    ProfileCapture capture;
    const Tensor y = model.run({input})[0];
    const std::vector<float> got = y.to_vector();
    QCOMPARE(y.shape(), (Shape{n, c, want.s, want.s}));
    QCOMPARE(got.size(), want.v.size());
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(std::abs(got[i] - want.v[i]) <= 1e-6 * (1 + std::abs(want.v[i])),
               qPrintable(QString("element %1: %2, reference %3").arg(i).arg(got[i]).arg(want.v[i])));
    // Overlapping windows: no kernel adds more than one axis of a window
    // (kernel - 1 adds), nor a map of ones; others add a whole window in one.
    size_t most_adds = 0;
    std::string names;
    for (const auto& r : capture.records()) {
      names += r.kernel->name + " ";
      most_adds = std::max<size_t>(most_adds, size_t(std::count(r.kernel->ops.begin(), r.kernel->ops.end(), "ADD")));
    }
    QVERIFY2(most_adds == size_t(kernel > stride ? kernel - 1 : kernel * kernel - 1), names.c_str());
    // The divisors are the same tensor run after run: the Jit replays the
    // graph (no graph built), with the new input's values.
    Map x2 = x;
    for (double& v : x2.v) v = 0.75 - v;
    Map relu2 = x2;
    for (double& v : relu2.v) v = std::max(v, 0.0);
    const Map want2 = average_pool(relu2, kernel, stride, pad, ceil, include_pad);
    const std::vector<float> got2 =
        model.run({Tensor::from_data(std::vector<float>(x2.v.begin(), x2.v.end()), {n, c, size, size}, "cpu")})[0]
            .to_vector();
    for (size_t i = 0; i < got2.size(); ++i)
      QVERIFY2(std::abs(got2[i] - want2.v[i]) <= 1e-6 * (1 + std::abs(want2.v[i])),
               qPrintable(QString("replay, element %1: %2, reference %3").arg(i).arg(got2[i]).arg(want2.v[i])));
    QVERIFY(model.jit_captured("cpu"));
    fs::remove_all(dir);
  }
};

QTEST_GUILESS_MAIN(TestOnnxPool)
#include "test_onnx_pool.moc"
