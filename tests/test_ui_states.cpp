// The window's state after what goes wrong or stops half-way (issue 45): a
// failed model load returns the status bar to idle, a cancelled run leaves
// every pane labelled with the model and image it shows, a model whose
// output ignores the image says so. Tiny ONNX classifiers built here (an
// 8x8 input, four classes) keep each run to a few small kernels.
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QItemSelectionModel>
#include <QLineEdit>
#include <QMenu>
#include <QDockWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolButton>
#include <QGraphicsItem>
#include <filesystem>
#include <set>

#include "tests/onnx_builder.h"
#include "tests/testing.h"
#include "ui/main_window.h"

using namespace tlui;
namespace fs = std::filesystem;

namespace {

using tltest::kSquirrel;

// The tiny classifier (tests/onnx_builder.h) with stride 2.
template <class Weight>
QString writeClassifier(const fs::path& path, Weight weight, std::vector<float> bias) {
  return QString::fromStdString(tltest::tiny_classifier(path, weight, bias, 2));
}

QString writeFile(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  if (f.open(QIODevice::WriteOnly)) f.write(bytes);
  return path;
}

}  // namespace

class TestUiStates : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;
  QString modelA_, modelB_, constant_, uniform_;

  fs::path dir() const { return fs::path(tmp_.path().toStdString()); }

  // Opens `model` and waits for it; false when it failed.
  bool load(const QString& model) {
    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openModel(model);
    (void)QTest::qWaitFor([&] { return !loaded.isEmpty() || !failed.isEmpty(); }, 60000);
    return !loaded.isEmpty();
  }

  // Classifies the squirrel with the loaded model; the run or null.
  RunPtr classify() {
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openImage(kSquirrel);
    (void)QTest::qWaitFor([&] { return !done.isEmpty() || !failed.isEmpty(); }, tltest::kRunTimeoutMs);
    if (!failed.isEmpty()) qWarning("%s", qPrintable(failed[0][0].toString()));
    (void)QTest::qWaitFor([&] { return !window_->session()->busy(); }, 10000);
    return done.isEmpty() ? nullptr : done[0][0].value<RunPtr>();
  }

  bool idleShown() const { return !window_->progressBar()->isVisible() && !window_->cancelButton()->isVisible(); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-states");
    QSettings().clear();
    modelA_ = writeClassifier(dir() / "tinyA.onnx", [](int i) { return float(std::sin(i * 0.7) * 0.5); },
                              {0.1f, -0.2f, 0.0f, 0.3f});
    modelB_ = writeClassifier(dir() / "tinyB.onnx", [](int i) { return float(std::cos(i * 0.3) * 0.4); },
                              {0.0f, 0.2f, -0.1f, 0.1f});
    // Weights of zeros: the logits are the biases whatever the image.
    constant_ = writeClassifier(dir() / "placeholder.onnx", [](int) { return 0.0f; }, {0.25f, 0.5f, 0.0f, 0.1f});
    // And equal biases: every class scores the same, as with the onnx
    // wheel's light models (ConstantOfShape weights).
    uniform_ = writeClassifier(dir() / "uniform.onnx", [](int) { return 0.0f; }, {0.1f, 0.1f, 0.1f, 0.1f});
    window_ = std::make_unique<MainWindow>();
    window_->resize(1280, 800);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTRY_VERIFY_WITH_TIMEOUT(window_->devicePane()->model()->rowCount() > 0, 30000);
    QVERIFY(QFileInfo::exists(kSquirrel));
  }

  // Issue 45 item 11: with no image there is nothing to re-run or cancel,
  // and the device in use cannot be picked again (all three were enabled).
  void startsWithNothingToRunOrCancel() {
    QVERIFY(window_->rerunAction() && window_->cancelAction());
    QVERIFY(!window_->rerunAction()->isEnabled());
    QVERIFY(!window_->cancelAction()->isEnabled());
    DevicePane* pane = window_->devicePane();
    QCOMPARE(pane->current(), QString("cpu"));
    QCOMPARE(pane->view()->selectionModel()->currentIndex().data(DeviceModel::DeviceNameRole).toString(), QString("cpu"));
    QVERIFY2(!pane->useButton()->isEnabled(), "Use this device is enabled for the device in use");
    const QStringList others = pane->model()->availableNames().filter(QRegularExpression("^(?!cpu$)"));
    if (!others.isEmpty()) {
      pane->view()->selectionModel()->setCurrentIndex(pane->model()->index(pane->model()->rowOf(others[0]), 0),
                                                      QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
      QVERIFY(pane->useButton()->isEnabled());
      pane->setCurrent("cpu");
      QVERIFY(!pane->useButton()->isEnabled());
    }
  }

  // Issue 45 item 6: an empty .pth and a random .onnx each fail with their
  // error shown; the progress bar and Cancel go (they stayed at "0%" until
  // the next success) and the loaded model stays.
  void failedLoadReturnsToIdle() {
    QVERIFY(load(modelA_));
    QTRY_VERIFY(idleShown());
    const QString summary = window_->modelPane()->summaryText();
    QVERIFY(summary.contains("tinyA"));
    const QString empty = writeFile(tmp_.filePath("empty.pth"), {});
    QByteArray noise(4096, '\0');
    for (int i = 0; i < noise.size(); ++i) noise[i] = char((i * 7919 + 13) % 251);
    const QString random = writeFile(tmp_.filePath("random.onnx"), noise);
    for (const QString& bad : {empty, random}) {
      QSignalSpy failed(window_.get(), &MainWindow::runFailed);
      QVERIFY(!load(bad));
      QVERIFY(!failed.isEmpty());
      QVERIFY2(failed[0][0].toString().contains(QFileInfo(bad).fileName()), qPrintable(failed[0][0].toString()));
      QTest::qWait(50);
      QVERIFY2(!window_->progressBar()->isVisible(),
               qPrintable(QString("%1: progress still shows %2").arg(bad, window_->progressBar()->text())));
      QVERIFY2(!window_->cancelButton()->isVisible(), qPrintable(bad));
      QVERIFY2(window_->statusText().contains(QFileInfo(bad).fileName()), qPrintable(window_->statusText()));
      QVERIFY(window_->imagePane()->error().contains(QFileInfo(bad).fileName()));
      QCOMPARE(window_->modelPane()->summaryText(), summary);
      QCOMPARE(window_->modelPane()->modelBox()->currentData().toString(), modelA_);
    }
  }

  // Issue 45 item 7: model A classified the squirrel; model B is opened and
  // its run cancelled. The model pane and the ONNX graph show B (the file
  // opened), the predictions and kernels stay A's run: each pane says whose
  // it is, where before only "Results from cpu" was said.
  void cancelLeavesEveryPaneLabelled() {
    QVERIFY(load(modelA_));
    const RunPtr a = classify();
    QVERIFY(a);
    QCOMPARE(a->model, modelA_);
    QSignalSpy cancelled(window_->session(), &Session::cancelled);
    // Cancelled as soon as the window has started B's run on the squirrel.
    bool running = false;
    auto stop = connect(window_->session(), &Session::modelLoaded, this, [&] {
      running = window_->session()->busy();
      window_->session()->cancel();
    });
    QVERIFY(load(modelB_));
    disconnect(stop);
    QVERIFY(running);
    QTRY_VERIFY_WITH_TIMEOUT(!cancelled.isEmpty(), 60000);
    QTRY_VERIFY(!window_->session()->busy());
    QCOMPARE(window_->lastRun(), a);
    QCOMPARE(window_->modelPane()->modelBox()->currentData().toString(), modelB_);
    GraphPane* graph = window_->graphPane();
    QCOMPARE(graph->mode(), GraphPane::OnnxGraph);
    QCOMPARE(graph->onnx()->path, modelB_);
    QTRY_VERIFY(!graph->layoutPending());
    QVERIFY2(graph->infoText().startsWith("tinyB.onnx: "), qPrintable(graph->infoText()));
    const QString times = window_->imagePane()->timesText();
    QVERIFY2(times.contains("Results from cpu</b>: tinyA.onnx on squirrel_cls.jpg"), qPrintable(times));
    const QString kernels = window_->kernelPane()->totalText();
    QVERIFY2(kernels.startsWith("tinyA.onnx on cpu, squirrel_cls.jpg: "), qPrintable(kernels));
    const QString status = window_->statusText();
    QVERIFY2(status.contains("run of tinyB.onnx on cpu") && status.contains("(tinyA.onnx, squirrel_cls.jpg)"),
             qPrintable(status));
    QVERIFY2(window_->imagePane()->activity().contains("results below are from cpu (tinyA.onnx)"),
             qPrintable(window_->imagePane()->activity()));
    // The op graph of the run shown is A's, and says so.
    graph->setMode(GraphPane::OpGraph);
    QTRY_VERIFY(!graph->layoutPending());
    QVERIFY2(graph->infoText().startsWith("tinyA.onnx on cpu: "), qPrintable(graph->infoText()));
    graph->setMode(GraphPane::OnnxGraph);
  }

  // Issue 45 item 9: the comparison's kernel times are medians of several
  // runs (they came from one run each, so a speed-up like "32.89x" was one
  // run's noise), with their spread; one plain sentence says which device is
  // faster and how well they agree; Esc closes the window.
  void compareTimesMediansAndSaysSo() {
    QStringList devices = window_->devicePane()->model()->availableNames();
    TL_REQUIRE(devices.size() >= 2, "a second device (PoCL, scripts/setup installs it)");
    devices = {"cpu", devices[devices[0] == "cpu" ? 1 : 0]};
    QVERIFY(!window_->currentImage().isEmpty());
    QSignalSpy compared(window_->session(), &Session::compared);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->compareDevices(devices);
    QTRY_VERIFY_WITH_TIMEOUT(!compared.isEmpty() || !failed.isEmpty(), tltest::kRunTimeoutMs);
    QVERIFY2(failed.isEmpty(), qPrintable(failed.isEmpty() ? QString() : failed[0][0].toString()));
    const ComparePtr result = compared[0][0].value<ComparePtr>();
    QCOMPARE(int(result->runs.size()), 2);
    for (const RunPtr& run : result->runs) {
      QCOMPARE(run->model, modelB_);
      QVERIFY(run->warmRuns >= 5);
      QVERIFY(!run->records.empty());
      QCOMPARE(run->kernelSamples.size(), run->records.size());
      for (size_t k = 0; k < run->records.size(); ++k) {
        std::vector<double> samples = run->kernelSamples[k];
        QCOMPARE(int(samples.size()), run->warmRuns);
        std::sort(samples.begin(), samples.end());
        QCOMPARE(run->records[k].seconds, samples[samples.size() / 2]);
      }
    }
    // The table shows each median with its spread, the tooltip the range.
    ComparePane* pane = window_->comparePane();
    CompareKernelModel* kernels = pane->kernelModel();
    const RunData& cpu = *result->runs[0];
    const auto low = *std::min_element(cpu.kernelSamples[0].begin(), cpu.kernelSamples[0].end());
    const QString cell = kernels->index(0, 1).data().toString();
    QVERIFY2(cell.startsWith(QString::number(cpu.records[0].seconds * 1e3, 'f', 3) + QString::fromUtf8(" \u00B1")),
             qPrintable(cell));
    const QString tip = kernels->index(0, 1).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(QString("median of %1 runs").arg(cpu.warmRuns)) &&
                 tip.contains(QString("fastest %1 ms").arg(low * 1e3, 0, 'f', 4)),
             qPrintable(tip));
    // The sentence: which is faster, by the ratio of the median warm runs.
    const QString summary = pane->summary();
    QRegularExpression sentence("^<b>(\\S+) is ([0-9.]+)x faster than (\\S+)</b> on tinyB.onnx \\(median warm run of "
                                "(\\d+) each\\); results (agree to <b>([0-9.e+-]+)</b>|are <b>identical</b>)");
    qInfo("%s", qPrintable(summary));
    const auto m = sentence.match(summary);
    QVERIFY2(m.hasMatch(), qPrintable(summary));
    const RunData& a = *result->runs[0];
    const RunData& b = *result->runs[1];
    const bool cpuFaster = a.warmSeconds <= b.warmSeconds;
    QCOMPARE(m.captured(1), cpuFaster ? a.device : b.device);
    QCOMPARE(m.captured(3), cpuFaster ? b.device : a.device);
    const double ratio = cpuFaster ? b.warmSeconds / a.warmSeconds : a.warmSeconds / b.warmSeconds;
    QVERIFY2(std::abs(m.captured(2).toDouble() - ratio) <= 0.051 * ratio, qPrintable(summary));
    QCOMPARE(m.captured(4).toInt(), a.warmRuns);
    if (result->maxLogitDiff > 0)
      QVERIFY(std::abs(m.captured(6).toDouble() - result->maxLogitDiff) <= 0.05 * result->maxLogitDiff);
    else
      QCOMPARE(m.captured(5), QString("are <b>identical</b>"));
    QVERIFY(result->maxLogitDiff < 1e-3);
    // Esc closes the comparison's window.
    window_->showCompare();
    QVERIFY(QTest::qWaitForWindowExposed(pane));
    QTest::keyClick(pane->kernelTable(), Qt::Key_Escape);
    QTRY_VERIFY(!pane->isVisible());
  }

  // Issue 45 item 11, the small things: the first run says whether it
  // compiled anything, Re-run and Cancel follow the state, the top-8 chart
  // names its kernels, right-click menus copy a prediction, a kernel's
  // source and a node's attributes, exports say where they wrote.
  void smallThingsReadRight() {
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    window_->rerun();  // tinyB on cpu again: every kernel is loaded already
    QVERIFY(window_->cancelAction()->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(!done.isEmpty(), tltest::kRunTimeoutMs);
    QTRY_VERIFY(!window_->session()->busy());
    QVERIFY(!window_->cancelAction()->isEnabled());
    QVERIFY(window_->rerunAction()->isEnabled());
    const RunPtr run = done[0][0].value<RunPtr>();
    QCOMPARE(run->coldNewKernels, 0);
    const QString times = window_->imagePane()->timesText();
    QVERIFY2(times.contains("first run") && times.contains("(no kernel to compile: all loaded already)") &&
                 !times.contains("kernel compiles included"),
             qPrintable(times));

    // The chart's bars: row number and kernel name, slowest first.
    KernelPane* kernels = window_->kernelPane();
    int slowest = 0;
    for (size_t i = 0; i < run->records.size(); ++i)
      if (run->records[i].seconds > run->records[size_t(slowest)].seconds) slowest = int(i);
    QVERIFY(!kernels->chartLabels().isEmpty());
    // A long name is cut in its middle to fit the chart ("#0 GE…16_27"):
    // the label is the whole one, or its two ends around an ellipsis.
    const QString label = kernels->chartLabels()[0],
                  whole = QString("#%1 %2").arg(slowest).arg(QString::fromStdString(run->records[size_t(slowest)].kernel->name));
    const qsizetype cut = label.indexOf(QChar(0x2026));
    QVERIFY2(label == whole || (cut > 0 && whole.startsWith(label.left(cut)) && whole.endsWith(label.mid(cut + 1)) &&
                                label.left(cut).startsWith(QString("#%1").arg(slowest))),
             qPrintable(label + " for " + whole));

    // Right-click menus.
    auto trigger = [](QMenu* menu, const QString& prefix) {
      bool found = false;
      for (QAction* a : menu->actions())
        if (a->text().startsWith(prefix) && a->isEnabled()) {
          a->trigger();
          found = true;
          break;
        }
      delete menu;
      return found;
    };
    QClipboard* clipboard = QApplication::clipboard();
    const QModelIndex top = window_->imagePane()->predictions()->index(0);
    QVERIFY(trigger(window_->imagePane()->bars()->makeContextMenu(QPoint(10, 5)), "Copy \u201C" + top.data().toString()));
    QCOMPARE(clipboard->text(), QString("%1\t%2 %").arg(top.data().toString())
                                    .arg(top.data(PredictionModel::ProbabilityRole).toDouble() * 100, 0, 'f', 1));
    QVERIFY(trigger(window_->imagePane()->bars()->makeContextMenu(QPoint(10, 5)), "Copy All Predictions"));
    QCOMPARE(clipboard->text().split('\n').size(), window_->imagePane()->predictions()->rowCount());
    const QModelIndex row = kernels->proxy()->index(0, 0);
    const int record = kernels->proxy()->mapToSource(row).row();
    QVERIFY(trigger(kernels->makeContextMenu(row), "Copy Kernel Source"));
    QCOMPARE(clipboard->text(), QString::fromStdString(run->records[size_t(record)].kernel->source));
    QVERIFY(trigger(kernels->makeContextMenu(row), "Copy Kernel Name"));
    QCOMPARE(clipboard->text(), QString::fromStdString(run->records[size_t(record)].kernel->name));
    GraphPane* graph = window_->graphPane();
    QCOMPARE(graph->mode(), GraphPane::OnnxGraph);
    QTRY_VERIFY(!graph->layoutPending());
    int conv = -1;
    for (size_t i = 0; i < graph->displayGraph().nodes.size(); ++i)
      if (graph->displayGraph().nodes[i].onnxNode == 0) conv = int(i);
    QVERIFY(conv >= 0);
    QVERIFY(trigger(graph->makeNodeMenu(conv), "Copy Details"));
    QVERIFY2(clipboard->text().startsWith("Conv") && clipboard->text().contains("kernel_shape = [3, 3]"),
             qPrintable(clipboard->text()));

    // Exports say where they wrote.
    QString error;
    const QString png = tmp_.filePath("graph.png"), csv = tmp_.filePath("kernels.csv");
    QVERIFY2(window_->exportGraph(png, &error), qPrintable(error));
    QCOMPARE(window_->statusText(), QString("Exported the ONNX graph to %1").arg(png));
    QVERIFY2(window_->exportKernelsCsv(csv, &error), qPrintable(error));
    QCOMPARE(window_->statusText(), QString("Exported %1 kernels to %2").arg(run->records.size()).arg(csv));
  }

  // Issue 45 item 5: the kernel graph shows which kernel's output feeds
  // which, laid out top to bottom. A replayed realize records only what it
  // reads from outside (the input, the weights), so a whole Lite0 run, one
  // realize, drew "53 nodes, 0 edges"; the run's op graph has the rest.
  void kernelGraphHasEdges() {
    auto run = std::make_shared<RunData>();
    run->device = "cpu";
    run->model = "chain";
    auto node = [&](uint64_t id, const char* op, std::vector<uint64_t> inputs, bool realized = false) {
      tl::GraphNode n;
      n.id = id;
      n.op = op;
      n.shape = {1, 8};
      n.inputs = std::move(inputs);
      n.realized = realized;
      run->graph.push_back(n);
    };
    node(1, "BUFFER", {}, true);  // the image
    node(2, "BUFFER", {}, true);  // weights
    node(3, "CONV", {1, 2});
    node(4, "RELU", {3});
    node(5, "MUL", {4, 2});
    node(6, "SUM", {5});
    node(7, "ADD", {6, 3});
    auto kernel = [&](const char* name, std::vector<uint64_t> fused, std::vector<uint64_t> reads) {
      auto k = std::make_shared<tl::KernelInfo>();
      k->name = name;
      k->node_ids = fused;
      k->output_node = fused.back();
      k->input_nodes = std::move(reads);
      tl::ProfileRecord r;
      r.kernel = k;
      r.seconds = 1e-3;
      r.replayed = true;
      run->records.push_back(r);
    };
    kernel("GEMM_conv", {3}, {1, 2});
    kernel("E_relu_mul", {4, 5}, {2});
    kernel("R_sum", {6}, {});
    kernel("E_add", {7}, {});
    GraphPane* graph = window_->graphPane();
    graph->setMode(GraphPane::KernelGraph);
    graph->setRun(run);
    QTRY_VERIFY(!graph->layoutPending());
    const DisplayGraph& g = graph->displayGraph();
    QCOMPARE(g.nodes.size(), size_t(4));
    std::set<std::pair<int, int>> edges;
    for (const DisplayEdge& e : g.edges) edges.insert({e.from, e.to});
    QCOMPARE(edges, (std::set<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 3}, {0, 3}}));
    QCOMPARE(graph->infoText(), QString("chain on cpu: 4 nodes, 4 edges"));
    // Layered downwards: each edge points down the page.
    std::map<int, double> y;
    for (QGraphicsItem* item : graph->scene()->items())
      if (item->data(0).isValid()) y[item->data(0).toInt()] = item->sceneBoundingRect().center().y();
    for (const auto& [from, to] : edges) QVERIFY(y[to] > y[from]);
    graph->setRun(window_->lastRun());
    graph->setMode(GraphPane::OnnxGraph);
    QTRY_VERIFY(!graph->layoutPending());
  }

  // Issue 45 item 10: graph navigation on a tall chain of 40 blocks at
  // 1280x800. Fit shows it whole with labels still readable; a double-click
  // expands a block and shows it at a readable scale (it re-fitted the whole
  // graph into a sliver) with details saying how to collapse it; search
  // centres its match and says "match n of m"; Ctrl+= / Ctrl+- zoom and
  // Ctrl+F goes to the search box; the colours have a legend and a choice.
  void graphNavigation() {
    auto run = std::make_shared<RunData>();
    run->device = "cpu";
    run->model = "chain";
    uint64_t id = 1;
    tl::GraphNode input;
    input.id = id++;
    input.op = "BUFFER";
    input.realized = true;
    run->graph.push_back(input);
    for (int b = 0; b < 40; ++b)
      for (const char* op : {"ADD", "MUL", "RELU"}) {
        tl::GraphNode n;
        n.id = id;
        n.op = op;
        n.scope = "blocks." + std::to_string(b) + "." + op;
        n.inputs = {id - 1};
        run->graph.push_back(n);
        auto k = std::make_shared<tl::KernelInfo>();
        k->name = "E_" + std::to_string(id);
        k->node_ids = {id};
        k->output_node = id;
        k->flops = double(b + 1) * 1e6;  // the last block does the most arithmetic
        tl::ProfileRecord r;
        r.kernel = k;
        r.seconds = 1e-3 * (b == 3 ? 10 : 1);  // block 3 is the slowest
        run->records.push_back(r);
        ++id;
      }
    GraphPane* graph = window_->graphPane();
    GraphView* view = graph->view();
    graph->setMode(GraphPane::OpGraph);
    graph->setRun(run);
    QTRY_VERIFY(!graph->layoutPending());
    QTest::qWait(20);
    QVERIFY(view->fitted());
    const double fitted = view->transform().m11();
    QVERIFY2(fitted < 0.5, qPrintable(QString::number(fitted)));  // tall: small when whole
    const int fontPixels = QFontInfo(graph->scene()->font()).pixelSize();
    QVERIFY(GraphPane::labelPixels(fontPixels, fitted) >= GraphPane::kMinLabelPixels);

    // A double-click on block 7 expands it and shows its nodes readably.
    int block = -1;
    for (size_t i = 0; i < graph->displayGraph().nodes.size(); ++i)
      if (graph->displayGraph().nodes[i].groupKey == "blocks.7") block = int(i);
    QVERIFY(block >= 0);
    QGraphicsItem* box = nullptr;
    for (QGraphicsItem* item : graph->scene()->items())
      if (item->data(0).isValid() && item->data(0).toInt() == block) box = item;
    QVERIFY(box);
    view->centerOn(box);
    QTest::mouseDClick(view->viewport(), Qt::LeftButton, Qt::NoModifier,
                       view->mapFromScene(box->sceneBoundingRect().center()));
    QTRY_VERIFY(!graph->layoutPending());
    QCOMPARE(graph->modeText(), QString("Op graph (1 block expanded)"));
    QVERIFY2(view->transform().m11() >= 0.9, qPrintable(QString::number(view->transform().m11())));
    QRectF expanded;
    for (QGraphicsItem* item : graph->scene()->items())
      if (item->data(0).isValid() && graph->displayGraph().nodes[size_t(item->data(0).toInt())].groupKey == "blocks.7")
        expanded = expanded.united(item->sceneBoundingRect());
    const QRect shown = view->mapFromScene(expanded).boundingRect();
    QVERIFY2(view->viewport()->rect().intersects(shown), "the expanded block is out of view");
    QVERIFY2(graph->detailsText().contains("double-click any of them to collapse"), qPrintable(graph->detailsText()));
    QVERIFY(!graph->detailsText().contains("Double-click the block to expand it"));

    // Search: centred, readable, counted.
    graph->fit();
    QVERIFY(graph->search("blocks.2"));  // blocks.2 and blocks.20 to blocks.29
    QCOMPARE(graph->infoText(), QString("match 1 of 11"));
    QVERIFY(view->transform().m11() >= 1.0);
    QGraphicsItem* hit = graph->scene()->selectedItems().value(0);
    QVERIFY(hit);
    const QPoint centre = view->mapFromScene(hit->sceneBoundingRect().center());
    QVERIFY2((centre - view->viewport()->rect().center()).manhattanLength() < 40,
             qPrintable(QString("%1,%2").arg(centre.x()).arg(centre.y())));
    QVERIFY(graph->search("blocks.2"));
    QCOMPARE(graph->infoText(), QString("match 2 of 11"));

    // Keys, through the window's menus.
    QApplication::setActiveWindow(window_.get());
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    graph->view()->setFocus();
    QTRY_VERIFY(graph->view()->hasFocus());
    const double before = view->transform().m11();
    QTest::keyClick(window_.get(), Qt::Key_Equal, Qt::ControlModifier);
    QVERIFY2(std::abs(view->transform().m11() - before * 1.25) < 1e-6, qPrintable(QString::number(view->transform().m11())));
    QTest::keyClick(window_.get(), Qt::Key_Minus, Qt::ControlModifier);
    QVERIFY(std::abs(view->transform().m11() - before) < 1e-6);
    QTest::keyClick(window_.get(), Qt::Key_F, Qt::ControlModifier);
    QTRY_VERIFY(graph->searchEdit()->hasFocus());

    // The colours: a legend in the metric's unit, and a choice of metric.
    QVERIFY2(graph->legendText().contains("30 ms (the largest box)"), qPrintable(graph->legendText()));
    graph->setMetric(GraphPane::ByFlops);
    QVERIFY2(graph->legendText().contains(QString("%1 MFLOP (the largest box)").arg(3 * 40)), qPrintable(graph->legendText()));
    int last = -1;
    for (size_t i = 0; i < graph->displayGraph().nodes.size(); ++i)
      if (graph->displayGraph().nodes[i].groupKey == "blocks.39") last = int(i);
    QCOMPARE(graph->metricValue(last), 3.0 * 40);
    graph->setMetric(GraphPane::ByTime);
    graph->setRun(window_->lastRun());
    graph->setMode(GraphPane::OnnxGraph);
    QTRY_VERIFY(!graph->layoutPending());
  }

  // Issue 45 item 11: "1 diagnostic", and a build log that names the
  // kernel, not the temporary file PoCL compiled it from.
  void buildLogsReadRight() {
    QSignalSpy shown(window_.get(), &MainWindow::warningKernelShown);
    window_->buildWarningKernel();  // on cpu
    QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty(), 120000);
    SourcePane* source = window_->sourcePane();
    const int n = int(source->diagnostics().size());
    QVERIFY(n >= 1);
    QVERIFY2(window_->statusText().contains(n == 1 ? QString("1 diagnostic;") : QString("%1 diagnostics;").arg(n)),
             qPrintable(window_->statusText()));

    const QString pocl = "warning: /root/.cache/pocl/kcache/tempfile_Wm62kL.cl:3:15: implicit conversion from "
                         "'double' to 'int' changes value from 2.5 to 2\n";
    source->setKernel("#3 r_16_4 (opencl:0:0)", "__kernel void r_16_4(__global float* out) {\n\n  int s = 2.5;\n}\n",
                      pocl, ".cl");
    QVERIFY2(source->buildLog().startsWith("warning: r_16_4.cl:3:15: implicit conversion"), qPrintable(source->buildLog()));
    QCOMPARE(int(source->diagnostics().size()), 1);
    QCOMPARE(source->diagnostics()[0].line, 3);

    QString opencl;
    for (const QString& name : window_->devicePane()->model()->availableNames())
      if (name.startsWith("opencl") && opencl.isEmpty()) opencl = name;
    if (opencl.isEmpty()) return;
    shown.clear();
    window_->session()->buildWarningKernel(opencl);
    QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty(), 120000);
    qInfo("%s build log:\n%s", qPrintable(opencl), qPrintable(source->buildLog()));
    QVERIFY2(!source->buildLog().contains("tempfile_"), qPrintable(source->buildLog()));
    if (!source->diagnostics().empty())
      QVERIFY2(source->buildLog().contains("tl_known_warning.cl:"), qPrintable(source->buildLog()));
  }

  // Issue 45 item 2: a model whose output ignores the image says so, in
  // the predictions and the model pane (every class scored 25% with no
  // word); found from the outputs (a changed copy of the image gives the
  // same logits), not from the file's name. A sound model says nothing.
  void placeholderWeightsAreSaid() {
    for (const QString& model : {constant_, uniform_}) {
      QVERIFY(load(model));
      const RunPtr run = classify();
      QVERIFY(run);
      QCOMPARE(run->model, model);
      QVERIFY2(run->outputIgnoresImage, qPrintable(model));
      QCOMPARE(run->uniformLogits, model == uniform_);
      const QString warning = window_->imagePane()->warning();
      QVERIFY2(warning.startsWith("The outputs do not depend on the image") &&
                   warning.contains("weights look like placeholders"),
               qPrintable(warning));
      QCOMPARE(warning.contains("every class scores the same"), model == uniform_);
      QVERIFY2(window_->modelPane()->summaryText().contains("The outputs do not depend on the image"),
               qPrintable(window_->modelPane()->summaryText()));
    }
    QCOMPARE(window_->imagePane()->predictions()->index(0).data(PredictionModel::ProbabilityRole).toDouble(), 0.25);
    QVERIFY(load(modelA_));
    const RunPtr sound = classify();
    QVERIFY(sound);
    QVERIFY(!sound->outputIgnoresImage && !sound->uniformLogits);
    QVERIFY(window_->imagePane()->warning().isEmpty());
    QVERIFY(!window_->modelPane()->summaryText().contains("do not depend"));
  }

  void cleanupTestCase() {
    window_.reset();
    QSettings().clear();
  }
};

QTEST_MAIN(TestUiStates)
#include "test_ui_states.moc"
