// ONNX batch norms folded at load (core/io/onnx/fold.h): a Conv followed by a
// BatchNormalization of constant parameters becomes one Conv, other constant
// batch norms a multiply-add; both must compute what the graph says. The
// reference is a direct convolution and normalisation in double precision on
// the test's own numbers, and the same model loaded with TINYLENS_NOFOLD=1.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <random>

#include "core/io/onnx.h"
#include "core/profile.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"

namespace fs = std::filesystem;
using namespace tl;
using TP = onnx::TensorProto;
using tltest::Builder;
using tltest::dims;

namespace {

fs::path temp_dir(const std::string& name) { return tltest::fresh_temp_dir("onnx-fold", name); }

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

// Batch-norm parameters of `channels` channels: scale, B, mean, var.
struct Norm {
  std::vector<double> scale, shift, mean, var;
  double eps = 1e-3;
  Norm(size_t channels, std::mt19937& rng)
      : scale(random_values(channels, rng, -2, 2)), shift(random_values(channels, rng, -1, 1)),
        mean(random_values(channels, rng, -1, 1)), var(random_values(channels, rng, 0.05, 3)) {}
  double apply(double x, size_t c) const { return (x - mean[c]) / std::sqrt(var[c] + eps) * scale[c] + shift[c]; }
  void add_to(Builder& b, const std::string& prefix, bool as_inputs) const {
    const Shape s = {int64_t(scale.size())};
    const std::vector<std::pair<std::string, const std::vector<double>*>> params = {
        {"scale", &scale}, {"shift", &shift}, {"mean", &mean}, {"var", &var}};
    for (const auto& [name, values] : params) {
      if (as_inputs) b.input(prefix + name, dims(s));
      else float_init(b, prefix + name, s, *values);
    }
  }
  std::vector<Tensor> as_tensors() const {
    std::vector<Tensor> out;
    for (const auto* p : {&scale, &shift, &mean, &var})
      out.push_back(Tensor::from_data(std::vector<float>(p->begin(), p->end()), {int64_t(p->size())}, "cpu"));
    return out;
  }
};

// y[n, m, o...] = sum over c in m's group and the window of x * w (+ b), with
// `pad` zeros on every side and stride 1; up to 3 spatial axes.
std::vector<double> conv_reference(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                                   const Shape& ws, const std::vector<double>& bias, int64_t groups, int64_t pad,
                                   Shape& ys) {
  const size_t spatial = xs.size() - 2;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  ys = {xs[0], ws[0]};
  for (size_t d = 0; d < spatial; ++d) {
    in[d] = xs[2 + d];
    k[d] = ws[2 + d];
    out[d] = in[d] + 2 * pad - k[d] + 1;
    ys.push_back(out[d]);
  }
  const int64_t p[3] = {spatial > 0 ? pad : 0, spatial > 1 ? pad : 0, spatial > 2 ? pad : 0};
  const int64_t N = xs[0], C = xs[1], M = ws[0], cg = C / groups, mg = M / groups;
  std::vector<double> y(size_t(N * M * out[0] * out[1] * out[2]));
  size_t at = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double s = bias.empty() ? 0.0 : bias[size_t(m)];
            for (int64_t cc = 0; cc < cg; ++cc) {
              const int64_t c = m / mg * cg + cc;
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i0 = o0 + k0 - p[0], i1 = o1 + k1 - p[1], i2 = o2 + k2 - p[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    s += x[size_t((((n * C + c) * in[0] + i0) * in[1] + i1) * in[2] + i2)] *
                         w[size_t((((m * cg + cc) * k[0] + k0) * k[1] + k1) * k[2] + k2)];
                  }
            }
            y[at++] = s;
          }
  return y;
}

// Runs a model on `inputs` on the cpu device: its first output, and the
// primitive ops of every kernel a second run launched (the first also
// computes the folded weights).
struct Run {
  std::vector<float> y;
  Shape shape;
  std::vector<std::vector<std::string>> kernels;
  size_t ops() const {
    size_t n = 0;
    for (const auto& k : kernels) n += k.size();
    return n;
  }
  bool any_op(const std::string& op) const {
    for (const auto& k : kernels)
      if (std::find(k.begin(), k.end(), op) != k.end()) return true;
    return false;
  }
};

Run run_model(const std::string& path, const std::vector<Tensor>& inputs, bool fold) {
  if (!fold) qputenv("TINYLENS_NOFOLD", "1");
  OnnxModel model(path);
  qunsetenv("TINYLENS_NOFOLD");
  Run r;
  model.run(inputs)[0].realize();
  ProfileCapture capture;
  Tensor y = model.run(inputs)[0];
  r.y = y.to_vector();
  r.shape = y.shape();
  for (const auto& rec : capture.records()) r.kernels.push_back(rec.kernel->ops);
  return r;
}

// Largest |a - b| over the largest |b|: both outputs hold values of order 1.
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return a.size() == b.size() ? worst / scale : INFINITY;
}

}  // namespace

class TestOnnxFold : public QObject {
  Q_OBJECT

 private slots:
  void convBatchNormIsOneConv_data() {
    QTest::addColumn<int>("spatial");
    QTest::addColumn<int>("channels");
    QTest::addColumn<int>("outputs");
    QTest::addColumn<int>("groups");
    QTest::addColumn<bool>("bias");
    QTest::addColumn<bool>("relu");
    QTest::newRow("2-D, bias") << 2 << 4 << 6 << 1 << true << false;
    QTest::newRow("2-D, no bias, ReLU after") << 2 << 4 << 6 << 1 << false << true;
    QTest::newRow("2-D, 2 groups, no bias") << 2 << 4 << 6 << 2 << false << false;
    QTest::newRow("2-D depthwise, bias, ReLU after") << 2 << 4 << 4 << 4 << true << true;
    QTest::newRow("1-D, bias") << 1 << 3 << 5 << 1 << true << false;
    QTest::newRow("3-D, 2 groups, no bias") << 3 << 2 << 4 << 2 << false << false;
  }

  // The folded model computes the convolution and normalisation of the
  // reference, the unfolded one too; only the unfolded one takes square roots
  // in its kernels, and the folded one launches no more kernels, of fewer ops.
  void convBatchNormIsOneConv() {
    QFETCH(int, spatial);
    QFETCH(int, channels);
    QFETCH(int, outputs);
    QFETCH(int, groups);
    QFETCH(bool, bias);
    QFETCH(bool, relu);
    std::mt19937 rng(uint32_t(spatial * 100 + outputs * 10 + groups));
    const int64_t size = spatial == 3 ? 4 : 6, kernel = 3, pad = 1;
    Shape xs = {2, channels}, ws = {outputs, channels / groups};
    for (int d = 0; d < spatial; ++d) xs.push_back(size), ws.push_back(kernel);
    const auto x = random_values(size_t(numel(xs)), rng, -1, 1);
    const auto w = random_values(size_t(numel(ws)), rng, -0.5, 0.5);
    const auto b = bias ? random_values(size_t(outputs), rng, -1, 1) : std::vector<double>{};
    const Norm norm(size_t(outputs), rng);

    Shape ys;
    std::vector<double> want = conv_reference(x, xs, w, ws, b, groups, pad, ys);
    const int64_t per_channel = numel(ys) / (ys[0] * ys[1]);
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] = norm.apply(want[i], size_t(int64_t(i) / per_channel % outputs));
      if (relu) want[i] = std::max(want[i], 0.0);
    }

    fs::path dir = temp_dir("conv");
    Builder m;
    m.input("x", dims(xs));
    m.output("y", dims(ys));
    float_init(m, "W", ws, w);
    if (bias) float_init(m, "B", {outputs}, b);
    auto* conv = m.node("Conv", bias ? std::vector<std::string>{"x", "W", "B"} : std::vector<std::string>{"x", "W"}, {"c"});
    auto* g = conv->add_attribute();
    g->set_name("group"), g->set_type(onnx::AttributeProto::INT), g->set_i(groups);
    auto* pads = conv->add_attribute();
    pads->set_name("pads"), pads->set_type(onnx::AttributeProto::INTS);
    for (int i = 0; i < 2 * spatial; ++i) pads->add_ints(pad);
    norm.add_to(m, "bn_", false);
    auto* bn = m.node("BatchNormalization", {"c", "bn_scale", "bn_shift", "bn_mean", "bn_var"}, {relu ? "n" : "y"});
    auto* eps = bn->add_attribute();
    eps->set_name("epsilon"), eps->set_type(onnx::AttributeProto::FLOAT), eps->set_f(float(norm.eps));
    if (relu) m.node("Relu", {"n"}, {"y"});
    const std::string path = m.save(dir / "conv_bn.onnx");

    const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), xs, "cpu");
    const Run folded = run_model(path, {input}, true), unfolded = run_model(path, {input}, false);
    QCOMPARE(folded.shape, ys);
    const double folded_error = relative_error(folded.y, want), unfolded_error = relative_error(unfolded.y, want);
    QVERIFY2(folded_error < 1e-5, qPrintable(QString("folded: relative error %1").arg(folded_error)));
    QVERIFY2(unfolded_error < 1e-5, qPrintable(QString("unfolded: relative error %1").arg(unfolded_error)));
    // The normalisation was already fused into the kernels that read the
    // convolution (the GEMM's store), so the kernels stay as many; each
    // does less: no square root, no reciprocal, fewer ops in all.
    const QString counts = QString("folded %1 kernels of %2 ops, unfolded %3 kernels of %4 ops")
                               .arg(folded.kernels.size()).arg(folded.ops()).arg(unfolded.kernels.size()).arg(unfolded.ops());
    qInfo("%s", qPrintable(counts));
    QVERIFY(unfolded.any_op("SQRT"));
    QVERIFY(!folded.any_op("SQRT") && !folded.any_op("RECIP"));
    QVERIFY2(folded.kernels.size() <= unfolded.kernels.size() && folded.ops() < unfolded.ops(), qPrintable(counts));

    // The convolution's output still has a shape for the window, though no
    // node computes it any more.
    OnnxModel model(path);
    std::map<std::string, Shape> shapes;
    model.run({input}, &shapes);
    QCOMPARE(shapes["c"], ys);
    QCOMPARE(model.nodes(), int64_t(relu ? 3 : 2));  // as the file has them
    OnnxGraphInfo info = inspect_onnx(path);
    QVERIFY(infer_onnx_shapes(info, path));
    bool found = false;
    for (const auto& v : info.values) found = found || (v.name == "c" && v.shape == ys);
    QVERIFY(found);
    fs::remove_all(dir);
  }

  // Pad amounts that an exporter computes from constants (TF-SAME padding
  // in EfficientNet's export: Concat, Cast and the like of initializers):
  // the chain is computed once, so a warm run is the pad alone, not the
  // chain's tiny kernels and a read back of the amounts on every run.
  void smallConstantChainsFoldOnce() {
    std::mt19937 rng(11);
    const Shape xs = {1, 2, 3, 4};
    const auto x = random_values(size_t(numel(xs)), rng, -2, 2);
    Builder m;
    m.input("x", dims(xs));
    m.output("y", dims({1, 2, 6, 5}));
    // pads = Reshape(Transpose(pairs)), pairs (begin, end) per axis as an
    // exporter writes them; the transpose runs on the device.
    auto* pairs = m.init("pairs", {4, 2}, TP::INT64);
    for (int64_t v : {0, 0, 0, 0, 1, 2, 0, 1}) pairs->add_int64_data(v);
    auto* flat = m.init("eight", {1}, TP::INT64);
    flat->add_int64_data(8);
    tltest::ints_attr(m.node("Transpose", {"pairs"}, {"by_side"}), "perm", {1, 0});
    m.node("Reshape", {"by_side", "eight"}, {"pads"});
    m.node("Pad", {"x", "pads"}, {"y"});
    fs::path dir = temp_dir("chain");
    const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), xs, "cpu");
    const Run r = run_model(m.save(dir / "chain.onnx"), {input}, true);
    QCOMPARE(r.shape, (Shape{1, 2, 6, 5}));
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          const bool inside = i >= 1 && i < 4 && j < 4;
          const float want = inside ? float(x[size_t((c * 3 + i - 1) * 4 + j)]) : 0.0f;
          QCOMPARE(r.y[size_t((c * 6 + i) * 5 + j)], want);
        }
    std::string all;
    for (const auto& k : r.kernels)
      for (const auto& op : k) all += op + " ";
    QVERIFY2(r.kernels.size() == 1, all.c_str());  // the pad; the chain ran once, in the cold run
    fs::remove_all(dir);
  }

  // Pad amounts computed from the input's shape (pad the width to a multiple
  // of 4, as Swin's export pads its windows; a transpose puts them on the
  // device): they depend only on the shape, so they are computed once per
  // input shape, and the Jit captures the warm run, which read them back
  // before (no capture). Another width gets its own amounts.
  void shapeChainsFoldPerInputShape() {
    Builder m;
    m.input("x", {"1", "1", "2", "w"});
    m.output("y", {"1", "1", "2", "p"});
    auto ints = [&](const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> v) {
      auto* t = m.init(name, std::move(shape), TP::INT64);
      for (auto x : v) t->add_int64_data(x);
    };
    ints("three", {1}, {3});
    ints("four", {1}, {4});
    ints("zeros", {7}, {0, 0, 0, 0, 0, 0, 0});
    ints("two_by_four", {2}, {2, 4});
    ints("eight", {1}, {8});
    m.node("Shape", {"x"}, {"s"});
    m.node("Gather", {"s", "three"}, {"w"});
    m.node("Mod", {"w", "four"}, {"r"});
    m.node("Sub", {"four", "r"}, {"t"});
    m.node("Mod", {"t", "four"}, {"p"});
    auto* cat = m.node("Concat", {"zeros", "p"}, {"pads8"});
    auto* axis = cat->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(0);
    m.node("Reshape", {"pads8", "two_by_four"}, {"rows"});
    tltest::ints_attr(m.node("Transpose", {"rows"}, {"cols"}), "perm", {1, 0});
    tltest::ints_attr(m.node("Transpose", {"cols"}, {"rows2"}), "perm", {1, 0});
    m.node("Reshape", {"rows2", "eight"}, {"pads"});
    m.node("Pad", {"x", "pads"}, {"y"});
    fs::path dir = temp_dir("byshape");
    OnnxModel model(m.save(dir / "byshape.onnx"));
    for (int64_t w : {5, 5, 5, 6, 8, 5}) {
      std::vector<float> x(size_t(2 * w));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
      const auto y = model.run({Tensor::from_data(x, {1, 1, 2, w}, "cpu")}).at(0);
      const int64_t padded = (w + 3) / 4 * 4;
      QCOMPARE(y.shape(), (Shape{1, 1, 2, padded}));
      const auto v = y.to_vector();
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < padded; ++j) QCOMPARE(v[size_t(i * padded + j)], j < w ? x[size_t(i * w + j)] : 0.0f);
    }
    QVERIFY(model.jit_captured("cpu"));
    fs::remove_all(dir);
  }

  // A shape can depend on the input's values (NonZero's): a Shape node runs
  // every time, and the values after it are reused only while it reads what
  // it read when they were kept. Two inputs of one shape with 3 and 5
  // nonzeros give 3 and 5 ones, in either order, again and again.
  void shapesOfDataDependentValuesAreReadEachRun() {
    Builder m;
    m.input("x", {"8"});
    m.output("y", {"n"});
    auto* one = m.init("one", {1}, TP::INT64);
    one->add_int64_data(1);
    m.node("NonZero", {"x"}, {"nz"});
    m.node("Shape", {"nz"}, {"s"});
    m.node("Gather", {"s", "one"}, {"count"});
    m.node("ConstantOfShape", {"count"}, {"y"});
    fs::path dir = temp_dir("datashape");
    OnnxModel model(m.save(dir / "datashape.onnx"));
    const std::vector<float> three = {0, 1, 0, 2, 0, 0, 3, 0}, five = {1, 1, 0, 2, 0, 4, 3, 0};
    for (const auto* x : {&three, &five, &five, &three, &five}) {
      const int64_t want = x == &three ? 3 : 5;
      const Tensor y = model.run({Tensor::from_data(*x, {8}, "cpu")}).at(0);
      QCOMPARE(y.shape(), (Shape{want}));
    }
    fs::remove_all(dir);
  }

  // A model with two outputs that share a product: run() computes both in
  // one realize, and the product once. A realize keeps only its roots
  // (Plan::Kernel::keep), so outputs realized one after the other would each
  // compute the product again.
  void outputsThatShareWorkRealizeTogether() {
    std::mt19937 rng(5);
    const auto x = random_values(16, rng, -1, 1), w = random_values(8 * 24, rng, -1, 1);
    Builder m;
    m.input("x", dims({2, 8}));
    m.output("relu", dims({2, 24}));
    m.output("exp", dims({2, 24}));
    float_init(m, "w", {8, 24}, w);
    m.node("MatMul", {"x", "w"}, {"h"});
    m.node("Relu", {"h"}, {"relu"});
    m.node("Exp", {"h"}, {"exp"});
    fs::path dir = temp_dir("two-outputs");
    OnnxModel model(m.save(dir / "two.onnx"));
    const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), {2, 8}, "cpu");
    ProfileCapture capture;
    const auto outs = model.run({input});
    QCOMPARE(outs.size(), size_t(2));
    const auto relu = outs[0].to_vector(), e = outs[1].to_vector();
    size_t gemms = 0;
    for (const auto& r : capture.records()) gemms += r.kernel->name.rfind("GEMM", 0) == 0;
    QCOMPARE(gemms, size_t(1));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 24; ++j) {
        double h = 0;
        for (int64_t k = 0; k < 8; ++k) h += x[size_t(i * 8 + k)] * w[size_t(k * 24 + j)];
        QVERIFY(std::fabs(relu[size_t(i * 24 + j)] - std::max(h, 0.0)) < 1e-5);
        QVERIFY(std::fabs(e[size_t(i * 24 + j)] - std::exp(h)) < 1e-5 * std::exp(h));
      }
    fs::remove_all(dir);
  }

  // Batch norms that no convolution absorbs: one straight on a graph input
  // with constant parameters (a multiply-add of precomputed scale and shift),
  // and one whose parameters are graph inputs (computed as the formula says).
  // A convolution whose output is also read elsewhere keeps it.
  void batchNormsThatStay() {
    std::mt19937 rng(7);
    const Shape xs = {2, 3, 4, 5};
    const auto x = random_values(size_t(numel(xs)), rng, -2, 2);
    const Norm norm(3, rng);
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = norm.apply(x[i], i / 20 % 3);
    const Tensor input = Tensor::from_data(std::vector<float>(x.begin(), x.end()), xs, "cpu");
    fs::path dir = temp_dir("stay");

    for (bool params_are_inputs : {false, true}) {
      Builder m;
      m.input("x", dims(xs));
      norm.add_to(m, "bn_", params_are_inputs);
      m.output("y", dims(xs));
      auto* bn = m.node("BatchNormalization", {"x", "bn_scale", "bn_shift", "bn_mean", "bn_var"}, {"y"});
      auto* eps = bn->add_attribute();
      eps->set_name("epsilon"), eps->set_type(onnx::AttributeProto::FLOAT), eps->set_f(float(norm.eps));
      const std::string path = m.save(dir / (params_are_inputs ? "inputs.onnx" : "constants.onnx"));
      std::vector<Tensor> inputs = {input};
      if (params_are_inputs)
        for (const auto& t : norm.as_tensors()) inputs.push_back(t);
      const Run r = run_model(path, inputs, true);
      const double error = relative_error(r.y, want);
      QVERIFY2(error < 1e-5, qPrintable(QString("parameters as %1: relative error %2")
                                            .arg(params_are_inputs ? "inputs" : "constants")
                                            .arg(error)));
      // Constants: scale and shift were computed at load, no kernel takes a
      // root; inputs: the formula runs on the device.
      QCOMPARE(r.any_op("SQRT"), params_are_inputs);
    }

    // Conv (1x1, weight 1, no bias) read by the batch norm and by a second output.
    Builder m;
    m.input("x", dims(xs));
    m.output("y", dims(xs));
    m.output("c", dims(xs));
    std::vector<double> eye(9, 0.0);
    for (int i = 0; i < 3; ++i) eye[size_t(i * 4)] = 1.0;
    float_init(m, "W", {3, 3, 1, 1}, eye);
    m.node("Conv", {"x", "W"}, {"c"});
    norm.add_to(m, "bn_", false);
    auto* bn = m.node("BatchNormalization", {"c", "bn_scale", "bn_shift", "bn_mean", "bn_var"}, {"y"});
    auto* eps = bn->add_attribute();
    eps->set_name("epsilon"), eps->set_type(onnx::AttributeProto::FLOAT), eps->set_f(float(norm.eps));
    OnnxModel model(m.save(dir / "shared.onnx"));
    auto out = model.run({input});
    const double error = relative_error(out[0].to_vector(), want), conv_error = relative_error(out[1].to_vector(), x);
    QVERIFY2(error < 1e-5 && conv_error < 1e-6, qPrintable(QString("errors %1, %2").arg(error).arg(conv_error)));
    fs::remove_all(dir);
  }

  // Parameters that do not fit the convolution are an error naming the node,
  // as they are without folding.
  void mismatchedParametersAreAnError() {
    fs::path dir = temp_dir("bad");
    std::mt19937 rng(3);
    Builder m;
    m.input("x", {"1", "2", "3", "3"});
    m.output("y", {"1", "4", "3", "3"});
    float_init(m, "W", {4, 2, 1, 1}, random_values(8, rng, -1, 1));
    m.node("Conv", {"x", "W"}, {"c"});
    Norm(3, rng).add_to(m, "bn_", false);  // 3 channels for a 4-channel convolution
    m.node("BatchNormalization", {"c", "bn_scale", "bn_shift", "bn_mean", "bn_var"}, {"y"})->set_name("the_norm");
    OnnxModel model(m.save(dir / "bad.onnx"));
    std::string error;
    try {
      model.run({Tensor::zeros({1, 2, 3, 3}, DType::f32, "cpu")});
    } catch (const std::exception& e) {
      error = e.what();
    }
    QVERIFY2(error.find("the_norm") != std::string::npos && error.find("3 values") != std::string::npos &&
                 error.find("4 channels") != std::string::npos,
             error.c_str());
    fs::remove_all(dir);
  }
};

QTEST_GUILESS_MAIN(TestOnnxFold)
#include "test_onnx_fold.moc"
