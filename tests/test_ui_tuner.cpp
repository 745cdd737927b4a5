// Issue 46, item 5: the tuner from the window. Re-tune Model searches every
// kernel of the run again on the Session's worker, with progress; Re-tune
// Kernel searches one kernel and leaves the others' choices; Cancel stops a
// search and keeps every previous choice and result. A tune clock
// (core/tune.h) decides which candidate wins, so the choices are known.
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QImage>
#include <QTimer>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "core/tune.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"
#include "ui/main_window.h"

using namespace tlui;
namespace fs = std::filesystem;

namespace {

// The tuned kernels of a run: index, chosen label, candidates.
struct Tuned {
  size_t record;
  std::string name, chosen;
  std::vector<std::pair<std::string, double>> candidates;
};
std::vector<Tuned> tunedOf(const RunData& run) {
  std::vector<Tuned> out;
  for (size_t i = 0; i < run.records.size(); ++i) {
    const auto& k = *run.records[i].kernel;
    if (!k.tuned.empty()) out.push_back({i, k.name, k.tuned, k.tune_candidates});
  }
  return out;
}

}  // namespace

class TestUiTuner : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_, cache_;
  QString model_, image_;
  RunPtr before_;  // the run after the first re-tune

  // Presses `button` and waits for the run the re-tune ends with.
  RunPtr retune(QPushButton* button, int* progressCalls = nullptr, qint64* maxGap = nullptr) {
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    QSignalSpy progress(window_->session(), &Session::tuneProgress);
    QSignalSpy retuned(window_->session(), &Session::retuned);
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
    if (!button->isEnabled()) return nullptr;
    button->click();
    while (done.isEmpty() && failed.isEmpty() && clock.elapsed() < tltest::kRunTimeoutMs) QTest::qWait(20);
    if (!failed.isEmpty()) qWarning("%s", qPrintable(failed[0][0].toString()));
    if (done.isEmpty() || retuned.isEmpty()) return nullptr;
    if (progressCalls) *progressCalls = int(progress.size());
    if (maxGap) *maxGap = gap;
    (void)QTest::qWaitFor([&] { return !window_->session()->busy(); }, 10000);
    return done[0][0].value<RunPtr>();
  }

 private slots:
  void initTestCase() {
    // The tuner's choices go to the kernel cache: this suite's own.
    qputenv("XDG_CACHE_HOME", cache_.path().toUtf8());
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-tuner");
    QSettings().clear();
    model_ = QString::fromStdString(tltest::two_convs(fs::path(tmp_.path().toStdString()) / "two-convs.onnx"));
    QImage picture(40, 30, QImage::Format_RGB888);
    picture.fill(QColor(120, 60, 200));
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
    window_->openFile(image_);
    QTRY_VERIFY_WITH_TIMEOUT(!done.isEmpty(), tltest::kRunTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(!window_->session()->busy(), 10000);
  }

  // Untuned at first; Re-tune Model searches every kernel with candidates,
  // counting them, and the run after it reads the choices.
  void retuneModelSearchesEveryKernel() {
    TunerPane* pane = window_->tunerPane();
    QCOMPARE(pane->table()->rowCount(), 0);
    QVERIFY2(pane->summaryText().contains("no kernel was tuned"), qPrintable(pane->summaryText()));
    tl::set_tune_clock([](const std::string& label, double) { return label == "default" ? 1e-4 : 2e-4; });
    int progressCalls = 0;
    qint64 gap = 0;
    RunPtr run = retune(pane->retuneModelButton(), &progressCalls, &gap);
    QVERIFY(run);
    const auto tuned = tunedOf(*run);
    QVERIFY2(tuned.size() >= 2, qPrintable(QString::number(tuned.size())));
    for (const auto& t : tuned) {
      QCOMPARE(t.chosen, std::string("default"));
      QVERIFY(t.candidates.size() >= 2);
      for (const auto& [label, seconds] : t.candidates) QCOMPARE(seconds, label == "default" ? 1e-4 : 2e-4);
    }
    // One count of the kernels to search, then one per kernel searched.
    QVERIFY2(progressCalls >= int(tuned.size()) + 1, qPrintable(QString::number(progressCalls)));
    QVERIFY2(gap < tltest::kFreezeMs, qPrintable(QString("the event loop stalled for %1 ms").arg(gap)));
    QVERIFY(pane->table()->rowCount() >= 4);
    QVERIFY2(pane->statusText().startsWith("Re-tuned: " + QString::number(tuned.size()) + " kernels searched"),
             qPrintable(pane->statusText()));
    before_ = run;
  }

  // Re-tune Kernel on the first tuned kernel: a new clock makes another
  // candidate win there; every other kernel keeps its record.
  void retuneOneKernelChangesOnlyIt() {
    QVERIFY(before_);
    TunerPane* pane = window_->tunerPane();
    const auto old = tunedOf(*before_);
    tl::set_tune_clock([](const std::string& label, double) { return label == "default" ? 3e-4 : 1e-4; });
    pane->table()->selectRow(0);  // rows of the first tuned kernel come first
    RunPtr run = retune(pane->retuneKernelButton());
    QVERIFY(run);
    const auto now = tunedOf(*run);
    QCOMPARE(now.size(), old.size());
    QCOMPARE(now[0].name, old[0].name);
    QVERIFY2(now[0].chosen != "default", now[0].chosen.c_str());
    for (const auto& [label, seconds] : now[0].candidates) QCOMPARE(seconds, label == "default" ? 3e-4 : 1e-4);
    for (size_t i = 1; i < now.size(); ++i) {
      QCOMPARE(now[i].name, old[i].name);
      QCOMPARE(now[i].chosen, old[i].chosen);
      QCOMPARE(now[i].candidates, old[i].candidates);
    }
    before_ = run;
  }

  // Cancel during a slow search: the pane says so, the table keeps its run,
  // and a later run reads the choices made before it.
  void cancelKeepsThePreviousChoices() {
    QVERIFY(before_);
    TunerPane* pane = window_->tunerPane();
    const int rows = pane->table()->rowCount();
    std::atomic<int> calls{0};
    tl::set_tune_clock([&calls](const std::string& label, double) {
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return label == "default" ? 1e-5 : 9e-5;  // would choose the default everywhere
    });
    QSignalSpy progress(window_->session(), &Session::tuneProgress);
    QSignalSpy cancelled(window_->session(), &Session::cancelled);
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    pane->retuneModelButton()->click();
    QVERIFY(pane->retuning());
    QTRY_VERIFY_WITH_TIMEOUT(calls.load() > 0, 120000);
    QVERIFY(pane->cancelButton()->isVisible());
    QVERIFY(pane->progressBar()->isVisible());
    // The worker announced the search before timing anything, but the
    // announcement reaches this thread as a queued event.
    QTRY_VERIFY_WITH_TIMEOUT(!progress.isEmpty(), 30000);
    pane->cancelButton()->click();
    QTRY_VERIFY_WITH_TIMEOUT(!cancelled.isEmpty(), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(!window_->session()->busy(), 10000);
    QVERIFY(done.isEmpty());
    QVERIFY(!pane->retuning());
    QVERIFY2(pane->statusText().contains("cancelled"), qPrintable(pane->statusText()));
    QCOMPARE(pane->table()->rowCount(), rows);
    tl::set_tune_clock(nullptr);
    // A run now reads the choices the cancelled search did not replace.
    QSignalSpy again(window_.get(), &MainWindow::runFinished);
    window_->openFile(image_);
    QTRY_VERIFY_WITH_TIMEOUT(!again.isEmpty(), tltest::kRunTimeoutMs);
    const auto old = tunedOf(*before_), now = tunedOf(*again[0][0].value<RunPtr>());
    QCOMPARE(now.size(), old.size());
    for (size_t i = 0; i < now.size(); ++i) {
      QCOMPARE(now[i].chosen, old[i].chosen);
      QCOMPARE(now[i].candidates, old[i].candidates);
    }
  }

  void cleanupTestCase() {
    tl::set_tune_clock(nullptr);
    window_.reset();
  }
};

QTEST_MAIN(TestUiTuner)
#include "test_ui_tuner.moc"
