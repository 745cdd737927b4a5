// Hostile models that are small on disk and large in what they ask (issue
// 47): shapes whose sizes multiply past 64 bits behind a 0, compute and
// memory bombs, and inspection that must never run the model. Each model is
// built here and must give a clear IOError or ShapeError, quickly, on the
// plain build and under the sanitizers.
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "core/io/onnx.h"
#include "core/io/image.h"
#include "core/models/classifier.h"
#include "core/models/inspect.h"
#include "core/tensor.h"
#include "tests/onnx_builder.h"
#include "tests/onnx_hostile.h"
#include "tests/testing.h"

namespace fs = std::filesystem;
using namespace tl;
using tltest::Builder;
using namespace tltest::hostile;

namespace {

constexpr int64_t kHuge = int64_t(1) << 62;

// The error `inspect_model_file` gives for `b`, or, when it gives none, the
// reason the shapes could not be inferred ("" when they were).
std::string inspect_error(const Builder& b, const std::string& name) {
  fs::path dir = tltest::fresh_temp_dir("budget", name);
  const std::string path = b.save(dir / (name + ".onnx"));
  std::string msg = error_of([&] {
    ModelInspection m = inspect_model_file(path);
    if (!m.shapes_inferred) throw IOError(m.shapes_error);
  });
  fs::remove_all(dir);
  return msg;
}

// A model computing `y` from the int64 initializer `shape` through `op`.
Builder from_shape(const std::string& op, const std::vector<int64_t>& shape) {
  Builder b;
  ints(b, "s", {int64_t(shape.size())}, shape);
  if (op == "Expand") floats(b, "x", {1}, {1});
  b.output("y", {});
  b.node(op, op == "Expand" ? std::vector<std::string>{"x", "s"} : std::vector<std::string>{"s"}, {"y"});
  return b;
}

// ConstantOfShape(`shape`) named `name`: a large tensor from a few bytes.
void filled(Builder& b, const std::string& name, const std::vector<int64_t>& shape) {
  ints(b, name + "_shape", {int64_t(shape.size())}, shape);
  b.node("ConstantOfShape", {name + "_shape"}, {name});
}

}  // namespace

class TestOnnxBudget : public QObject {
  Q_OBJECT

 private slots:
  // ---- 1. sizes behind a 0: the span of every shape is bounded ----

  // An initializer of dims (0, 2^62, 2^62) holds no element, so every
  // element-count check passed it; Concat then summed 2^62 + 2^62.
  void emptyInitializerWithHugeDimensions() {
    Builder b;
    b.init("a", {0, kHuge, kHuge}, onnx::TensorProto::FLOAT);
    b.output("y", {});
    auto* n = b.node("Concat", {"a", "a"}, {"y"});
    int_attr(n, "axis", 1);
    EXPECT_ERROR(run_error(b, "concat0"), "spans more than 2^48");
    EXPECT_ERROR(inspect_error(b, "concat0"), "spans more than 2^48");
  }

  // The same sizes made by the graph: ConstantOfShape and Expand to
  // (0, 2^62, 2^62), Tile of an empty tensor by 2^62.
  void computedShapesWithHugeDimensions() {
    EXPECT_ERROR(run_error(from_shape("ConstantOfShape", {0, kHuge, kHuge}), "cos0"), "spans more than 2^48");
    EXPECT_ERROR(run_error(from_shape("Expand", {0, kHuge, kHuge}), "expand0"), "spans more than 2^48");
    Builder tile;
    tile.init("x", {0, 3}, onnx::TensorProto::FLOAT);
    ints(tile, "r", {2}, {kHuge, 4});
    tile.output("y", {});
    tile.node("Tile", {"x", "r"}, {"y"});
    EXPECT_ERROR(run_error(tile, "tile0"), "spans more than 2^48");
  }

  // The core refuses such a shape wherever it is made: a reshape of an
  // empty tensor, zeros, an expand.
  void coreShapesAreBounded() {
    EXPECT_ERROR(error_of([] { Tensor::zeros({0, kHuge, kHuge}, DType::f32, "cpu"); }), "spans more than 2^48");
    EXPECT_ERROR(error_of([] { Tensor::zeros({0}, DType::f32, "cpu").reshape({0, kHuge, 4}); }), "spans more than 2^48");
    EXPECT_ERROR(error_of([] { Tensor::zeros({1, 0}, DType::f32, "cpu").expand({int64_t(1) << 40, 0}).reshape({0, 1 << 30, 1 << 30}); }),
                 "spans more than 2^48");
    // A large but valid empty shape is fine: 2^47 rows of nothing.
    QCOMPARE(Tensor::zeros({int64_t(1) << 47, 0}, DType::f32, "cpu").numel(), int64_t(0));
  }

  // ---- 2. compute bombs: a run's FLOPs are counted before it launches ----

  // Two convolutions, each under the tap limit, of 1.1e13 FLOPs together,
  // from a 1 KB file: refused with what the run would need, before a kernel
  // (a CPU device's limit is 6e12, about a minute).
  void computeBombIsRefusedBeforeItRuns() {
    Builder b;
    filled(b, "x", {1, 64, 512, 512});
    filled(b, "w", {64, 64, 63, 63});
    b.node("Conv", {"x", "w"}, {"h"});
    b.node("Conv", {"h", "w"}, {"y"});
    b.output("y", {});
    const std::string msg = run_error(b, "convbomb");
    EXPECT_ERROR(msg, "FLOP of arithmetic, more than the 6 TFLOP a run may take on this CPU device");
    EXPECT_ERROR(msg, "TINYLENS_MAX_RUN_FLOPS");
  }

  // ConvTranspose had no tap limit: a 1000x1000 kernel ran for hours.
  void transposedConvolutionHasATapLimit() {
    Builder b;
    filled(b, "x", {1, 1, 8, 8});
    filled(b, "w", {1, 1, 1000, 1000});
    b.node("ConvTranspose", {"x", "w"}, {"y"});
    b.output("y", {});
    EXPECT_ERROR(run_error(b, "convtbomb"), "more than 4096 taps");
  }

  // ---- 3. memory bombs: the bytes held at once are bounded per run ----

  // 64 MatMuls of 16 MB each, all read by one Sum: 1 GB held at once from a
  // file of a few hundred bytes (each value alone is within its limit).
  void valuesHeldAtOnceAreBounded() {
    Builder b;
    filled(b, "x", {2048, 2048});
    std::vector<std::string> parts;
    for (int i = 0; i < 64; ++i) {
      parts.push_back("m" + std::to_string(i));
      b.node("MatMul", {"x", "x"}, {parts.back()});
    }
    b.node("Sum", parts, {"y"});
    b.output("y", {});
    const std::string msg = run_error(b, "matmuls");
    EXPECT_ERROR(msg, "of values at once, more than the");
    EXPECT_ERROR(msg, "TINYLENS_TRUST_FILES");
  }

  // A long chain holds only what later nodes read: the estimate of a chain
  // of 300 Adds is three values, and the run gives x + 300.
  void aLongChainHoldsFewValues() {
    Builder b;
    b.input("x", {"256", "256"});
    floats(b, "one", {1}, {1});
    std::string last = "x";
    for (int i = 0; i < 300; ++i) {
      const std::string next = "a" + std::to_string(i);
      b.node("Add", {last, "one"}, {next});
      last = next;
    }
    b.output(last, {"256", "256"});
    fs::path dir = tltest::fresh_temp_dir("budget", "chain");
    OnnxModel m(b.save(dir / "chain.onnx"));
    Tensor x = Tensor::from_data(std::vector<float>(256 * 256, 0.5f), {256, 256}, "cpu");
    const OnnxRunCost cost = m.estimate_run({x});
    QVERIFY(cost.complete);
    QCOMPARE(cost.flops, 300.0 * 256 * 256);
    QVERIFY2(cost.peak_bytes <= 3 * 256 * 256 * 4 + 64, std::to_string(cost.peak_bytes).c_str());
    const auto y = m.run({x}).at(0).to_vector();
    QCOMPARE(y.front(), 300.5f);
    QCOMPARE(y.back(), 300.5f);
    fs::remove_all(dir);
  }

  // ---- 4. inspecting never runs the model ----

  // A Reshape to a shape computed from a layer's output (a MatMul of 2^31
  // multiply-adds): the old inspection ran the model to find it. Now the
  // shapes before it are known, the rest are said to need a run, and the
  // small shape arithmetic of ordinary graphs is still evaluated.
  void inspectionDoesNotRunLayers() {
    Builder b;
    b.input("x", {"1024", "1024"});
    b.output("y", {});
    b.node("MatMul", {"x", "x"}, {"m"});
    b.node("ReduceMax", {"m"}, {"r"});
    ints(b, "one", {1}, {1});
    b.node("Reshape", {"r", "one"}, {"r1"});
    int_attr(b.node("Cast", {"r1"}, {"n"}), "to", onnx::TensorProto::INT64);
    ints(b, "minus1", {1}, {-1});
    int_attr(b.node("Concat", {"n", "minus1"}, {"s"}), "axis", 0);
    b.node("Reshape", {"x", "s"}, {"y"});
    fs::path dir = tltest::fresh_temp_dir("budget", "inspect");
    const std::string path = b.save(dir / "m.onnx");
    ModelInspection info = inspect_model_file(path);
    QVERIFY(!info.shapes_inferred);
    QVERIFY2(has(info.shapes_error, "known after a run"), info.shapes_error.c_str());
    bool matmul_shaped = false;
    for (const auto& v : info.graph->values) matmul_shaped = matmul_shaped || (v.name == "m" && v.shape == Shape{1024, 1024});
    QVERIFY(matmul_shaped);
    fs::remove_all(dir);

    // Shape arithmetic on the device over the input's shape: evaluated.
    Builder small;
    small.input("x", {"2", "6"});
    small.output("y", {});
    small.node("Shape", {"x"}, {"sh"});
    int_attr(small.node("Cast", {"sh"}, {"f"}), "to", onnx::TensorProto::FLOAT);
    int_attr(small.node("ReduceSum", {"x"}, {"zero"}), "keepdims", 0);  // of the input's values: on the device
    small.node("Add", {"f", "zero"}, {"fz"});
    floats(small, "half", {2}, {2, 0.5f});
    small.node("Mul", {"fz", "half"}, {"g"});
    int_attr(small.node("Cast", {"g"}, {"s"}), "to", onnx::TensorProto::INT64);
    small.node("Reshape", {"x", "s"}, {"z"});
    small.node("Identity", {"z"}, {"y"});
    dir = tltest::fresh_temp_dir("budget", "inspect2");
    info = inspect_model_file(small.save(dir / "s.onnx"));
    QVERIFY2(info.shapes_inferred, info.shapes_error.c_str());
    bool reshaped = false;
    for (const auto& v : info.graph->values) reshaped = reshaped || (v.name == "z" && v.shape == Shape{4, 3});
    QVERIFY(reshaped);
    fs::remove_all(dir);
  }

  // ---- 6. errors name the file, the node and its op ----

  // A core error from an unnamed node ("matmul: shapes ... are
  // incompatible") said neither file nor node.
  void errorsNameFileAndNode() {
    Builder b;
    floats(b, "a", {1, 3}, {1, 2, 3});
    floats(b, "c", {5, 5}, std::vector<float>(25, 1));
    b.output("y", {});
    b.node("MatMul", {"a", "c"}, {"y"})->set_name("");
    const std::string msg = run_error(b, "unnamed");
    EXPECT_ERROR(msg, "unnamed.onnx: ONNX node #0 (MatMul): ");
    EXPECT_ERROR(msg, "(1, 3) and (5, 5)");
    // A named node keeps its name, once.
    Builder named;
    floats(named, "a", {1, 3}, {1, 2, 3});
    named.output("y", {});
    named.node("MatMul", {"a", "a"}, {"y"})->set_name("join");
    const std::string m2 = run_error(named, "named");
    EXPECT_ERROR(m2, "named.onnx: ONNX node #0 'join' (MatMul): ");
    QVERIFY2(m2.find("'join'", m2.find("'join'") + 1) == std::string::npos, m2.c_str());
  }

  // ---- 7. accepted where the user should be told ----

  void ambiguousGraphsAreRefused() {
    Builder twice;
    floats(twice, "a", {2}, {1, 2});
    twice.output("y", {});
    twice.node("Neg", {"a"}, {"y"});
    twice.node("Abs", {"a"}, {"y"});
    EXPECT_ERROR(run_error(twice, "twice"), "node #1 'Abs_2' (Abs) writes 'y', which an earlier node");

    Builder none;
    none.m.clear_opset_import();
    floats(none, "a", {2}, {1, 2});
    none.output("y", {});
    none.node("Neg", {"a"}, {"y"});
    EXPECT_ERROR(run_error(none, "noopset"), "no opset_import for the default ONNX domain");

    Builder future(10000);
    floats(future, "a", {2}, {1, 2});
    future.output("y", {});
    future.node("Neg", {"a"}, {"y"});
    EXPECT_ERROR(run_error(future, "opset10000"), "declares ONNX opset 10000, which no ONNX release has");
  }

  // Weights of NaN printed "nan%" probabilities; now the classifier says its
  // logits are not numbers.
  void nonFiniteLogitsAreAnError() {
    Builder b;
    b.input("x", {"1", "3", "8", "8"});
    b.output("y", {"1", "4"});
    std::vector<float> w(12, 1.0f);
    w[5] = std::numeric_limits<float>::quiet_NaN();
    floats(b, "w", {4, 3}, w);
    b.node("GlobalAveragePool", {"x"}, {"p"});
    b.node("Flatten", {"p"}, {"f"});
    int_attr(b.node("Gemm", {"f", "w"}, {"y"}), "transB", 1);
    fs::path dir = tltest::fresh_temp_dir("budget", "nan");
    const std::string path = b.save(dir / "nan.onnx");
    auto model = load_classifier(path);
    Image image;
    image.width = image.height = 16;
    image.rgb.assign(16 * 16 * 3, 0.5f);
    EXPECT_ERROR(error_of([&] { classify(*model, image, "cpu"); }), "non-finite logits of 4");
    fs::remove_all(dir);
  }
};

QTEST_GUILESS_MAIN(TestOnnxBudget)
#include "test_onnx_budget.moc"
