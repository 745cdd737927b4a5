// ONNX depthwise Conv (group == channels) on core/depthwise.h, against a
// direct computation in double precision: strides 1, 2 and mixed, dilations,
// asymmetric pads from the Conv's own attribute and from a constant-zero Pad
// node before it, odd sizes, with and without a bias. A strided Conv on rows
// wide enough reads its input through both pads: the warm run is one kernel,
// no padded copy.
#include <QtTest>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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
  int H, W, KH, KW, SH, SW, DH, DW;
  int pads[4];       // the Conv's: top, left, bottom, right (ONNX order)
  int pad_node[4];   // a Pad node's before it (same order); all 0: no Pad node
  bool bias;
  int channels = 6;  // the C device turns blocks of 16 channels (depthwise_blocked): 21 is one whole and one part
};

const Case kCases[] = {
    {"3x3 s2 after a Pad node (0, 0, 1, 1)", 32, 32, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, {0, 0, 1, 1}, true},
    {"5x5 s2 after a Pad node (1, 2, 2, 1)", 29, 27, 5, 5, 2, 2, 1, 1, {0, 0, 0, 0}, {1, 2, 2, 1}, false},
    {"3x3 s2 own pads, odd size", 33, 31, 3, 3, 2, 2, 1, 1, {1, 0, 0, 1}, {0, 0, 0, 0}, true},
    {"3x3 s2 dilation 2, Pad node and own pads", 30, 34, 3, 3, 2, 2, 2, 2, {1, 1, 0, 2}, {2, 0, 1, 1}, true},
    {"3x5 s2x1 dilation 1x2", 17, 19, 3, 5, 2, 1, 1, 2, {1, 2, 1, 2}, {0, 0, 0, 0}, true},
    {"3x3 s2 narrow map", 9, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, true},
    {"3x3 s2 map under four outputs wide", 5, 6, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, true},
    {"5x5 s1 flat, Pad node", 7, 9, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, {2, 2, 2, 2}, true},
    {"3x3 s1 flat dilation 2, asymmetric pads", 11, 10, 3, 3, 1, 1, 2, 2, {0, 1, 2, 3}, {0, 0, 0, 0}, false},
    {"3x3 s1 wide rows", 20, 24, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, true},
    {"5x5 s2, 21 channels", 28, 28, 5, 5, 2, 2, 1, 1, {2, 2, 2, 2}, {0, 0, 0, 0}, true, 21},
    {"3x3 s1 14x14, 32 channels", 14, 14, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, false, 32},
    // six channels do not fill the C device's blocks of channels: past 16x16 outputs (32x32 strided) it takes
    // each channel's plane on its own (gather_thin_block)
    {"3x3 s1 60x60", 60, 60, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, {0, 0, 0, 0}, true},
    {"5x5 s2 124x122", 124, 122, 5, 5, 2, 2, 1, 1, {2, 2, 2, 1}, {0, 0, 0, 0}, false},
};

}  // namespace

class TestOnnxDepthwise : public QObject {
  Q_OBJECT
 private slots:
  // Batch 2 and batch 1: the cpu device computes both with its GEMM template
  // gathering from each channel's plane (core/depthwise.cpp), at batch 2
  // after laying the weights out once per image.
  void matchesDirectComputation_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    QTest::addColumn<int>("batch");
    for (const std::string& d : tltest::available_devices())
      for (int i = 0; i < int(std::size(kCases)); ++i)
        for (int n : {2, 1})
          QTest::newRow((d + " " + kCases[i].name + (n == 1 ? ", batch 1" : "")).c_str())
              << QString::fromStdString(d) << i << n;
  }

  void matchesDirectComputation() {
    QFETCH(QString, device);
    QFETCH(int, index);
    QFETCH(int, batch);
    const std::string dev = device.toStdString();
    const Case& c = kCases[index];
    const int64_t N = batch, C = c.channels;
    std::mt19937 rng(uint32_t(31 + index));
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> x(size_t(N * C * c.H * c.W)), w(size_t(C * c.KH * c.KW)), b(static_cast<size_t>(C));
    for (auto* v : {&x, &w, &b})
      for (double& e : *v) e = float(u(rng));
    const int* pn = c.pad_node;
    const bool pad_node = pn[0] || pn[1] || pn[2] || pn[3];
    const int top = c.pads[0] + pn[0], left = c.pads[1] + pn[1];
    const int64_t OH = (c.H + top + c.pads[2] + pn[2] - (c.KH - 1) * c.DH - 1) / c.SH + 1;
    const int64_t OW = (c.W + left + c.pads[3] + pn[3] - (c.KW - 1) * c.DW - 1) / c.SW + 1;

    Builder m;
    m.input("x", dims({N, C, c.H, c.W}));
    m.output("y", dims({N, C, OH, OW}));
    auto* wt = m.init("W", {C, 1, c.KH, c.KW}, TP::FLOAT);
    for (double v : w) wt->add_float_data(float(v));
    if (c.bias) {
      auto* bt = m.init("B", {C}, TP::FLOAT);
      for (double v : b) bt->add_float_data(float(v));
    }
    if (pad_node) {
      auto* pt = m.init("pads", {8}, TP::INT64);
      for (int64_t v : {0, 0, pn[0], pn[1], 0, 0, pn[2], pn[3]}) pt->add_int64_data(v);
      m.node("Pad", {"x", "pads"}, {"xp"});
    }
    std::vector<std::string> in = {pad_node ? "xp" : "x", "W"};
    if (c.bias) in.push_back("B");
    auto* conv = m.node("Conv", in, {"y"});
    auto* g = conv->add_attribute();
    g->set_name("group"), g->set_type(onnx::AttributeProto::INT), g->set_i(C);
    ints_attr(conv, "kernel_shape", {c.KH, c.KW});
    ints_attr(conv, "strides", {c.SH, c.SW});
    ints_attr(conv, "dilations", {c.DH, c.DW});
    ints_attr(conv, "pads", {c.pads[0], c.pads[1], c.pads[2], c.pads[3]});
    const std::string path = m.save(tltest::fresh_temp_dir("onnx-depthwise", std::to_string(index)) / "dw.onnx");

    OnnxModel model(path);
    const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), {N, C, c.H, c.W}, dev);
    model.run({input});  // cold: compiles
    std::vector<std::string> names;
    std::vector<float> got;
    {
      ProfileCapture capture;
      Tensor y = model.run({input})[0];
      QCOMPARE(y.shape(), (Shape{N, C, OH, OW}));
      got = y.to_vector();
      for (auto& r : capture.records()) names.push_back(r.kernel->name);
    }
    const tltest::DepthwiseWindow ref{c.H, c.W, c.KH, c.KW, c.SH, c.SW, c.DH, c.DW, top, c.pads[2] + pn[2], left,
                                      c.pads[3] + pn[3]};
    const std::vector<double> want = tltest::depthwise_reference(
        x, int(N), int(C), ref, [&](int ch, int ky, int kx) { return w[size_t((ch * c.KH + ky) * c.KW + kx)]; },
        c.bias ? b : std::vector<double>{});
    double worst = 0;
    const std::string bad = tltest::first_mismatch(got, want, 1e-5, worst);
    QVERIFY2(bad.empty(), bad.c_str());
    qInfo("largest relative error %.2e", worst);
    std::string all;
    for (auto& k : names) all += k + " ";
    if (dev == "cpu" && N == 1)  // one gathering GEMM, the bias its epilogue
      QVERIFY2(names.size() == 1 && names[0].rfind("GEMM_" + std::to_string(C) + "_1_", 0) == 0, ("warm run kernels: " + all).c_str());
    else if (dev == "cpu")  // the weights laid out per image, then one gathering GEMM over all planes
      QVERIFY2(names.size() == 2 && names[1].rfind("GEMM_" + std::to_string(N * C) + "_1_", 0) == 0,
               ("warm run kernels: " + all).c_str());
  }
};

QTEST_GUILESS_MAIN(TestOnnxDepthwise)
#include "test_onnx_depthwise.moc"
