// Opening an ONNX file reads and parses it once (core/io/onnx.h, open_onnx):
// inspect_model_file, which the window and `tinylens-cli inspect` call, gets
// the file's graph, its inferred shapes and the classifier from one parse,
// where it took three (inspect_onnx, infer_onnx_shapes and the classifier's
// OnnxModel each parsed the file), and it decodes each initializer once (the
// graph's statistics and the model each decoded them).
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

  // The statistics the graph shows and the model decode each initializer
  // once between them: the model takes the values the statistics read.
  void initializersAreDecodedOnce() {
    fs::path dir = tltest::fresh_temp_dir("open", "decodes");
    const std::string path =
        tltest::tiny_classifier(dir / "tiny.onnx", [](int i) { return 0.01f * float(i % 7); }, {0.1f, 0.2f, 0.3f, 0.4f});
    const size_t before = tl::onnx_initializer_decodes();
    tl::ModelInspection m = tl::inspect_model_file(path);
    QCOMPARE(tl::onnx_initializer_decodes() - before, size_t(2));  // W and B, once each
    QVERIFY2(m.classifier != nullptr, m.classifier_error.c_str());
    QVERIFY(m.graph.has_value());
    QCOMPARE(m.graph->initializers.size(), size_t(2));
    QVERIFY(m.graph->initializers[1].has_stats);
    QCOMPARE(m.graph->initializers[1].max, 0.4f);
    QCOMPARE(m.summary.parameters, int64_t(108 + 4));
    tl::Image grey;
    grey.width = grey.height = 8;
    grey.rgb.assign(8 * 8 * 3, 0.5f);
    QCOMPARE(tl::classify(*m.classifier, grey, "cpu", 4, 0).top.size(), size_t(4));
    QCOMPARE(tl::onnx_initializer_decodes() - before, size_t(2));  // running decodes nothing again
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
