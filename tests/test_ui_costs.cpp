// Issue 46, item 4: the costs of a run on the ONNX file's own graph. Each
// kernel of the run maps back to the ONNX nodes it was made for
// (KernelInfo::origins); each node's box shows its outputs' shapes in the
// run (a dynamic batch as it was), its time, FLOPs and bytes, and is
// coloured by the metric the graph pane's combo picks, with its legend.
#include <QSignalSpy>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QImage>
#include <cmath>
#include <filesystem>

#include "core/io/onnx.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"
#include "ui/main_window.h"
#include "ui/onnx_graph.h"

using namespace tlui;
namespace fs = std::filesystem;

namespace {

int boxOf(const DisplayGraph& g, int onnxNode) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].onnxNode == onnxNode) return int(i);
  return -1;
}

QString shape(std::initializer_list<const char*> dims) {
  QStringList d;
  for (const char* x : dims) d << x;
  return QString(QChar(0x27E8)) + d.join(QChar(0x00D7)) + QChar(0x27E9);
}

}  // namespace

class TestUiCosts : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;
  QString model_, image_;
  RunPtr run_;

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-costs");
    QSettings().clear();
    model_ = QString::fromStdString(tltest::two_convs(fs::path(tmp_.path().toStdString()) / "dynamic.onnx", "batch", true));
    QImage picture(40, 30, QImage::Format_RGB888);
    for (int y = 0; y < picture.height(); ++y)
      for (int x = 0; x < picture.width(); ++x) picture.setPixelColor(x, y, QColor((x * 9) % 256, (y * 7) % 256, 90));
    image_ = tmp_.filePath("picture.png");
    QVERIFY(picture.save(image_));
    window_ = std::make_unique<MainWindow>();
    window_->resize(1280, 800);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));

    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    window_->openFile(model_);
    QTRY_VERIFY_WITH_TIMEOUT(!loaded.isEmpty(), 60000);
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openFile(image_);
    QTRY_VERIFY_WITH_TIMEOUT(!done.isEmpty() || !failed.isEmpty(), tltest::kRunTimeoutMs);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed[0][0].toString()));
    run_ = done[0][0].value<RunPtr>();
    QCOMPARE(run_->model, model_);
    GraphPane* pane = window_->graphPane();
    pane->setMode(GraphPane::OnnxGraph);
    QTRY_VERIFY_WITH_TIMEOUT(!pane->layoutPending(), 60000);
  }

  // Every kernel of the run comes from nodes of the file; the first
  // convolution's kernel, with its Relu fused into its store, from both,
  // the convolution taking nearly all of its work.
  void eachKernelMapsToItsNodes() {
    const tl::OnnxGraphInfo& info = window_->graphPane()->onnx()->info;
    QCOMPARE(int(info.nodes.size()), 6);
    QVERIFY(!run_->records.empty());
    bool convWithRelu = false;
    for (const auto& r : run_->records) {
      const auto& origins = r.kernel->origins;
      QVERIFY2(!origins.empty(), r.kernel->name.c_str());
      double sum = 0;
      for (const auto& o : origins) {
        QVERIFY2(o.node >= 0 && o.node < 6, r.kernel->name.c_str());
        sum += o.share;
      }
      QVERIFY(std::fabs(sum - 1.0) < 1e-5);
      if (origins.size() == 2 && origins[0].node == 0 && origins[1].node == 1) {
        convWithRelu = true;
        // 2*8*27*64 FLOPs of product against 8*64 of Relu.
        QVERIFY2(origins[0].share > 0.95 && origins[1].share > 0, r.kernel->name.c_str());
      }
    }
    QVERIFY2(convWithRelu, "no kernel maps to both the Conv and its Relu");
  }

  // The nodes' times sum to the kernels' (nothing falls outside the file's
  // nodes here), and the boxes show them.
  void nodeTimesSumToKernelTimes() {
    GraphPane* pane = window_->graphPane();
    const DisplayGraph& g = pane->displayGraph();
    const OnnxRunCosts costs = onnxRunCosts(pane->onnx()->info, run_->records);
    double nodes = 0, boxes = 0;
    for (const auto& c : costs.nodes) nodes += c.seconds;
    for (const auto& d : g.nodes) {
      if (d.onnxNode < 0) continue;
      QVERIFY(d.costed);
      boxes += d.seconds;
    }
    QVERIFY(run_->kernelSeconds > 0);
    QVERIFY2(std::fabs(nodes - run_->kernelSeconds) <= 1e-6 * run_->kernelSeconds,
             qPrintable(QString("%1 vs %2").arg(nodes).arg(run_->kernelSeconds)));
    QVERIFY(std::fabs(boxes - nodes) <= 1e-9 * nodes);
    QVERIFY(costs.outsideSeconds <= 1e-6 * run_->kernelSeconds);
    // The first convolution did the most arithmetic: its box has the most FLOPs.
    const int conv = boxOf(g, 0);
    QVERIFY(conv >= 0);
    QVERIFY(g.nodes[size_t(conv)].flops > 0);
    for (const auto& d : g.nodes) QVERIFY(d.flops <= g.nodes[size_t(conv)].flops);
    QVERIFY2(g.nodes[size_t(conv)].label.contains(" ms, "), qPrintable(g.nodes[size_t(conv)].label));
  }

  // A dynamic batch shows the size it had in the run.
  void shapesOfTheRun() {
    const DisplayGraph& g = window_->graphPane()->displayGraph();
    QCOMPARE(run_->valueShapes.at("y1"), (tl::Shape{1, 8, 8, 8}));
    QCOMPARE(run_->valueShapes.at("out"), (tl::Shape{1, 4}));
    const QString conv = g.nodes[size_t(boxOf(g, 0))].label;
    QVERIFY2(conv.contains(QString::fromUtf8("\u2192 ") + shape({"1", "8", "8", "8"})), qPrintable(conv));
    bool input = false, output = false;
    for (const auto& d : g.nodes) {
      input = input || (d.label.startsWith("input") && d.label.contains(shape({"1", "3", "8", "8"}) + " (" +
                                                                        shape({"batch", "3", "8", "8"}) + ")"));
      output = output || (d.label.startsWith("output") && d.label.contains(shape({"1", "4"})));
    }
    QVERIFY(input);
    QVERIFY(output);
    // The details of the convolution say it, with the kernel it became.
    GraphPane* pane = window_->graphPane();
    pane->selectOnnxNode(0);
    const QString details = pane->detailsText();
    QVERIFY2(details.contains("In the run") && details.contains(shape({"1", "8", "8", "8"})), qPrintable(details));
    QVERIFY2(details.contains("GEMM"), qPrintable(details));
  }

  // The combo colours the file's boxes by time, FLOPs or bytes, with the
  // same legend as the op graph's.
  void metricColoursTheNodes() {
    GraphPane* pane = window_->graphPane();
    const DisplayGraph& g = pane->displayGraph();
    const int conv = boxOf(g, 0);
    pane->setMetric(GraphPane::ByFlops);
    QVERIFY2(pane->legendText().contains("MFLOP"), qPrintable(pane->legendText()));
    QCOMPARE(pane->metricValue(conv), g.nodes[size_t(conv)].flops * 1e-6);
    pane->setMetric(GraphPane::ByBytes);
    QVERIFY2(pane->legendText().contains("MB"), qPrintable(pane->legendText()));
    QVERIFY(pane->metricValue(conv) > 0);
    pane->setMetric(GraphPane::ByTime);
    QVERIFY2(pane->legendText().contains("ms"), qPrintable(pane->legendText()));
    QCOMPARE(pane->metricValue(conv), g.nodes[size_t(conv)].seconds * 1e3);
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(TestUiCosts)
#include "test_ui_costs.moc"
