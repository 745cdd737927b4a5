// An opened .onnx file in the window: its own graph, one box per ONNX node
// (Netron-style), details with attributes, shapes and initializer
// statistics; unsupported nodes marked and listed; a truncated file refused
// with the previous graph kept; an exported classifier classifying.
#include <QGraphicsPathItem>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/io/onnx.h"
#include "core/models/classifier.h"
#include "core/realize.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"
#include "ui/graph_data.h"
#include "ui/main_window.h"

using namespace tlui;
namespace fs = std::filesystem;

namespace {

using tltest::kSquirrel;

std::vector<float> convWeights() {
  std::vector<float> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(std::sin(double(i) * 0.7) * 0.5 + 0.01 * double(i));
  return w;
}

// x (1,3,8,8) -> Conv(W, B) -> Relu -> com.example::Mystery -> GlobalAveragePool -> Flatten -> (1,4)
std::string writeFixture(const fs::path& path) {
  tltest::Builder b;
  b.input("x", {"1", "3", "8", "8"});
  b.output("out", {"1", "4"});
  auto* conv = b.node("Conv", {"x", "W", "B"}, {"y"});
  auto ints = [](onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  };
  ints(conv, "kernel_shape", {3, 3});
  ints(conv, "pads", {1, 1, 1, 1});
  ints(conv, "strides", {2, 2});
  b.node("Relu", {"y"}, {"r"});
  b.node("Mystery", {"r"}, {"m"}, "com.example");
  b.node("GlobalAveragePool", {"m"}, {"p"});
  b.node("Flatten", {"p"}, {"out"});
  auto* W = b.init("W", {4, 3, 3, 3}, onnx::TensorProto::FLOAT);
  for (float v : convWeights()) W->add_float_data(v);
  auto* B = b.init("B", {4}, onnx::TensorProto::FLOAT);
  for (float v : {0.5f, -0.25f, 0.0f, 1.0f}) B->add_float_data(v);
  b.set_type(b.m.mutable_graph()->add_value_info(), "y", onnx::TensorProto::FLOAT, {"1", "4", "4", "4"});
  auto* e = b.m.add_opset_import();
  e->set_domain("com.example");
  e->set_version(1);
  return b.save(path);
}

int onnxNodeCount(const DisplayGraph& g) {
  return int(std::count_if(g.nodes.begin(), g.nodes.end(), [](const DisplayNode& d) { return d.onnxNode >= 0; }));
}

double statOf(const QString& text, const QString& name) {
  QRegularExpression re(name + " (-?[0-9.]+(e[-+]?[0-9]+)?)");
  auto m = re.match(text);
  return m.hasMatch() ? m.captured(1).toDouble() : std::nan("");
}

}  // namespace

class TestUiOnnx : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;
  QString fixture_;

  // Opens a model and waits for the ONNX graph's layout; `maxGap` gets the
  // longest the event loop went without turning meanwhile.
  bool openAndLayout(const QString& path, qint64* maxGap = nullptr) {
    QSignalSpy laid(window_->graphPane(), &GraphPane::layoutReady);
    QElapsedTimer clock;
    clock.start();
    qint64 last = 0, gap = 0;
    QTimer ticker;
    ticker.setInterval(10);
    connect(&ticker, &QTimer::timeout, [&] {
      gap = std::max(gap, clock.elapsed() - last);
      last = clock.elapsed();
    });
    ticker.start();
    window_->openFile(path);
    while (laid.isEmpty() && clock.elapsed() < 60000) QTest::qWait(20);
    if (maxGap) *maxGap = std::max(gap, clock.elapsed() - last);
    return !laid.isEmpty();
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-onnx");
    QSettings().clear();
    fixture_ = QString::fromStdString(writeFixture(fs::path(tmp_.path().toStdString()) / "mystery.onnx"));
    window_ = std::make_unique<MainWindow>();
    window_->resize(1400, 900);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  }

  void graphOfFixture() {
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    QVERIFY(openAndLayout(fixture_));
    GraphPane* pane = window_->graphPane();
    QCOMPARE(pane->mode(), GraphPane::OnnxGraph);
    tl::OnnxGraphInfo info = tl::inspect_onnx(fixture_.toStdString());
    QCOMPARE(info.nodes.size(), size_t(5));
    QCOMPARE(onnxNodeCount(pane->displayGraph()), 5);
    // input and output boxes besides the nodes; edges follow the values.
    QCOMPARE(pane->displayGraph().nodes.size(), size_t(7));
    QCOMPARE(pane->displayGraph().edges.size(), size_t(6));

    // The unsupported node: marked in its box (red border, badge), counted,
    // listed in the summary, and the model refuses to classify with a reason.
    int marked = 0, mystery = -1;
    const auto& nodes = pane->displayGraph().nodes;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i].unsupported) {
        ++marked;
        mystery = int(i);
      }
    QCOMPARE(marked, 1);
    QCOMPARE(nodes[size_t(mystery)].onnxNode, 2);
    QVERIFY(nodes[size_t(mystery)].label.contains("com.example::Mystery"));
    QVERIFY(nodes[size_t(mystery)].label.contains("unsupported"));
    int redBoxes = 0;
    for (QGraphicsItem* item : pane->scene()->items())
      if (auto* path = dynamic_cast<QGraphicsPathItem*>(item); path && path->data(0).isValid())
        redBoxes += path->pen().color() == QColor(200, 0, 0) ? 1 : 0;
    QCOMPARE(redBoxes, 1);
    QVERIFY2(pane->detailsText().contains("1 unsupported nodes"), qPrintable(pane->detailsText()));
    QVERIFY(pane->detailsText().contains("Mystery_3"));
    QTRY_VERIFY(!failed.isEmpty());
    QVERIFY2(failed[0][0].toString().contains("cannot classify") &&
                 failed[0][0].toString().contains("com.example::Mystery"),
             qPrintable(failed[0][0].toString()));

    // The Conv box reads like Netron's: op, initializers with shapes, attributes.
    const DisplayNode& convBox = nodes[1];
    QCOMPARE(convBox.onnxNode, 0);
    QVERIFY2(convBox.label.startsWith("Conv\n"), qPrintable(convBox.label));
    QVERIFY(convBox.label.contains(QString::fromUtf8("W \u27E84\u00D73\u00D73\u00D73\u27E9")));
    QVERIFY(convBox.label.contains(QString::fromUtf8("B \u27E84\u27E9")));
    QVERIFY(convBox.label.contains("kernel_shape = [3, 3]"));

    // Its details: every attribute, typed inputs/outputs, initializer stats.
    pane->selectOnnxNode(0);
    const QString text = pane->detailsText();
    QVERIFY2(text.startsWith("Conv"), qPrintable(text));
    for (const char* want : {"kernel_shape = [3, 3]", "pads = [1, 1, 1, 1]", "strides = [2, 2]", "108 elements",
                             "4 elements"})
      QVERIFY2(text.contains(want), qPrintable(QString("%1 missing in:\n%2").arg(want, text)));
    QVERIFY(text.contains(QString::fromUtf8("X: x float \u27E81\u00D73\u00D78\u00D78\u27E9")));
    QVERIFY(text.contains(QString::fromUtf8("W: W float \u27E84\u00D73\u00D73\u00D73\u27E9")));
    QVERIFY(text.contains(QString::fromUtf8("y float \u27E81\u00D74\u00D74\u00D74\u27E9")));  // from value_info
    const std::vector<float> w = convWeights();
    double lo = w[0], hi = w[0], sum = 0, sq = 0;
    for (float v : w) lo = std::min(lo, double(v)), hi = std::max(hi, double(v)), sum += v;
    double mean = sum / double(w.size());
    for (float v : w) sq += (v - mean) * (v - mean);
    double sd = std::sqrt(sq / double(w.size()));
    // The W line comes first, so the first statistics in the text are W's.
    QVERIFY(std::fabs(statOf(text, "min") - lo) < 1e-5);
    QVERIFY(std::fabs(statOf(text, "max") - hi) < 1e-5);
    QVERIFY(std::fabs(statOf(text, "mean") - mean) < 1e-5);
    QVERIFY(std::fabs(statOf(text, "std") - sd) < 1e-5);

    pane->selectOnnxNode(1);  // Relu: output with no recorded shape
    QVERIFY(pane->detailsText().startsWith("Relu"));
    QVERIFY(pane->detailsText().contains("r shape unknown"));
    pane->selectOnnxNode(2);
    QVERIFY(pane->detailsText().contains("Unsupported: tinylens has no mapping for com.example::Mystery "
                                         "(its op table: no handler)"));

    QVERIFY(pane->search("Flatten"));
    QVERIFY(pane->detailsText().startsWith("Flatten"));
  }

  void truncatedFileKeepsGraph() {
    QFile f(fixture_);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QByteArray bytes = f.readAll();
    const QString cut = tmp_.filePath("truncated.onnx");
    QFile out(cut);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(bytes.left(bytes.size() / 2));
    out.close();
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openFile(cut);
    QTRY_VERIFY_WITH_TIMEOUT(!failed.isEmpty(), 30000);
    const QString msg = failed[0][0].toString();
    QVERIFY2(msg.contains("Could not open the ONNX file") && msg.contains("truncated.onnx"), qPrintable(msg));
    QTest::qWait(100);
    GraphPane* pane = window_->graphPane();
    QCOMPARE(pane->onnx()->path, fixture_);
    QCOMPARE(pane->mode(), GraphPane::OnnxGraph);
    QCOMPARE(onnxNodeCount(pane->displayGraph()), 5);
  }

  void conformanceCaseGraph() {
    const fs::path model =
        fs::path(tltest::source_dir()) / "resources/onnx-node-tests/test_conv_with_strides_padding/model.onnx";
    TL_REQUIRE(fs::exists(model), "resources/onnx-node-tests is missing: run scripts/setup");
    QVERIFY(openAndLayout(QString::fromStdString(model.string())));
    GraphPane* pane = window_->graphPane();
    QCOMPARE(onnxNodeCount(pane->displayGraph()), int(tl::inspect_onnx(model.string()).nodes.size()));
    QCOMPARE(pane->onnx()->unsupported, 0);
    pane->selectOnnxNode(0);
    QVERIFY(pane->detailsText().startsWith("Conv"));
    QVERIFY2(pane->detailsText().contains("strides = [2, 2]"), qPrintable(pane->detailsText()));
  }

  // Two files opened back to back: only the newer one's graph arrives.
  void newerOpenSupersedes() {
    const fs::path model =
        fs::path(tltest::source_dir()) / "resources/onnx-node-tests/test_conv_with_strides_padding/model.onnx";
    TL_REQUIRE(fs::exists(model), "resources/onnx-node-tests is missing: run scripts/setup");
    const QString conv = QString::fromStdString(model.string());
    QSignalSpy inspected(window_->session(), &Session::onnxInspected);
    window_->openFile(fixture_);
    window_->openFile(conv);
    QTRY_VERIFY_WITH_TIMEOUT(!inspected.isEmpty(), 30000);
    QTest::qWait(300);
    QCOMPARE(inspected.size(), 1);
    QCOMPARE(inspected[0][0].value<OnnxPtr>()->path, conv);
    QTRY_COMPARE(window_->graphPane()->onnx()->path, conv);
    QTRY_COMPARE(onnxNodeCount(window_->graphPane()->displayGraph()), 1);
  }

  // The exported EfficientNet-Lite0: its graph, then the squirrel through it;
  // the top-1 must be the native model's (PyTorch golden logits' argmax).
  void exportedClassifier() {
    const QString path = QString::fromStdString(tl::models_directory() + "/efficientnet-lite0.onnx");
    TL_REQUIRE(QFileInfo::exists(path), "resources/models/efficientnet-lite0.onnx is missing: run scripts/setup");
    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    qint64 gap = 0;
    QVERIFY(openAndLayout(path, &gap));
    qInfo("ONNX graph of EfficientNet-Lite0: event loop blocked at most %lld ms", gap);
    // ~1500 boxes: layout on a pool thread, drawing cheap enough to stay fluid.
    QVERIFY2(gap < tltest::kFreezeMs, qPrintable(QString("the event loop stalled for %1 ms").arg(gap)));
    GraphPane* pane = window_->graphPane();
    tl::OnnxGraphInfo info = tl::inspect_onnx(path.toStdString());
    QCOMPARE(onnxNodeCount(pane->displayGraph()), int(info.nodes.size()));
    QCOMPARE(pane->onnx()->unsupported, 0);
    QVERIFY(pane->onnx()->shapesInferred);
    // The stem: a stride-2 Conv with 32 filters, its output shape inferred.
    int stem = -1;
    for (size_t i = 0; i < info.nodes.size() && stem < 0; ++i)
      if (info.nodes[i].op_type == "Conv") stem = int(i);
    QVERIFY(stem >= 0);
    pane->selectOnnxNode(stem);
    QVERIFY2(pane->detailsText().contains(QString::fromUtf8("float \u27E832\u00D73\u00D73\u00D73\u27E9")),
             qPrintable(pane->detailsText()));
    QVERIFY2(pane->detailsText().contains(QString::fromUtf8("\u27E81\u00D732\u00D7112\u00D7112\u27E9")),
             qPrintable(pane->detailsText()));
    QTRY_VERIFY_WITH_TIMEOUT(!loaded.isEmpty(), 60000);
    QCOMPARE(loaded.last()[0].value<ModelPtr>()->nameOrPath, path);
    // Before any run, the model pane says what a run will cost (issue 47):
    // Lite0 is 0.8 GFLOPs of arithmetic and holds its 18 MB of weights.
    const auto& notes = loaded.last()[0].value<ModelPtr>()->summary.notes;
    const auto cost = std::find_if(notes.begin(), notes.end(), [](const std::string& n) { return n.rfind("a run: ", 0) == 0; });
    QVERIFY(cost != notes.end());
    QVERIFY2(cost->find("FLOPs, at most ") != std::string::npos, cost->c_str());
    size_t unit = 0;
    double gflops = std::stod(cost->substr(7), &unit);
    gflops *= cost->at(7 + unit + 1) == 'M' ? 1e-3 : 1;
    const double mb = std::stod(cost->substr(cost->find("at most ") + 8));
    QVERIFY2(gflops > 0.7 && gflops < 1.0 && mb > 18 && mb < 60, cost->c_str());

    TL_REQUIRE(QFileInfo::exists(kSquirrel), "the squirrel photo (opencv-doc) is missing");
    std::ifstream in(tltest::source_dir() + "/tests/data/models/squirrel_logits.bin", std::ios::binary);
    std::vector<float> golden(1000);
    in.read(reinterpret_cast<char*>(golden.data()), std::streamsize(golden.size() * sizeof(float)));
    QVERIFY(bool(in));
    const int nativeTop = int(std::max_element(golden.begin(), golden.end()) - golden.begin());

    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openFile(kSquirrel);
    QElapsedTimer t;
    t.start();
    while (done.isEmpty() && failed.isEmpty() && t.elapsed() < tltest::kRunTimeoutMs) QTest::qWait(50);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed[0][0].toString()));
    QVERIFY(!done.isEmpty());
    RunPtr run = done[0][0].value<RunPtr>();
    QCOMPARE(run->model, path);
    QCOMPARE(run->top[0].index, nativeTop);
    QCOMPARE(run->top[0].label, std::string("fox squirrel"));
    // The run's op graph arrived, but the file's graph stays on screen.
    QCOMPARE(pane->mode(), GraphPane::OnnxGraph);
    QCOMPARE(onnxNodeCount(pane->displayGraph()), int(info.nodes.size()));
    // Its kernel graph is connected: the model's own Jit replays built no op
    // graph and recorded only reads from outside (weights, the input), so it
    // had no edge; the first run's buffers give every kernel but the first
    // the kernel it reads.
    const DisplayGraph kernels = buildKernelGraph(run->records, run->graph, run->kernelReads);
    std::set<int> fed;
    for (const DisplayEdge& e : kernels.edges) {
      QVERIFY(e.from < e.to);  // from an earlier kernel
      fed.insert(e.to);
    }
    qInfo("kernel graph of the ONNX Lite0: %zu kernels, %zu edges (%zu from the replay's records alone)",
          kernels.nodes.size(), kernels.edges.size(), buildKernelGraph(run->records, run->graph).edges.size());
    QCOMPARE(int(fed.size()), int(run->records.size()) - 1);
    QVERIFY(!fed.count(0));
  }

  void builtinModelHidesOnnxGraph() {
    // The graph the earlier test opened: a failure there is a failure here.
    QVERIFY2(window_->graphPane()->onnx(), "no ONNX graph open");
    TL_REQUIRE(QFileInfo::exists(QString::fromStdString(tl::models_directory() + "/efficientnet-lite0-57934424.pth")),
               "EfficientNet-Lite0 weights not installed (run scripts/setup)");
    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    window_->openModel("efficientnet-lite0");
    QTRY_VERIFY_WITH_TIMEOUT(!loaded.isEmpty(), 60000);
    QCOMPARE(loaded.last()[0].value<ModelPtr>()->nameOrPath, QString("efficientnet-lite0"));
    QVERIFY(!window_->graphPane()->onnx());
    QCOMPARE(window_->graphPane()->mode(), GraphPane::OpGraph);
  }

  // Model after model in one window, as a user explores: ResNet-18 and then
  // GoogLeNet from the zoo (both open with a convolution read only by a 3x3
  // stride-2 max pool, padded differently), each classifying the squirrel.
  // GoogLeNet after ResNet answers as GoogLeNet alone does (compiled kernels
  // and replay plans forgotten, the model opened anew), and ResNet opened
  // again as it did first. Before the cache keys covered the pool's window,
  // the second model ran the first one's kernel and answered wrong, silently.
  void modelAfterModelAnswersAsAlone() {
    const QString zoo = QString::fromStdString(tltest::source_dir() + "/resources/onnx-zoo");
    const QString a = zoo + "/resnet18/model.onnx", b = zoo + "/googlenet/model.onnx";
    TL_REQUIRE(QFileInfo::exists(a) && QFileInfo::exists(b), "the model zoo is missing: run scripts/setup");
    TL_REQUIRE(QFileInfo::exists(kSquirrel), "the squirrel photo (opencv-doc) is missing");
    const RunPtr first_a = classifyWith(a);
    QVERIFY(first_a);
    const RunPtr after_a = classifyWith(b);
    QVERIFY(after_a);
    const RunPtr again_a = classifyWith(a);
    QVERIFY(again_a);
    tl::forget_compiled_kernels();
    qputenv("TINYLENS_NOREPLAY", "1");
    const RunPtr alone_b = classifyWith(b);
    qunsetenv("TINYLENS_NOREPLAY");
    QVERIFY(alone_b);
    auto same = [](const RunPtr& x, const RunPtr& y, const char* what) {
      QCOMPARE(x->logits.size(), size_t(1000));
      QCOMPARE(x->logits.size(), y->logits.size());
      for (size_t i = 0; i < x->logits.size(); ++i)
        QVERIFY2(std::abs(x->logits[i] - y->logits[i]) <= 1e-4f * (1 + std::abs(y->logits[i])),
                 qPrintable(QString("%1: logit %2 is %3, alone %4").arg(what).arg(i).arg(x->logits[i]).arg(y->logits[i])));
    };
    same(after_a, alone_b, "GoogLeNet after ResNet-18");
    same(again_a, first_a, "ResNet-18 after GoogLeNet");
    // Every run of an ONNX model shows its kernels, with times that add up
    // (the kernel table was empty for ONNX models: their executor runs most
    // kernels while it builds the graph).
    for (const RunPtr& run : {first_a, after_a, again_a, alone_b}) {
      QVERIFY2(run->records.size() >= 10, qPrintable(QString("%1 kernels").arg(run->records.size())));
      double sum = 0;
      for (const auto& r : run->records) sum += r.seconds;
      QVERIFY(sum > 0);
      QCOMPARE(run->kernelSeconds, sum);
    }
  }

  void cleanupTestCase() { window_.reset(); }

 private:
  // Opens `model`, then classifies the squirrel with it; the run, or null
  // when it failed or timed out.
  RunPtr classifyWith(const QString& model) {
    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    window_->openFile(model);
    if (!QTest::qWaitFor([&] { return !loaded.isEmpty(); }, 120000)) return nullptr;
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openFile(kSquirrel);
    auto finished = [&]() -> RunPtr {
      for (const auto& r : done) {
        RunPtr run = r[0].value<RunPtr>();
        if (run->model == model && run->imagePath == kSquirrel) return run;
      }
      return nullptr;
    };
    if (!QTest::qWaitFor([&] { return finished() || !failed.isEmpty(); }, tltest::kRunTimeoutMs))
      qWarning("%s gave no result in time", qPrintable(model));
    if (!failed.isEmpty()) qWarning("%s", qPrintable(failed[0][0].toString()));
    return finished();
  }
};

QTEST_MAIN(TestUiOnnx)
#include "test_ui_onnx.moc"
