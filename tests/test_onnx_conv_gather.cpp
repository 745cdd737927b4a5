// Convolutions whose GEMM gathers its B operand from the image (ConvGather in
// core/ops.h; pack_b_gather in kernels/gemm_cpu.c) instead of reading
// materialised im2col columns: ONNX Conv models against a direct computation
// in double precision, on every device. The cases reach the gather's edges:
// strides 1 and 2, dilations, asymmetric pads from the Conv and from a Pad
// node before it, windows that lie wholly in the padding, output rows
// narrower and wider than a packed panel (panels on one row are one copy
// per tap, the others one copy per output row they cross), K in several
// blocks, C in several column blocks, row counts that leave ragged tiles and
// a thin C of two rows, a batch of two images, grouped convolutions (a
// batch of images x groups, each product gathering its group's channels),
// narrow maps read in place with tiles that cross output rows.
// On the cpu device the warm run is the GEMM alone (no im2col kernel), and
// an image that a GEMM's store produces (a 1x1 convolution and its ReLU)
// costs no kernel of its own either.
#include <QtTest>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/io/onnx.h"
#include "core/profile.h"
#include "tests/depthwise_reference.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"

using namespace tl;
using TP = onnx::TensorProto;
using tltest::Builder;
using tltest::dims;
using tltest::ints_attr;

namespace {

struct Case {
  const char* name;
  int C, O, H, W, KH, KW, SH, SW, DH, DW;
  int pads[4];      // the Conv's: top, left, bottom, right (ONNX order)
  int pad_node[4];  // a Pad node's before it (same order); all 0: no Pad node
  bool producer;    // the image is Relu(Conv1x1(x)) with C channels, x having 3
  int kernels;      // in a warm run on the cpu device, all GEMMs
  int G = 1;        // groups: a batch of N x G products, each over C/G channels
  int N = 2;        // images
};

const Case kCases[] = {
    {"3x3 s1 pad 1, K in two blocks, columns in two blocks", 40, 20, 40, 40, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0},
     false, 1},
    {"3x3 s2, own pads and a Pad node", 5, 17, 17, 23, 3, 3, 2, 2, 1, 1, {0, 1, 1, 0}, {1, 0, 0, 2}, false, 1},
    {"7x7 s2 pad 3 (a stem)", 3, 16, 33, 29, 7, 7, 2, 2, 1, 1, {3, 3, 3, 3}, {0, 0, 0, 0}, false, 1},
    {"3x3 s2 on rows of 70 outputs (whole panels on one row)", 3, 8, 9, 140, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1},
     {0, 0, 0, 0}, false, 1},
    {"3x3 s1 dilation 2", 4, 6, 12, 13, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, {0, 0, 0, 0}, false, 1},
    {"5x3 s2x1 dilation 1x2", 3, 8, 14, 11, 5, 3, 2, 1, 1, 2, {2, 2, 1, 2}, {0, 0, 0, 0}, false, 1},
    {"3x3 s1, two output channels", 8, 2, 9, 9, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, false, 1},
    // 49 columns and 256 rows: the cpu device computes C^T (gemm_block_t).
    {"3x3 s2 to a 7x7 map, 256 outputs", 24, 256, 14, 14, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, false, 1},
    // A ResNet downsampling: its pixels copied densely once, then a plain
    // product. Windows that read only some of the stride's phases (the
    // others are never copied): taps two apart at stride 2, and a window
    // smaller than its stride.
    {"1x1 s2 (a downsampling)", 20, 12, 15, 18, 1, 1, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0}, false, 1},
    {"3x3 s2 dilation 2 (even taps only)", 5, 7, 17, 16, 3, 3, 2, 2, 2, 2, {2, 1, 2, 1}, {0, 0, 0, 0}, false, 1},
    {"2x2 s3 with a pad", 4, 6, 14, 13, 2, 2, 3, 3, 1, 1, {1, 0, 0, 1}, {0, 0, 0, 0}, false, 1},
    {"3x3 over a pad of 3: windows wholly in the padding", 2, 5, 4, 6, 3, 3, 1, 1, 1, 1, {3, 3, 3, 3}, {0, 0, 0, 0},
     false, 1},
    {"3x3 without pads on a 3x3 image: one output", 6, 9, 3, 3, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0}, false, 1},
    {"3x3 s1 pad 1 after a 1x1 convolution and ReLU", 16, 24, 14, 14, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0},
     true, 2},
    // Grouped: one GEMM over the batch of images x groups. With two images the
    // groups' weights are laid out once per image by a copy kernel first.
    {"1x1, 4 groups of 6 channels", 24, 16, 9, 11, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0}, false, 1, 4},
    {"1x1, 8 groups, one image", 32, 24, 7, 7, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0}, false, 1, 8, 1},
    {"3x3 s1 pad 1, 2 groups, one image", 8, 12, 10, 10, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, false, 1, 2, 1},
    {"3x3 s2, 3 groups of 4 channels to 2, own pads and a Pad node", 12, 6, 13, 15, 3, 3, 2, 2, 1, 1, {0, 1, 1, 0},
     {1, 0, 0, 2}, false, 1, 3},
    {"5x3 s2x1 dilation 1x2, 2 groups after a 1x1 convolution and ReLU", 6, 4, 14, 11, 5, 3, 2, 1, 1, 2,
     {2, 2, 1, 2}, {0, 0, 0, 0}, true, 2, 2},
    // A RegNet's grouped 3x3 (8 channels a group) on maps narrower than a
    // tile: the image read in place at the phases' pitch, tiles across rows.
    {"3x3 s1 on a 7x9 map, 5 groups of 8 after a 1x1 convolution and ReLU", 40, 40, 7, 9, 3, 3, 1, 1, 1, 1,
     {1, 1, 1, 1}, {0, 0, 0, 0}, true, 2, 5, 1},
    {"3x3 s2 to a 14x14 map, 3 groups of 8 after a 1x1 convolution and ReLU", 24, 24, 28, 27, 3, 3, 2, 2, 1, 1,
     {1, 1, 1, 1}, {0, 0, 0, 0}, true, 2, 3, 1},
    // The C device's grouped path (gemm_cpu_depthwise.c's grouped_blocked)
    // on a 3x3 map: the threads' shares of rows are narrower than a vector,
    // and 4 output channels a group fill half of one.
    {"3x3 s1 on a 3x3 map, 4 groups of 8 channels to 4", 32, 16, 3, 3, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0},
     false, 1, 4},
};

// y[n, o, oy, ox] = b[o] + sum over c, i, j of w[o, c, i, j] * x[n, g*C/G + c, y, x]
// with y = oy*SH + i*DH - top, x = ox*SW + j*DW - left, zero outside x, and
// g = o / (O/G) output o's group, c < C/G.
std::vector<double> direct_conv(const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>& b, int N, const Case& c, int top, int left, int OH, int OW) {
  std::vector<double> y;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < c.O; ++o)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double acc = b[size_t(o)];
          const int per_group = c.C / c.G, first = o / (c.O / c.G) * per_group;
          for (int ch = 0; ch < per_group; ++ch)
            for (int i = 0; i < c.KH; ++i)
              for (int j = 0; j < c.KW; ++j) {
                const int iy = oy * c.SH + i * c.DH - top, ix = ox * c.SW + j * c.DW - left;
                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                acc += w[size_t(((o * per_group + ch) * c.KH + i) * c.KW + j)] *
                       x[size_t(((n * c.C + first + ch) * c.H + iy) * c.W + ix)];
              }
          y.push_back(acc);
        }
  return y;
}

}  // namespace

class TestOnnxConvGather : public QObject {
  Q_OBJECT
 private slots:
  void matchesDirectComputation_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    for (const std::string& d : tltest::available_devices())
      for (int i = 0; i < int(std::size(kCases)); ++i)
        QTest::newRow((d + " " + kCases[i].name).c_str()) << QString::fromStdString(d) << i;
  }

  void matchesDirectComputation() {
    QFETCH(QString, device);
    QFETCH(int, index);
    const std::string dev = device.toStdString();
    const Case& c = kCases[index];
    const int N = c.N, X = c.producer ? 3 : c.C;  // channels of the model's input
    std::mt19937 rng(uint32_t(57 + index));
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> x(size_t(N * X * c.H * c.W)), w(size_t(c.O * c.C / c.G * c.KH * c.KW)), b(size_t(c.O)),
        w1(size_t(c.C * X)), b1(size_t(c.C));
    for (auto* v : {&x, &w, &b, &w1, &b1})
      for (double& e : *v) e = float(u(rng));
    const int* pn = c.pad_node;
    const bool pad_node = pn[0] || pn[1] || pn[2] || pn[3];
    const int top = c.pads[0] + pn[0], left = c.pads[1] + pn[1];
    const int OH = (c.H + top + c.pads[2] + pn[2] - (c.KH - 1) * c.DH - 1) / c.SH + 1;
    const int OW = (c.W + left + c.pads[3] + pn[3] - (c.KW - 1) * c.DW - 1) / c.SW + 1;

    Builder m;
    m.input("x", dims({N, X, c.H, c.W}));
    m.output("y", dims({N, c.O, OH, OW}));
    auto weights = [&](const char* name, std::vector<int64_t> shape, const std::vector<double>& v) {
      auto* t = m.init(name, shape, TP::FLOAT);
      for (double e : v) t->add_float_data(float(e));
    };
    weights("W", {c.O, c.C / c.G, c.KH, c.KW}, w);
    weights("B", {c.O}, b);
    std::string image = "x";
    if (c.producer) {
      weights("W1", {c.C, X, 1, 1}, w1);
      weights("B1", {c.C}, b1);
      m.node("Conv", {"x", "W1", "B1"}, {"h"});
      m.node("Relu", {"h"}, {"r"});
      image = "r";
    }
    if (pad_node) {
      auto* pt = m.init("pads", {8}, TP::INT64);
      for (int64_t v : {0, 0, pn[0], pn[1], 0, 0, pn[2], pn[3]}) pt->add_int64_data(v);
      m.node("Pad", {image, "pads"}, {"xp"});
      image = "xp";
    }
    auto* conv = m.node("Conv", {image, "W", "B"}, {"y"});
    ints_attr(conv, "kernel_shape", {c.KH, c.KW});
    ints_attr(conv, "strides", {c.SH, c.SW});
    ints_attr(conv, "dilations", {c.DH, c.DW});
    ints_attr(conv, "pads", {c.pads[0], c.pads[1], c.pads[2], c.pads[3]});
    if (c.G > 1) {
      auto* group = conv->add_attribute();
      group->set_name("group");
      group->set_type(onnx::AttributeProto::INT);
      group->set_i(c.G);
    }
    const std::string path = m.save(tltest::fresh_temp_dir("conv-gather", std::to_string(index)) / "conv.onnx");

    OnnxModel model(path);
    const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), {N, X, c.H, c.W}, dev);
    model.run({input});  // cold: compiles
    std::vector<std::string> names;
    std::vector<float> got;
    {
      ProfileCapture capture;
      Tensor y = model.run({input})[0];
      QCOMPARE(y.shape(), (Shape{N, c.O, OH, OW}));
      got = y.to_vector();
      for (auto& r : capture.records()) names.push_back(r.kernel->name);
    }
    std::vector<double> image_values = x;
    if (c.producer) {  // r = Relu(W1 x + B1), a 1x1 convolution
      image_values.assign(size_t(N * c.C * c.H * c.W), 0.0);
      for (int n = 0; n < N; ++n)
        for (int o = 0; o < c.C; ++o)
          for (int p = 0; p < c.H * c.W; ++p) {
            double acc = b1[size_t(o)];
            for (int i = 0; i < X; ++i) acc += w1[size_t(o * X + i)] * x[size_t((n * X + i) * c.H * c.W + p)];
            image_values[size_t((n * c.C + o) * c.H * c.W + p)] = std::max(acc, 0.0);
          }
    }
    const std::vector<double> want = direct_conv(image_values, w, b, N, c, top, left, OH, OW);
    double worst = 0;
    const std::string bad = tltest::first_mismatch(got, want, 5e-5, worst);
    QVERIFY2(bad.empty(), bad.c_str());
    qInfo("largest relative error %.2e", worst);
    if (dev == "cpu") {
      std::string all;
      int gemms = 0, copies = 0;
      for (auto& k : names) all += k + " ", gemms += k.rfind("GEMM", 0) == 0, copies += k.rfind("E_", 0) == 0;
      // Grouped over several images: one elementwise copy of the weights.
      // A 1x1 window at a stride: one of the pixels it reads (Tensor::conv2d).
      const int weight_copies = c.G > 1 && N > 1 ? 1 : 0;
      const int pixel_copies = c.KH == 1 && c.KW == 1 && (c.SH > 1 || c.SW > 1) && c.G == 1 ? 1 : 0;
      QVERIFY2(gemms == c.kernels && copies == weight_copies + pixel_copies && int(names.size()) == gemms + copies,
               ("warm run kernels: " + all).c_str());
    }
  }

  // Clip after a Conv, its bounds given by the file (opset 13: inputs, here
  // initializers): on the cpu device one GEMM whose micro-kernel adds the
  // bias and clamps (.fused = 1 with the bounds as constants). A bound
  // computed from the input (the second model's upper one: the larger of
  // 0.5 and the input's least element) stays a tensor that the epilogue
  // reads. Values against the direct convolution, clamped, on every device.
  void clipBoundsFromTheFile_data() {
    QTest::addColumn<QString>("device");
    for (const std::string& d : tltest::available_devices()) QTest::newRow(d.c_str()) << QString::fromStdString(d);
  }
  void clipBoundsFromTheFile() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const Case c = {"3x3 s1 pad 1", 5, 20, 12, 13, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, false, 1, 1, 1};
    std::mt19937 rng(91);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> x(size_t(c.C * c.H * c.W)), w(size_t(c.O * c.C * 9)), b(size_t(c.O));
    for (auto* v : {&x, &w, &b})
      for (double& e : *v) e = float(u(rng));
    const double lo = -0.25, hi = 0.5;
    for (bool computed_hi : {false, true}) {
      Builder m;
      m.input("x", dims({1, c.C, c.H, c.W}));
      m.output("y", dims({1, c.O, c.H, c.W}));
      auto scalar = [&](const char* name, double v) { m.init(name, {}, TP::FLOAT)->add_float_data(float(v)); };
      auto* wt = m.init("W", {c.O, c.C, 3, 3}, TP::FLOAT);
      for (double e : w) wt->add_float_data(float(e));
      auto* bt = m.init("B", {c.O}, TP::FLOAT);
      for (double e : b) bt->add_float_data(float(e));
      scalar("lo", lo);
      scalar("hi", hi);
      auto* conv = m.node("Conv", {"x", "W", "B"}, {"h"});
      ints_attr(conv, "kernel_shape", {3, 3});
      ints_attr(conv, "pads", {1, 1, 1, 1});
      std::string upper = "hi";
      if (computed_hi) {  // max(hi, the input's least element): hi, computed from the input
        auto* least = m.node("ReduceMin", {"x"}, {"least"});
        auto* keep = least->add_attribute();
        keep->set_name("keepdims");
        keep->set_type(onnx::AttributeProto::INT);
        keep->set_i(0);
        m.node("Max", {"hi", "least"}, {"hi2"});
        upper = "hi2";
      }
      m.node("Clip", {"h", "lo", upper}, {"y"});
      const std::string path =
          m.save(tltest::fresh_temp_dir("conv-gather", computed_hi ? "clip-computed" : "clip") / "clip.onnx");
      OnnxModel model(path);
      const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), {1, c.C, c.H, c.W}, dev);
      model.run({input});
      std::vector<float> got;
      std::string gemm_source;
      {
        ProfileCapture capture;
        got = model.run({input})[0].to_vector();
        for (auto& r : capture.records())
          if (r.kernel->name.rfind("GEMM", 0) == 0) gemm_source = r.kernel->source;
      }
      std::vector<double> want = direct_conv(x, w, b, 1, c, 1, 1, c.H, c.W);
      for (double& v : want) v = std::min(std::max(v, lo), hi);
      double worst = 0;
      const std::string bad = tltest::first_mismatch(got, want, 5e-5, worst);
      QVERIFY2(bad.empty(), bad.c_str());
      if (dev == "cpu") {
        const bool fused = gemm_source.find(".fused = 1, .bias = 3, .lo = (float)-0.25, .hi = (float)0.5") !=
                           std::string::npos;
        QVERIFY2(fused != computed_hi, gemm_source.c_str());
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestOnnxConvGather)
#include "test_onnx_conv_gather.moc"
