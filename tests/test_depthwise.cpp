// Depthwise convolution (core/depthwise.h): first EfficientNet-Lite0's
// (EfficientNetLite0::depthwise) in each of its renderings, on every device, against a direct computation in
// double precision: 3x3 and 5x5 kernels at strides 1 and 2 with TensorFlow
// "SAME" padding, on rows wide enough for the row loops (read through the pad
// at stride 2, from a padded copy at stride 1) and on narrow maps (a flat row
// per image at stride 1, a padded copy at stride 2). The input is what the
// model feeds it: the previous 1x1 convolution (a GEMM) with its bias and
// ReLU6, and the output gets its own bias and ReLU6 after. Then general
// windows as ONNX Conv gives them (depthwise_conv2d): odd sizes, asymmetric
// pads, non-square kernels, strides and dilations per axis, and an input that
// is a lazy zero pad (an ONNX Pad node before the Conv).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>

#include "core/codegen/templates.h"
#include "core/depthwise.h"
#include "core/error.h"
#include "core/models/efficientnet.h"
#include "core/profile.h"
#include "core/runtime/registry.h"
#include "core/runtime/scratch.h"
#include "core/tensor.h"
#include "depthwise_reference.h"
#include "testing.h"

using namespace tl;

namespace {

double relu6(double v) { return std::min(std::max(v, 0.0), 6.0); }

struct Case {
  int channels, size, kernel, stride;
};

// A general window: input H x W, kernel, stride and dilation per axis, the
// window's pads (top, bottom, left, right) and the pads of a lazy zero pad
// applied to the input before it (an ONNX Pad node).
struct Window {
  const char* name;
  int H, W, KH, KW, SH, SW, DH, DW;
  int pad[4], input_pad[4];
};

const Window kWindows[] = {
    {"3x3 s1 flat, asymmetric pads", 9, 11, 3, 3, 1, 1, 1, 1, {0, 2, 1, 0}, {0, 0, 0, 0}},
    {"5x3 s1 flat, dilation 2x1", 13, 7, 5, 3, 1, 1, 2, 1, {3, 1, 0, 2}, {0, 0, 0, 0}},
    {"3x3 s1 wide rows, dilation 1x3", 6, 23, 3, 3, 1, 1, 1, 3, {1, 1, 3, 3}, {0, 0, 0, 0}},
    {"3x3 s2 through the pad, odd size", 33, 35, 3, 3, 2, 2, 1, 1, {0, 1, 1, 0}, {0, 0, 0, 0}},
    {"5x5 s2 through the pad, dilation 2", 37, 31, 5, 5, 2, 2, 2, 2, {2, 3, 4, 1}, {0, 0, 0, 0}},
    {"3x3 s2 narrow, padded copy", 9, 10, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}},
    {"3x3 s2x1, rows cut back", 12, 9, 3, 3, 2, 1, 1, 1, {0, 0, 1, 1}, {0, 0, 0, 0}},
    {"2x2 s2, last input row unread", 13, 21, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 0, 0, 0}},
    {"3x3 s3, odd size", 20, 29, 3, 3, 3, 3, 1, 1, {1, 0, 0, 2}, {0, 0, 0, 0}},
    {"3x3 s2 after a Pad node (0, 1, 0, 1)", 28, 28, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 1, 0, 1}},
    {"5x5 s2 after a Pad node and own pads", 27, 25, 5, 5, 2, 2, 1, 1, {1, 0, 0, 1}, {1, 2, 2, 1}},
    {"5x5 s1 flat after a Pad node", 7, 7, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, {2, 2, 2, 2}},
    // Edges of the cpu device's gathering kernel (kernels/gemm_cpu.c): a
    // one-column image, windows wholly in the padding, window rows of other
    // widths than 3 and 5, and one wider than it takes (the packed path).
    {"3x3 s2 on one column", 9, 1, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}},
    {"3x3 s2, windows wholly in the padding", 4, 4, 3, 3, 2, 2, 1, 1, {3, 3, 3, 3}, {0, 0, 0, 0}},
    {"1x7 s1", 5, 12, 1, 7, 1, 1, 1, 1, {0, 0, 3, 3}, {0, 0, 0, 0}},
    {"7x1 s2x1", 15, 6, 7, 1, 2, 1, 1, 1, {3, 3, 0, 0}, {0, 0, 0, 0}},
    {"1x17 s1, wider than the gathering kernel takes", 3, 20, 1, 17, 1, 1, 1, 1, {0, 0, 8, 8}, {0, 0, 0, 0}},
    // Maps large enough for gemm_cpu.c's whole-rows path.
    {"3x3 s1 dilation 2 on whole rows", 18, 40, 3, 3, 1, 1, 2, 2, {2, 2, 2, 2}, {0, 0, 0, 0}},
    {"5x5 s2 on whole rows, odd size", 71, 69, 5, 5, 2, 2, 1, 1, {2, 2, 1, 2}, {1, 0, 0, 1}},
};

// The cpu device's gathering GEMM for a depthwise convolution of C channels,
// `outputs` positions per channel and `taps` taps (core/depthwise.cpp).
std::string gathering_gemm(int64_t C, int64_t outputs, int64_t taps) {
  return "GEMM_" + std::to_string(C) + "_1_" + std::to_string(outputs) + "_" + std::to_string(taps);
}

}  // namespace

class TestDepthwise : public QObject {
  Q_OBJECT
 private slots:
  void matchesDirectComputation_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    for (const std::string& d : tltest::available_devices())
      for (const Case& c : {Case{0, 20, 3, 1}, Case{0, 20, 5, 1}, Case{0, 7, 3, 1}, Case{0, 14, 5, 1},
                            Case{0, 7, 5, 1}, Case{0, 21, 3, 2}, Case{0, 24, 5, 2}, Case{0, 14, 5, 2},
                            Case{0, 9, 3, 2}, Case{0, 66, 3, 2}, Case{0, 40, 5, 1}, Case{0, 14, 7, 1}}) {
        const std::string name = d + " " + std::to_string(c.kernel) + "x" + std::to_string(c.kernel) + " s" +
                                 std::to_string(c.stride) + " on " + std::to_string(c.size) + "x" +
                                 std::to_string(c.size);
        QTest::newRow(name.c_str()) << QString::fromStdString(d) << c.size << c.kernel << c.stride;
      }
  }

  void matchesDirectComputation() {
    QFETCH(QString, device);
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    const std::string dev = device.toStdString();
    // 37 channels: the small maps run 16 channels to a vector (gemm_cpu.c
    // depthwise_blocked), here whole blocks and ragged ones on both threads.
    const int in = 5, C = 37, H = size, W = size, K = kernel, S = stride;
    Generator gen(11);
    Tensor x0 = Tensor::randn({in, H * W}, gen, dev), w1 = Tensor::randn({C, in}, gen, dev);
    Tensor b1 = Tensor::randn({C}, gen, dev), w = Tensor::randn({K * K, C}, gen, dev);
    Tensor b = Tensor::randn({C}, gen, dev);
    for (Tensor* t : {&x0, &w1, &b1, &w, &b}) t->realize();
    // as the model writes it: a 1x1 convolution whose bias and ReLU6 the
    // depthwise convolution reads through its pad
    Tensor x = (w1.matmul(x0) + b1.reshape({C, 1})).relu6().reshape({1, C, H, W});
    Tensor y = EfficientNetLite0::depthwise(x, w, b, K, S).relu6();
    const int OH = (H + S - 1) / S, OW = (W + S - 1) / S;
    QCOMPARE(y.shape(), (Shape{1, C, OH, OW}));
    const std::vector<float> got = y.to_vector();
    const std::vector<float> xv = x0.to_vector(), w1v = w1.to_vector(), b1v = b1.to_vector(), wv = w.to_vector(),
                             bv = b.to_vector();
    std::vector<double> act(size_t(C * H * W));
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < H * W; ++p) {
        double s = b1v[c];
        for (int i = 0; i < in; ++i) s += double(w1v[c * in + i]) * xv[i * H * W + p];
        act[size_t(c * H * W + p)] = relu6(s);
      }
    // TensorFlow "SAME": half the padding before, the odd one after
    const int pad_top = std::max((OH - 1) * S + K - H, 0) / 2, pad_left = std::max((OW - 1) * S + K - W, 0) / 2;
    double worst = 0;
    for (int c = 0; c < C; ++c)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          double s = bv[c];
          for (int ky = 0; ky < K; ++ky)
            for (int kx = 0; kx < K; ++kx) {
              const int iy = oy * S + ky - pad_top, ix = ox * S + kx - pad_left;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              s += act[size_t((c * H + iy) * W + ix)] * wv[(ky * K + kx) * C + c];
            }
          const double want = relu6(s), have = got[size_t((c * OH + oy) * OW + ox)];
          worst = std::max(worst, std::abs(have - want) / (1 + std::abs(want)));
          QVERIFY2(std::abs(have - want) <= 1e-4 * (1 + std::abs(want)),
                   (std::to_string(have) + " != " + std::to_string(want) + " at channel " + std::to_string(c) +
                    ", (" + std::to_string(oy) + ", " + std::to_string(ox) + ")")
                       .c_str());
        }
    // The clamps must bite somewhere, or ReLU6 is not tested.
    int low = 0, high = 0;
    for (float v : got) low += v == 0.f, high += v == 6.f;
    QVERIFY2(low > 0 && high > 0, "inputs never reach both ReLU6 clamps");
    qInfo("largest relative error %.2e", worst);
  }

  // The rendering on the cpu device, whose GEMM template gathers: the
  // convolution is one kernel, C one-row products that gather from the
  // input GEMM's output in place (no padded copy, no im2col), with its bias
  // and ReLU6 applied by the store; the input's own bias and ReLU6 fuse into
  // its GEMM. So two kernels, at any stride and map size.
  void renderingsOnTheCpuDevice_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<QString>("gather");  // the gather's geometry, as the kernel initialises it
    // channels, height, width, kernel, stride, dilation, pad top and left, output width
    QTest::newRow("5x5 s2, 24x24") << 24 << 5 << 2 << "{1, 24, 24, 5, 5, 2, 2, 1, 1, 1, 1, 12, 0}";
    QTest::newRow("3x3 s2, 32x32") << 32 << 3 << 2 << "{1, 32, 32, 3, 3, 2, 2, 1, 1, 0, 0, 16, 0}";
    QTest::newRow("5x5 s1, 7x7") << 7 << 5 << 1 << "{1, 7, 7, 5, 5, 1, 1, 1, 1, 2, 2, 7, 0}";
  }
  void renderingsOnTheCpuDevice() {
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(QString, gather);
    const int C = 8, in = 4;
    Generator gen(3);
    Tensor x0 = Tensor::randn({in, size * size}, gen, "cpu"), w1 = Tensor::randn({C, in}, gen, "cpu");
    Tensor b1 = Tensor::randn({C}, gen, "cpu"), w = Tensor::randn({kernel * kernel, C}, gen, "cpu");
    Tensor b = Tensor::randn({C}, gen, "cpu");
    for (Tensor* t : {&x0, &w1, &b1, &w, &b}) t->realize();
    std::vector<std::string> names, sources;
    Tensor y;
    {
      ProfileCapture capture;
      Tensor x = (w1.matmul(x0) + b1.reshape({C, 1})).relu6().reshape({1, C, size, size});
      y = EfficientNetLite0::depthwise(x, w, b, kernel, stride).relu6();
      y = y.reshape({1, C, y.dim(2) * y.dim(3)});  // the next 1x1 convolution's operand
      y.realize();
      for (auto& r : capture.records()) names.push_back(r.kernel->name), sources.push_back(r.kernel->source);
    }
    std::string all;
    for (auto& n : names) all += n + " ";
    const int out = (size - 1) / stride + 1;
    const std::string conv = gathering_gemm(C, out * out, kernel * kernel);
    QVERIFY2(names.size() == 2 && names.front().rfind("GEMM", 0) == 0 && names.back() == conv, all.c_str());
    QVERIFY2(sources.back().find(".gather = " + gather.toStdString()) != std::string::npos, sources.back().c_str());
    QVERIFY2(sources.back().find("_finish") != std::string::npos, "the bias and ReLU6 are not the store's epilogue");
    // ... in the form the channel-blocked path applies in registers: the
    // bias per channel (the product's batch), clamped to [0, 6]
    QVERIFY2(sources.back().find(".batch_clamp = 1") != std::string::npos &&
                 sources.back().find(".lo = (float)0, .hi = (float)6") != std::string::npos,
             sources.back().c_str());
    QCOMPARE(y.shape(), (Shape{1, C, out * out}));
  }

  // An activation other than a clamp (SiLU) after the convolution's bias: on
  // the cpu device the store cannot apply it in registers, so a pass of the
  // fused epilogue follows, over outputs stored straight from registers
  // (maps at least a vector wide: 8x8, 9x9, 20x20, 112x112) or turned back
  // from a buffer (7x7). 40 channels: on two threads 20 each, two whole
  // blocks of 8 and a part one. 24 channels: each thread takes its share of
  // the rows of all of them (depthwise_blocked's few channels). Without
  // scratch (core/runtime/scratch.h), the same rows one multiply-add at a time.
  void epilogueOtherThanAClamp_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("channels");
    QTest::addColumn<bool>("scratch");
    for (const std::string& d : tltest::available_devices())
      for (int size : {7, 8, 9, 20, 112})
        for (int stride : {1, 2})
          for (int channels : {40, 24})
            for (bool scratch : {true, false}) {
              if ((stride == 2 && size < 16) || (!scratch && (d != "cpu" || channels != 24))) continue;
              const std::string name = d + " 3x3 s" + std::to_string(stride) + " on " + std::to_string(size) + "x" +
                                       std::to_string(size) + ", " + std::to_string(channels) + " channels" +
                                       (scratch ? "" : ", no scratch");
              QTest::newRow(name.c_str()) << QString::fromStdString(d) << size << stride << channels << scratch;
            }
  }

  void epilogueOtherThanAClamp() {
    QFETCH(QString, device);
    QFETCH(int, size);
    QFETCH(int, stride);
    QFETCH(int, channels);
    QFETCH(bool, scratch);
    const std::string dev = device.toStdString();
    const int N = 1, C = channels, in = 3;
    Generator gen(uint64_t(23 + size));
    Tensor x0 = Tensor::randn({in, size * size}, gen, dev), w1 = Tensor::randn({C, in}, gen, dev);
    Tensor w = Tensor::randn({9, C}, gen, dev), b = Tensor::randn({C}, gen, dev);
    for (Tensor* t : {&x0, &w1, &w, &b}) t->realize();
    Tensor x = w1.matmul(x0).reshape({1, C, size, size});
    Window2d g;
    g.kernel_h = g.kernel_w = 3, g.stride_h = g.stride_w = stride;
    g.pad_h = g.pad_w = {1, 1};
    Tensor y = depthwise_conv2d(x, w, b, g).silu();
    const tltest::DepthwiseWindow ref{size, size, 3, 3, stride, stride, 1, 1, 1, 1, 1, 1};
    QCOMPARE(y.shape(), (Shape{N, C, ref.out_h(), ref.out_w()}));
    if (!scratch) scratch_fail_above(0);
    std::vector<float> got;
    try {
      got = y.to_vector();
    } catch (...) {
      scratch_fail_above(SIZE_MAX);
      throw;
    }
    scratch_fail_above(SIZE_MAX);
    const std::vector<float> xv = x0.to_vector(), w1v = w1.to_vector(), wv = w.to_vector(), bv = b.to_vector();
    std::vector<double> input(size_t(C * size * size));
    for (int ch = 0; ch < C; ++ch)
      for (int p = 0; p < size * size; ++p)
        for (int i = 0; i < in; ++i) input[size_t(ch * size * size + p)] += double(w1v[ch * in + i]) * xv[size_t(i * size * size + p)];
    std::vector<double> want = tltest::depthwise_reference(
        input, N, C, ref, [&](int ch, int ky, int kx) { return double(wv[size_t((ky * 3 + kx) * C + ch)]); },
        std::vector<double>(bv.begin(), bv.end()));
    for (double& v : want) v = v / (1 + std::exp(-v));
    double worst = 0;
    const std::string bad = tltest::first_mismatch(got, want, 1e-5, worst);
    QVERIFY2(bad.empty(), bad.c_str());
    qInfo("largest relative error %.2e", worst);
  }

  // Batch 2, and batch 1, which the cpu device computes with its GEMM
  // template gathering from each channel (core/depthwise.cpp).
  void generalWindows_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    QTest::addColumn<int>("batch");
    for (const std::string& d : tltest::available_devices())
      for (int i = 0; i < int(std::size(kWindows)); ++i)
        for (int n : {2, 1})
          QTest::newRow((d + " " + kWindows[i].name + (n == 1 ? ", batch 1" : "")).c_str())
              << QString::fromStdString(d) << i << n;
  }

  void generalWindows() {
    QFETCH(QString, device);
    QFETCH(int, index);
    QFETCH(int, batch);
    const std::string dev = device.toStdString();
    const Window& c = kWindows[index];
    const int N = batch, C = 5, in = 3;
    Generator gen(uint64_t(17 + index));
    Tensor x0 = Tensor::randn({in, N * c.H * c.W}, gen, dev), w1 = Tensor::randn({C, in}, gen, dev);
    Tensor w = Tensor::randn({c.KH * c.KW, C}, gen, dev), b = Tensor::randn({C}, gen, dev);
    for (Tensor* t : {&x0, &w1, &w, &b}) t->realize();
    // the input is a GEMM's output, then maybe a lazy zero pad
    Tensor x = w1.matmul(x0).reshape({C, N, c.H, c.W}).permute({1, 0, 2, 3});
    const int* ip = c.input_pad;
    if (ip[0] || ip[1] || ip[2] || ip[3]) x = x.pad({{0, 0}, {0, 0}, {ip[0], ip[1]}, {ip[2], ip[3]}});
    Window2d g;
    g.kernel_h = c.KH, g.kernel_w = c.KW, g.stride_h = c.SH, g.stride_w = c.SW;
    g.dilation_h = c.DH, g.dilation_w = c.DW;
    g.pad_h = {c.pad[0], c.pad[1]}, g.pad_w = {c.pad[2], c.pad[3]};
    Tensor y = depthwise_conv2d(x, w, b, g);
    const tltest::DepthwiseWindow ref{c.H,  c.W,  c.KH, c.KW, c.SH, c.SW, c.DH, c.DW, c.pad[0] + ip[0], c.pad[1] + ip[1],
                                      c.pad[2] + ip[2], c.pad[3] + ip[3]};
    QCOMPARE(y.shape(), (Shape{N, C, ref.out_h(), ref.out_w()}));
    // the input in double: the GEMM of float operands
    const std::vector<float> xv = x0.to_vector(), w1v = w1.to_vector(), wv = w.to_vector(), bv = b.to_vector();
    std::vector<double> input(size_t(N * C * c.H * c.W));
    for (int n = 0; n < N; ++n)
      for (int ch = 0; ch < C; ++ch)
        for (int p = 0; p < c.H * c.W; ++p)
          for (int i = 0; i < in; ++i)
            input[size_t((n * C + ch) * c.H * c.W + p)] += double(w1v[ch * in + i]) * xv[size_t((i * N + n) * c.H * c.W + p)];
    const std::vector<double> want = tltest::depthwise_reference(
        input, N, C, ref, [&](int ch, int ky, int kx) { return double(wv[size_t((ky * c.KW + kx) * C + ch)]); },
        std::vector<double>(bv.begin(), bv.end()));
    double worst = 0;
    std::vector<std::string> names;
    std::vector<float> got;
    {
      ProfileCapture capture;
      got = y.to_vector();
      for (auto& r : capture.records()) names.push_back(r.kernel->name);
    }
    const std::string bad = tltest::first_mismatch(got, want, 1e-5, worst);
    QVERIFY2(bad.empty(), bad.c_str());
    qInfo("largest relative error %.2e", worst);
    // The gathering GEMM ran; beside it only the input's GEMM and the copy
    // of its permuted view. (Not in the GPU's form, which test_depthwise_guarded forces.)
    if (dev == "cpu" && N == 1 && qgetenv("TINYLENS_DEPTHWISE") != "guarded") {
      const std::string conv = gathering_gemm(C, ref.out_h() * ref.out_w(), c.KH * c.KW);
      std::string all;
      for (auto& n : names) all += n + " ";
      QVERIFY2(std::find(names.begin(), names.end(), conv) != names.end() && names.size() <= 3,
               (conv + " did not run: " + all).c_str());
    }
  }

  // An ONNX Pad node before a strided depthwise Conv: the Conv reads the
  // GEMM's output through both pads, so no padded copy is written (two
  // kernels: the GEMM and the convolution, which gathers from the unpadded
  // map).
  void zeroPadNodeIsReadThrough() {
    const int C = 8, in = 4, size = 32;
    Generator gen(5);
    Tensor x0 = Tensor::randn({in, size * size}, gen, "cpu"), w1 = Tensor::randn({C, in}, gen, "cpu");
    Tensor w = Tensor::randn({9, C}, gen, "cpu"), b = Tensor::randn({C}, gen, "cpu");
    for (Tensor* t : {&x0, &w1, &w, &b}) t->realize();
    Window2d g;
    g.kernel_h = g.kernel_w = 3, g.stride_h = g.stride_w = 2;
    std::vector<std::string> names, sources;
    {
      ProfileCapture capture;
      Tensor x = w1.matmul(x0).relu6().reshape({1, C, size, size}).pad({{0, 0}, {0, 0}, {0, 1}, {0, 1}});
      Tensor y = depthwise_conv2d(x, w, b, g).reshape({1, C, 16 * 16});
      y.realize();
      for (auto& r : capture.records()) names.push_back(r.kernel->name), sources.push_back(r.kernel->source);
    }
    std::string all;
    for (auto& n : names) all += n + " ";
    QVERIFY2(names.size() == 2 && names.front().rfind("GEMM", 0) == 0, all.c_str());
    // the convolution gathers from the unpadded 32x32 map
    QVERIFY2(sources.back().find(".gather = {1, 32, 32, 3, 3, 2, 2, 1, 1, 0, 0, 16, 0}") != std::string::npos,
             sources.back().c_str());
  }

  // The form a GPU gets (core/depthwise.cpp guarded_form), forced here on
  // every device: the convolution, its bias and ReLU6 are one kernel that
  // reads the GEMM's output through the pad, at both strides and on wide and
  // narrow maps; no padded copy, no flat rows and no slice after them.
  // ctest's test_depthwise_guarded runs the value tests in this form.
  void guardedFormIsOneKernel_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    for (const std::string& d : tltest::available_devices())
      for (const Case& c : {Case{0, 20, 3, 1}, Case{0, 7, 5, 1}, Case{0, 21, 3, 2}, Case{0, 9, 5, 2}})
        QTest::newRow((d + " " + std::to_string(c.kernel) + "x" + std::to_string(c.kernel) + " s" +
                       std::to_string(c.stride) + " on " + std::to_string(c.size))
                          .c_str())
            << QString::fromStdString(d) << c.size << c.kernel << c.stride;
  }
  void guardedFormIsOneKernel() {
    QFETCH(QString, device);
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    const std::string dev = device.toStdString();
    const QByteArray before = qgetenv("TINYLENS_DEPTHWISE");
    qputenv("TINYLENS_DEPTHWISE", "guarded");
    const int C = 6, in = 3;
    Generator gen(7);
    Tensor x0 = Tensor::randn({in, size * size}, gen, dev), w1 = Tensor::randn({C, in}, gen, dev);
    Tensor b1 = Tensor::randn({C}, gen, dev), w = Tensor::randn({kernel * kernel, C}, gen, dev);
    Tensor b = Tensor::randn({C}, gen, dev);
    for (Tensor* t : {&x0, &w1, &b1, &w, &b}) t->realize();
    std::vector<std::string> names;
    Tensor y;
    {
      ProfileCapture capture;
      Tensor x = (w1.matmul(x0) + b1.reshape({C, 1})).relu6().reshape({1, C, size, size});
      y = EfficientNetLite0::depthwise(x, w, b, kernel, stride).relu6();
      y.realize();
      for (auto& r : capture.records()) names.push_back(r.kernel->name);
    }
    if (before.isNull()) qunsetenv("TINYLENS_DEPTHWISE");
    else qputenv("TINYLENS_DEPTHWISE", before);
    std::string all;
    for (auto& n : names) all += n + " ";
    const int out = (size - 1) / stride + 1;
    QVERIFY2(names.size() == 2 && names.front().rfind("GEMM", 0) == 0 &&
                 names.back() == "E_" + std::to_string(C) + "_" + std::to_string(out) + "_" + std::to_string(out),
             all.c_str());
    QCOMPARE(y.shape(), (Shape{1, C, out, out}));
  }

  void badWindowsAreShapeErrors() {
    Tensor x = Tensor::zeros({1, 3, 5, 5}), w = Tensor::zeros({9, 3});
    Window2d g;
    g.kernel_h = g.kernel_w = 3;
    auto fails = [](const std::function<void()>& f, const std::string& says) {
      try {
        f();
      } catch (const ShapeError& e) {
        return std::string(e.what()).find(says) != std::string::npos;
      }
      return false;
    };
    QVERIFY(fails([&] { depthwise_conv2d(x, Tensor::zeros({9, 4}), Tensor(), g); }, "is not (9 taps, 3 channels)"));
    QVERIFY(fails([&] { depthwise_conv2d(x, w, Tensor::zeros({4}), g); }, "4 biases for 3 channels"));
    QVERIFY(fails([&] { depthwise_conv2d(Tensor::zeros({3, 5, 5}), w, Tensor(), g); }, "is not (N, C, H, W)"));
    Window2d zero_stride = g, too_big = g, negative = g;
    zero_stride.stride_w = 0;
    QVERIFY(fails([&] { depthwise_conv2d(x, w, Tensor(), zero_stride); }, "must be at least 1"));
    too_big.dilation_h = 3;  // a 7-row window on 5 rows
    QVERIFY(fails([&] { depthwise_conv2d(x, w, Tensor(), too_big); }, "larger than the padded input of 5"));
    negative.pad_w = {-1, 0};
    QVERIFY(fails([&] { depthwise_conv2d(x, w, Tensor(), negative); }, "negative padding"));
  }

  // max_pool_by_gather on each device that computes it: one MAXPOOL kernel, equal to the
  // largest cell of each window inside the image, computed here (a max is
  // exact), NaN where a window holds one. The rows cover the kernel's
  // paths (kernels/gemm_cpu_depthwise.c): in place (windows inside the
  // image; rows narrower than a vector too, but for the last plane's) and
  // through a padded band, vector rows at stride 2 (kw 2, 3) and 1, any
  // window.
  void maxPoolInOneKernel_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<QVector<int>>("w");  // N C H W KH KW SH SW DH DW PT PB PL PR
    const std::vector<std::pair<const char*, QVector<int>>> windows = {
        {"3x3 s2 in place, 111 (SqueezeNet)", {1, 3, 111, 111, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0}},
        {"3x3 s2 pad 1, 112 (ResNet)", {1, 2, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}},
        {"3x3 s2 ceil overhang, 13 (narrow)", {2, 3, 13, 13, 3, 3, 2, 2, 1, 1, 0, 1, 0, 1}},
        // In place but for the last plane, whose vector rows would read past the images.
        {"3x3 s2 narrow in place, 27 -> 13", {2, 3, 27, 27, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0}},
        {"2x2 s2 narrow in place, 9x12", {1, 4, 9, 12, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0}},
        {"2x2 s2 in place, 40x34", {1, 2, 40, 34, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0}},
        {"3x3 s1 pad 1, 20x37 (Inception)", {1, 2, 20, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}},
        {"2x3 s1 dilation 2, 9x40", {1, 2, 9, 40, 2, 3, 1, 1, 2, 2, 0, 1, 2, 0}},
        {"5x5 s3 pads (any window)", {1, 2, 29, 70, 5, 5, 3, 3, 1, 1, 2, 1, 0, 2}},
        {"2x3 s3 dilation 1x9, 4 outputs a row", {1, 2, 12, 30, 2, 3, 3, 3, 1, 9, 0, 0, 0, 0}},
        {"2x3 s3 dilation 1x9, padded", {1, 2, 12, 30, 2, 3, 3, 3, 1, 9, 1, 0, 1, 0}},
        {"3x1 s2x1, one column", {1, 2, 10, 1, 3, 1, 2, 1, 1, 1, 1, 1, 0, 0}},
    };
    // Every device whose GEMM template computes products over planes (the
    // cpu's kernels/gemm_cpu_depthwise.c, CUDA's kernels/depthwise.cu).
    for (const std::string& d : tltest::available_devices())
      if (gemm_template_gathers_planes(Registry::instance().get(d)))
        for (auto& [name, w] : windows) QTest::newRow((d + " " + name).c_str()) << QString::fromStdString(d) << w;
  }
  void maxPoolInOneKernel() {
    QFETCH(QString, device);
    QFETCH(QVector<int>, w);
    const int N = w[0], C = w[1], H = w[2], W = w[3], KH = w[4], KW = w[5], SH = w[6], SW = w[7], DH = w[8], DW = w[9];
    Window2d g;
    g.kernel_h = KH, g.kernel_w = KW, g.stride_h = SH, g.stride_w = SW, g.dilation_h = DH, g.dilation_w = DW;
    g.pad_h = {w[10], w[11]}, g.pad_w = {w[12], w[13]};
    const int OH = (H + w[10] + w[11] - (KH - 1) * DH - 1) / SH + 1, OW = (W + w[12] + w[13] - (KW - 1) * DW - 1) / SW + 1;
    std::vector<float> xv(size_t(N * C * H * W));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float((i * 7919) % 1013) - 506.f;
    xv[5] = NAN;                           // first plane, top row
    xv[xv.size() - 1] = NAN;               // last plane's last cell
    if (xv.size() > 100) xv[xv.size() / 2] = -INFINITY;
    const Tensor x = Tensor::from_data(xv, {N, C, H, W}, device.toStdString());
    std::vector<std::string> names;
    std::vector<float> got;
    {
      ProfileCapture capture;
      Tensor y = max_pool_by_gather(x, g);
      QVERIFY(y.defined());
      QCOMPARE(y.shape(), (Shape{N, C, OH, OW}));
      got = y.to_vector();
      for (auto& r : capture.records()) names.push_back(r.kernel->name);
    }
    QVERIFY2(names.size() == 1 && names[0].rfind("MAXPOOL_", 0) == 0, names.empty() ? "no kernel" : names[0].c_str());
    for (int p = 0; p < N * C; ++p)
      for (int i = 0; i < OH; ++i)
        for (int j = 0; j < OW; ++j) {
          float want = -INFINITY;
          for (int a = 0; a < KH; ++a)
            for (int b = 0; b < KW; ++b) {
              const int yy = i * SH - w[10] + a * DH, xx = j * SW - w[12] + b * DW;
              if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
              const float v = xv[size_t((p * H + yy) * W + xx)];
              if (v > want || std::isnan(v)) want = std::isnan(want) ? want : v;
            }
          const float have = got[size_t((p * OH + i) * OW + j)];
          QVERIFY2(have == want || (std::isnan(have) && std::isnan(want)),
                   qPrintable(QString("plane %1 (%2, %3): %4, want %5").arg(p).arg(i).arg(j).arg(have).arg(want)));
        }
  }
};

QTEST_GUILESS_MAIN(TestDepthwise)
#include "test_depthwise.moc"
