// EfficientNet-Lite0's depthwise convolution (EfficientNetLite0::depthwise)
// in each of its renderings, on every device, against a direct computation in
// double precision: 3x3 and 5x5 kernels at strides 1 and 2 with TensorFlow
// "SAME" padding, on rows wide enough for the row loops (read through the pad
// at stride 2, from a padded copy at stride 1) and on narrow maps (a flat row
// per image at stride 1, a padded copy at stride 2). The input is what the
// model feeds it: the previous 1x1 convolution (a GEMM) with its bias and
// ReLU6, and the output gets its own bias and ReLU6 after.
#include <QtTest>

#include <algorithm>
#include <cmath>

#include "core/models/efficientnet.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "testing.h"

using namespace tl;

namespace {

double relu6(double v) { return std::min(std::max(v, 0.0), 6.0); }

struct Case {
  int channels, size, kernel, stride;
};

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
                            Case{0, 9, 3, 2}}) {
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
    const int in = 5, C = 12, H = size, W = size, K = kernel, S = stride;
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

  // The renderings on the cpu device: the kernel that does the K*K
  // multiply-adds has an unguarded vector loop. At stride 2 on wide rows it
  // reads the GEMM's output through the pad (the GEMM's store applies the
  // bias and ReLU6, no padded copy is written) and splits its rows at the
  // pad; on a narrow map at stride 1 it is one flat loop over the padded
  // width per image.
  void renderingsOnTheCpuDevice_data() {
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("kernels");  // how many kernels the convolution and its input take
    QTest::addColumn<QString>("loop");  // the unguarded loop of the multiply-adds
    QTest::newRow("5x5 s2, 24x24, through the pad") << 24 << 5 << 2 << 2 << "for (int x = 1; x < 11; ++x) {";
    QTest::newRow("3x3 s2, 32x32, through the pad") << 32 << 3 << 2 << 2 << "for (int x = 0; x < 15; ++x) {";
    QTest::newRow("5x5 s1, 7x7, flat rows") << 7 << 5 << 1 << 4 << "for (int x = 0; x < 77; ++x) {";
  }
  void renderingsOnTheCpuDevice() {
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(int, kernels);
    QFETCH(QString, loop);
    const int C = 8, in = 4;
    Generator gen(3);
    Tensor x0 = Tensor::randn({in, size * size}, gen, "cpu"), w1 = Tensor::randn({C, in}, gen, "cpu");
    Tensor b1 = Tensor::randn({C}, gen, "cpu"), w = Tensor::randn({kernel * kernel, C}, gen, "cpu");
    Tensor b = Tensor::randn({C}, gen, "cpu");
    for (Tensor* t : {&x0, &w1, &b1, &w, &b}) t->realize();
    std::vector<std::string> names, sources;
    {
      ProfileCapture capture;
      Tensor x = (w1.matmul(x0) + b1.reshape({C, 1})).relu6().reshape({1, C, size, size});
      Tensor y = EfficientNetLite0::depthwise(x, w, b, kernel, stride).relu6();
      y = y.reshape({1, C, y.dim(2) * y.dim(3)});  // the next 1x1 convolution's operand
      y.realize();
      for (auto& r : capture.records()) names.push_back(r.kernel->name), sources.push_back(r.kernel->source);
    }
    std::string all;
    for (auto& n : names) all += n + " ";
    QVERIFY2(int(names.size()) == kernels, all.c_str());
    QVERIFY2(names.front().rfind("GEMM", 0) == 0, all.c_str());  // the input's bias and ReLU6 fuse into the GEMM or the copy
    bool found = false;
    for (const std::string& s : sources) {
      const size_t at = s.find(loop.toStdString());
      if (at == std::string::npos) continue;
      found = true;
      const size_t line = s.rfind('\n', at) + 1;
      const std::string end = "\n" + s.substr(line, at - line) + "}";
      const std::string body = s.substr(at, s.find(end, at) - at);
      // no bounds test (a mask compares an index with <; ReLU6 compares values with >)
      const std::string inner = body.substr(body.find('\n'));
      QVERIFY2(inner.find('<') == std::string::npos, body.c_str());
    }
    std::string text;
    for (auto& s : sources) text += s;
    QVERIFY2(found, text.c_str());
  }
};

QTEST_GUILESS_MAIN(TestDepthwise)
#include "test_depthwise.moc"
