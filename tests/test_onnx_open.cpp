// Opening an ONNX file reads and parses it once (core/io/onnx.h, open_onnx):
// inspect_model_file, which the window and `tinylens-cli inspect` call, gets
// the file's graph, its inferred shapes and the classifier from one parse,
// where it took three (inspect_onnx, infer_onnx_shapes and the classifier's
// OnnxModel each parsed the file).
#include <QtTest/QtTest>

#include <filesystem>
#include <string>

#include "core/io/image.h"
#include "core/io/onnx.h"
#include "core/models/inspect.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"

namespace fs = std::filesystem;
using tltest::Builder;

namespace {

// (1, 3, 8, 8) -> the mean of each channel: a classifier of three classes.
Builder channel_means() {
  Builder b;
  b.input("x", {"1", "3", "8", "8"});
  b.output("y", {"1", "3"});
  auto* n = b.node("ReduceMean", {"x"}, {"y"});
  tltest::ints_attr(n, "axes", {2, 3});
  auto* keep = n->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  return b;
}

}  // namespace

class TestOnnxOpen : public QObject {
  Q_OBJECT

 private slots:
  void aClassifierIsParsedOnce() {
    fs::path dir = tltest::fresh_temp_dir("open", "classifier");
    const std::string path = channel_means().save(dir / "means.onnx");
    const size_t before = tl::onnx_parses();
    tl::ModelInspection m = tl::inspect_model_file(path);
    QCOMPARE(tl::onnx_parses() - before, size_t(1));
    QVERIFY(m.graph.has_value());
    QCOMPARE(m.graph->nodes.size(), size_t(1));
    QVERIFY2(m.shapes_inferred, m.shapes_error.c_str());
    QVERIFY2(m.classifier != nullptr, m.classifier_error.c_str());
    QCOMPARE(m.summary.layers, int64_t(1));
    // The shared model runs: a red image's channel means, red first.
    tl::Image red;
    red.width = red.height = 8;
    red.rgb.assign(8 * 8 * 3, 0.0f);
    for (size_t i = 0; i < red.rgb.size(); i += 3) red.rgb[i] = 1.0f;
    tl::ClassifyResult r = tl::classify(*m.classifier, red, "cpu", 3, 0);
    QCOMPARE(r.top.size(), size_t(3));
    QCOMPARE(r.top[0].index, 0);
    QCOMPARE(tl::onnx_parses() - before, size_t(1));  // running parses nothing
    fs::remove_all(dir);
  }

  void anUnsupportedGraphIsParsedOnceAndStillShown() {
    Builder b;
    b.input("x", {"1", "3"});
    b.output("y", {"1", "3"});
    b.node("NoSuchOp", {"x"}, {"y"});
    fs::path dir = tltest::fresh_temp_dir("open", "unsupported");
    const std::string path = b.save(dir / "odd.onnx");
    const size_t before = tl::onnx_parses();
    tl::ModelInspection m = tl::inspect_model_file(path);
    QCOMPARE(tl::onnx_parses() - before, size_t(1));
    QVERIFY(m.graph.has_value());
    QCOMPARE(m.unsupported, 1);
    QVERIFY(m.classifier == nullptr);
    QVERIFY2(m.classifier_error.find("NoSuchOp") != std::string::npos, m.classifier_error.c_str());
    fs::remove_all(dir);
  }
};

QTEST_GUILESS_MAIN(TestOnnxOpen)
#include "test_onnx_open.moc"
