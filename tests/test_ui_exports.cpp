// The window's File > Export Trace and File > Export Report (issue 46): the
// trace holds the kernels the kernel table shows, with their durations, on
// the device's track; the report is one file that refers to nothing outside
// itself and lists the table's kernels. A tiny ONNX classifier built here
// keeps the run to a few small kernels.
#include <QDockWidget>
#include <QMenuBar>
#include <QTableView>
#include <QTableWidget>
#include <QProcess>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/onnx_builder.h"
#include "tests/testing.h"
#include "ui/main_window.h"

using namespace tlui;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

QString writeClassifier(const fs::path& path) {
  return QString::fromStdString(
      tltest::tiny_classifier(path, [](int i) { return float(std::cos(i * 0.3) * 0.4); }, {0.0f, 0.2f, -0.1f, 0.1f}));
}

QString readText(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

}  // namespace

class TestUiExports : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;
  QString model_;

  QString file(const char* name) const { return tmp_.path() + "/" + name; }

  // Starts an export and waits for its file; false when it failed.
  bool finish(bool started, quint64 job) {
    if (!started) return false;
    QSignalSpy done(window_.get(), &MainWindow::exportFinished);
    return QTest::qWaitFor([&] {
      for (auto& call : done)
        if (call[0].toULongLong() == job) return true;
      return false;
    }, 30000);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-exports");
    QSettings().clear();
    QVERIFY(tmp_.isValid());
    model_ = writeClassifier(fs::path(tmp_.path().toStdString()) / "tiny.onnx");
    window_ = std::make_unique<MainWindow>();
    window_->resize(1280, 800);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTRY_VERIFY_WITH_TIMEOUT(window_->devicePane()->model()->rowCount() > 0, 30000);
  }

  void nothingToExportBeforeARun() {
    QString error;
    QVERIFY(!window_->exportTrace(file("early.json"), &error));
    QVERIFY2(error.contains("classify an image first"), qPrintable(error));
    QVERIFY(!window_->exportReport(file("early.html"), &error));
    QVERIFY(!QFileInfo::exists(file("early.json")) && !QFileInfo::exists(file("early.html")));
    // Both are in the File menu.
    QStringList actions;
    for (QAction* menu : window_->menuBar()->actions())
      if (menu->menu())
        for (QAction* a : menu->menu()->actions()) actions << a->text().remove('&');
    QVERIFY2(actions.contains("Export Trace...") && actions.contains("Export Report..."), qPrintable(actions.join(", ")));
  }

  void exportsTheShownRun() {
    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    window_->openModel(model_);
    QVERIFY(QTest::qWaitFor([&] { return !loaded.isEmpty(); }, 60000));
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    window_->openImage(tltest::kSquirrel);
    QVERIFY(QTest::qWaitFor([&] { return !done.isEmpty(); }, tltest::kRunTimeoutMs));
    QVERIFY(QTest::qWaitFor([&] { return !window_->session()->busy(); }, 10000));
    const RunPtr run = window_->lastRun();
    QVERIFY(run && !run->records.empty() && run->trace);

    // The trace: the table's records are the kernels of one of its warm
    // runs, with the same names, order and durations, on "device cpu".
    QString error;
    quint64 job = 0;
    bool started = window_->exportTrace(file("run.json"), &error, &job);
    QVERIFY2(finish(started, job), qPrintable(error));
    const json trace = json::parse(readText(file("run.json")).toStdString());
    int deviceTrack = -1;
    for (auto& e : trace.at("traceEvents"))
      if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("args").at("name") == "device cpu")
        deviceTrack = e.at("tid").get<int>();
    QVERIFY(deviceTrack > 1);
    std::vector<json> kernels;
    for (auto& e : trace.at("traceEvents"))
      if (e.at("ph") == "X" && e.value("cat", "") == "kernel") kernels.push_back(e);
    bool found = false;
    for (size_t start = 0; !found && start + run->records.size() <= kernels.size(); ++start) {
      bool all = true;
      for (size_t i = 0; all && i < run->records.size(); ++i) {
        const json& e = kernels[start + i];
        all = e.at("name").get<std::string>() == run->records[i].kernel->name &&
              std::fabs(e.at("dur").get<double>() - run->records[i].seconds * 1e6) < 0.0015 &&
              e.at("tid").get<int>() == deviceTrack;
      }
      found = all;
    }
    QVERIFY2(found, "the kernel table's run is not in the trace with its durations");
    QCOMPARE(trace.at("otherData").at("model").get<std::string>(), model_.toStdString());

    // The report: self-contained, the table's kernels listed in order.
    started = window_->exportReport(file("run.html"), &error, &job);
    QVERIFY2(finish(started, job), qPrintable(error));
    const QString html = readText(file("run.html"));
    QVERIFY(html.startsWith("<!DOCTYPE html>"));
    QVERIFY(!html.contains("http:") && !html.contains("https:") && !html.contains("src=") && !html.contains("<script"));
    int at = html.indexOf("<table class=\"kernels\">");
    QVERIFY(at > 0);
    for (const auto& r : run->records) {
      at = html.indexOf("<code>" + QString::fromStdString(r.kernel->name).toHtmlEscaped() + "</code>", at);
      QVERIFY2(at > 0, r.kernel->name.c_str());
    }
    QVERIFY(html.contains("tiny.onnx") && html.contains(QString::fromStdString(run->top[0].label).toHtmlEscaped()));
  }

  // The Memory pane shows the run's values, and a click on one selects the
  // kernel that wrote it in the kernel table.
  void memoryPaneShowsTheRun() {
    const RunPtr run = window_->lastRun();
    QVERIFY(run && run->memory);
    MemoryPane* pane = window_->memoryPane();
    QVERIFY(pane->summaryText().contains("peak") && pane->summaryText().contains("tiny.onnx on cpu"));
    QCOMPARE(size_t(pane->table()->rowCount()), run->memory->values.size());
    QVERIFY(!run->memory->values.empty());
    const size_t last = run->memory->values.size() - 1;
    const int writer = int(run->memory->values[last].writers.front());
    QCOMPARE(pane->table()->item(int(last), 3)->text(),
             QString("%1 %2").arg(writer).arg(QString::fromStdString(run->records[size_t(writer)].kernel->name)));
    const QRect cell = pane->table()->visualItemRect(pane->table()->item(int(last), 0));
    window_->findChild<QDockWidget*>("memoryDock")->raise();
    QTest::qWait(50);
    QTest::mouseClick(pane->table()->viewport(), Qt::LeftButton, {}, cell.center());
    QTRY_COMPARE(window_->kernelPane()->view()->currentIndex().row(), writer);
    QCOMPARE(pane->chart()->launchAt(-5), -1);
  }

  // The Timeline pane draws the run's trace: a row per host phase and one
  // for the device with every kernel; zoom narrows the view; a click on a
  // kernel of the table's run selects that record in the kernel table.
  void timelineShowsTheTrace() {
    const RunPtr run = window_->lastRun();
    QVERIFY(run && run->trace);
    window_->findChild<QDockWidget*>("timelineDock")->raise();
    TimelineView* view = window_->timelinePane()->view();
    QTRY_VERIFY(view->isVisible() && view->width() > 300);
    int deviceRow = -1;
    QStringList labels;
    for (size_t i = 0; i < view->rows().size(); ++i) {
      labels << view->rows()[i].label;
      if (view->rows()[i].label == "device cpu") deviceRow = int(i);
    }
    for (const char* phase : {"cold run", "warm run", "realize", "launch", "download"})
      QVERIFY2(labels.contains(phase), qPrintable(labels.join(", ")));
    QVERIFY(deviceRow >= 0);
    const auto& spans = view->rows()[size_t(deviceRow)].spans;
    QCOMPARE(spans.size(), run->trace->kernels.size());
    const double width = view->viewEnd() - view->viewStart();
    view->zoom(2, view->viewStart() + width / 2);
    QVERIFY(std::fabs((view->viewEnd() - view->viewStart()) - width / 2) < 1e-12);
    view->fit();
    QVERIFY(std::fabs((view->viewEnd() - view->viewStart()) - width) < 1e-12);
    // The table's run inside the trace: its last kernel, clicked.
    const auto& all = run->trace->kernels;
    const size_t n = run->records.size();
    QVERIFY(n >= 2);
    size_t start = all.size();
    for (size_t s = 0; s + n <= all.size() && start == all.size(); ++s) {
      bool same = true;
      for (size_t i = 0; same && i < n; ++i) same = all[s + i].seconds == run->records[i].seconds;
      if (same) start = s;
    }
    QVERIFY(start < all.size());
    const int target = int(start + n - 1);
    int spanIndex = -1;
    for (size_t i = 0; i < spans.size(); ++i)
      if (spans[i].kernel == target) spanIndex = int(i);
    QVERIFY(spanIndex >= 0);
    const auto& s = spans[size_t(spanIndex)];
    view->setView(s.start - s.seconds, s.start + 2 * s.seconds);
    window_->kernelPane()->selectRecord(0);
    const QRectF box = view->spanRect(deviceRow, spanIndex);
    QVERIFY(box.width() > 20);
    QTest::mouseClick(view, Qt::LeftButton, {}, box.center().toPoint());
    QTRY_COMPARE(window_->kernelPane()->view()->currentIndex().row(), int(n - 1));
  }

  // The Tuner pane: the shown (untuned) run says tuning is off; a run whose
  // kernel the tuner chose lists every candidate with its time, the chosen
  // one marked, and a click selects the kernel.
  void tunerPaneListsTheCandidates() {
    TunerPane* pane = window_->tunerPane();
    QVERIFY2(pane->summaryText().contains("no kernel was tuned"), qPrintable(pane->summaryText()));
    QCOMPARE(pane->table()->rowCount(), 0);
    auto run = std::make_shared<RunData>(*window_->lastRun());
    auto info = std::make_shared<tl::KernelInfo>(*run->records.back().kernel);
    info->tuned = "kc=128";
    info->tune_candidates = {{"default", 530e-6}, {"split=cols", 611e-6}, {"kc=128", 412e-6}};
    info->tune_searched = true;
    run->records.back().kernel = info;
    pane->setRun(run);
    QCOMPARE(pane->table()->rowCount(), 3);
    QVERIFY2(pane->summaryText().contains("1 kernels tuned, 1 searched in this run, 0 read from the kernel cache"),
             qPrintable(pane->summaryText()));
    QCOMPARE(pane->table()->item(2, 2)->text(), QString("kc=128"));
    QCOMPARE(pane->table()->item(2, 3)->text(), QString("412.0"));
    QVERIFY(pane->table()->item(2, 5)->text().startsWith("chosen"));
    QVERIFY(pane->table()->item(2, 0)->font().bold() && !pane->table()->item(0, 0)->font().bold());
    QCOMPARE(pane->table()->item(1, 4)->text(), QString("%1x").arg(611.0 / 412.0, 0, 'f', 2));
    QSignalSpy selected(pane, &TunerPane::kernelSelected);
    emit pane->table()->cellClicked(1, 0);
    QCOMPARE(selected.size(), 1);
    QCOMPARE(selected[0][0].toInt(), int(run->records.size() - 1));
    pane->setRun(window_->lastRun());
  }

  void unwritablePathIsAnError() {
    QSignalSpy failed(window_->session(), &Session::failed);
    QString error;
    QVERIFY(window_->exportReport("/nonexistent-folder/r.html", &error));
    QVERIFY(QTest::qWaitFor([&] { return !failed.isEmpty(); }, 30000));
    QCOMPARE(failed[0][1].value<Session::FailureSource>(), Session::FailureSource::Export);
    QVERIFY2(failed[0][2].toString().contains("cannot write the report to /nonexistent-folder/r.html"),
             qPrintable(failed[0][2].toString()));
  }

  // `tinylens MODEL IMAGE --report FILE` writes the report after the first
  // result and exits 0; the run's kernels are in it.
  void headlessReport() {
    const QString out = file("headless.html");
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    p.setProcessEnvironment(env);
    p.start(QCoreApplication::applicationDirPath() + "/../tinylens",
            {"--device", "cpu", model_, tltest::kSquirrel, "--report", out});
    QVERIFY(p.waitForStarted() && p.waitForFinished(tltest::kRunTimeoutMs));
    QCOMPARE(p.exitCode(), 0);
    const QString html = readText(out);
    QVERIFY2(html.contains("<table class=\"kernels\">") && html.contains("tinylens (the window)"), qPrintable(html.left(400)));
    QVERIFY(html.contains("<code>" + QString::fromStdString(window_->lastRun()->records[0].kernel->name) + "</code>"));
    QVERIFY(!html.contains("http:") && !html.contains("src="));
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(TestUiExports)
#include "test_ui_exports.moc"
