// Issue 45 item 3, "Progress is not progress": on PoCL with empty caches the
// window said "Compiling kernels ... 50/50" after 1 s, sat there for 9 s
// while PoCL compiled each kernel at its first launch, then reported 75 new
// kernels; the first training step compiled for 14 s with no progress and no
// Cancel. Here, on PoCL with empty kernel caches (ours and PoCL's, set
// before PoCL starts): a classify's progress counts every kernel of its cold
// run and reaches its total only when PoCL has built them all, and the first
// training step shows its progress and can be cancelled, leaving the model
// as it was. Tiny models keep it to a few seconds.
#include <QComboBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <filesystem>
#include <set>

#include "core/data/dataset.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"
#include "ui/main_window.h"

using namespace tlui;
namespace fs = std::filesystem;

namespace {

const QString kPocl = "opencl:0:0";  // PoCL's CPU device, as CI has it
constexpr int kTimeoutMs = 5 * 60 * 1000;

bool waitFor(QSignalSpy& spy, int count = 1) {
  return QTest::qWaitFor([&] { return spy.count() >= count; }, kTimeoutMs);
}

// x (1,3,8,8) -> Conv 3x3 -> Relu -> Conv 3x3 stride 2 -> Relu ->
// GlobalAveragePool -> Flatten -> 150 elementwise nodes -> (1, 4). The
// chain is deeper than the ONNX executor keeps lazy (kMaxLazyDepth), so the
// model realizes in pieces, as a large model does.
QString writeClassifier(const fs::path& path) {
  tltest::Builder b;
  b.input("x", {"1", "3", "8", "8"});
  b.output("out", {"1", "4"});
  auto* c1 = b.node("Conv", {"x", "W1", "B1"}, {"y1"});
  tltest::ints_attr(c1, "kernel_shape", {3, 3});
  tltest::ints_attr(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"y1"}, {"r1"});
  auto* c2 = b.node("Conv", {"r1", "W2", "B2"}, {"y2"});
  tltest::ints_attr(c2, "kernel_shape", {3, 3});
  tltest::ints_attr(c2, "pads", {1, 1, 1, 1});
  tltest::ints_attr(c2, "strides", {2, 2});
  b.node("Relu", {"y2"}, {"r2"});
  b.node("GlobalAveragePool", {"r2"}, {"p"});
  b.node("Flatten", {"p"}, {"v0"});
  constexpr int kChain = 150;
  for (int i = 0; i < kChain; ++i)
    b.node(i % 2 ? "Mul" : "Add", {"v" + std::to_string(i), i % 2 ? "half" : "one"},
           {i == kChain - 1 ? std::string("out") : "v" + std::to_string(i + 1)});
  b.init("one", {1}, onnx::TensorProto::FLOAT)->add_float_data(1.0f);
  b.init("half", {1}, onnx::TensorProto::FLOAT)->add_float_data(0.5f);
  auto* W1 = b.init("W1", {6, 3, 3, 3}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 6 * 27; ++i) W1->add_float_data(float(std::sin(i * 0.37) * 0.4));
  auto* B1 = b.init("B1", {6}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 6; ++i) B1->add_float_data(0.05f * float(i - 2));
  auto* W2 = b.init("W2", {4, 6, 3, 3}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4 * 54; ++i) W2->add_float_data(float(std::cos(i * 0.23) * 0.3));
  auto* B2 = b.init("B2", {4}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) B2->add_float_data(0.1f * float(i) - 0.1f);
  return QString::fromStdString(b.save(path));
}

// Files in PoCL's own kernel cache: it writes each kernel's machine code
// there when it compiles it, at the kernel's first launch.
size_t poclFiles() {
  std::error_code ec;
  size_t n = 0;
  for (fs::recursive_directory_iterator it(fs::path(qgetenv("POCL_CACHE_DIR").toStdString()), ec), end;
       !ec && it != end; it.increment(ec))
    n += it->is_regular_file(ec);
  return n;
}

struct Report {
  int ready, total;
  size_t poclFiles;  // when the window heard it
};

// ready never above total, neither ever going down.
QString checkCounts(const std::vector<Report>& reports) {
  for (size_t i = 0; i < reports.size(); ++i) {
    const Report& r = reports[i];
    if (r.ready < 0 || r.ready > r.total) return QString("report %1 says %2/%3").arg(i).arg(r.ready).arg(r.total);
    if (i > 0 && (r.ready < reports[i - 1].ready || r.total < reports[i - 1].total))
      return QString("report %1 says %2/%3 after %4/%5")
          .arg(i).arg(r.ready).arg(r.total).arg(reports[i - 1].ready).arg(reports[i - 1].total);
  }
  return {};
}

}  // namespace

class TestUiProgress : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    // Empty caches, as on a first start; PoCL reads its folder when it starts.
    qputenv("XDG_CACHE_HOME", (tmp_.path() + "/cache").toUtf8());
    qputenv("POCL_CACHE_DIR", (tmp_.path() + "/pocl").toUtf8());
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-progress");
    QSettings().clear();
    window_ = std::make_unique<MainWindow>();
    window_->resize(1280, 800);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTRY_VERIFY_WITH_TIMEOUT(window_->devicePane()->model()->rowCount() > 0, 30000);
    const bool pocl = window_->devicePane()->model()->availableNames().contains(kPocl) &&
                      tl::Registry::instance().get_available(kPocl.toStdString()).builds_at_first_launch();
    TL_REQUIRE(pocl, "PoCL's OpenCL device as opencl:0:0");
    QVERIFY(QFileInfo::exists(tltest::kSquirrel));
  }

  // The cold run realizes the model in pieces: all pieces' kernels are
  // counted in one total, the one the result reports, and the last report
  // comes when PoCL has built every kernel (its cache gains nothing after
  // it). Before, each piece counted from 0 of its own kernels, and each
  // reached its total before PoCL had compiled any of its kernels' code.
  void classifyCountsEveryKernelUntilItRuns() {
    QSignalSpy loaded(window_->session(), &Session::modelLoaded);
    window_->openModel(writeClassifier(fs::path(tmp_.path().toStdString()) / "two-conv.onnx"));
    QVERIFY(waitFor(loaded));
    window_->setDevice(kPocl);
    std::vector<Report> reports;
    auto heard = connect(window_->session(), &Session::compileProgress, this,
                         [&](quint64, const QString&, int ready, int total) {
                           reports.push_back({ready, total, poclFiles()});
                         });
    const size_t before = poclFiles();
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    window_->openImage(tltest::kSquirrel);
    QVERIFY(QTest::qWaitFor([&] { return !done.isEmpty() || !failed.isEmpty(); }, kTimeoutMs));
    disconnect(heard);
    QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed[0][0].toString()));
    RunPtr run = done[0][0].value<RunPtr>();
    QCOMPARE(run->device, kPocl);

    QVERIFY2(!reports.empty(), "a cold run on PoCL reported no compile progress");
    const QString bad = checkCounts(reports);
    QVERIFY2(bad.isEmpty(), qPrintable(bad));
    const Report& last = reports.back();
    qInfo("%zu reports, the last %d/%d; PoCL's cache: %zu files before, %zu at the last report, %zu after",
          reports.size(), last.ready, last.total, before, last.poclFiles, poclFiles());
    QCOMPARE(last.total, run->coldNewKernels);  // every realize of the run
    QCOMPARE(last.ready, last.total);
    QVERIFY2(reports.front().total < last.total, "the pieces' kernels were counted apart, or the model had one piece");
    QVERIFY(last.poclFiles > before);
    QCOMPARE(poclFiles(), last.poclFiles);  // PoCL built nothing after the progress said done
    // The status line counts launches, and the kernels they share, so its
    // number and the progress's total can be told apart.
    std::set<std::string> sources;
    for (const auto& r : run->records) sources.insert(r.kernel->source);
    qInfo("the run: %zu launches of %zu kernels", run->records.size(), sources.size());
    QVERIFY2(window_->statusText().endsWith(MainWindow::kernelCountText(*run)), qPrintable(window_->statusText()));
    RunData shared = *run;
    shared.records.push_back(run->records.front());
    QCOMPARE(MainWindow::kernelCountText(shared),
             QString("%1 kernel launches of %2 kernels").arg(run->records.size() + 1).arg(sources.size()));
  }

  // The first step of a fresh model compiles its kernels: the training page
  // shows how far, with a Cancel that abandons the step. Nothing of it is
  // applied: the next step is the one that was cancelled, and its loss is
  // the first step of a fresh model with the same seed. Before, the step
  // reported nothing and only closing the window could stop it.
  void firstTrainingStepShowsProgressAndCancels() {
    TL_REQUIRE(fs::exists(tl::data::default_digits_path()), "opencv-doc's digits.png is not installed");
    TrainingPane* page = window_->trainingPane();
    QComboBox* model = page->settingsForm()->modelBox();
    model->setCurrentIndex(model->findData("mlp"));
    page->seedBox()->setValue(5);
    page->setDevice(kPocl);
    auto resetAndWait = [&] {
      QSignalSpy ready(page, &TrainingPane::setupReady);
      page->reset();
      return waitFor(ready);
    };
    QVERIFY(resetAndWait());

    std::vector<Report> reports;
    bool buttonShown = false, cancellable = false;
    auto heard = connect(window_->session(), &Session::trainCompileProgress, this,
                         [&](quint64, const QString& device, int ready, int total, bool canCancel) {
                           QCOMPARE(device, kPocl);
                           reports.push_back({ready, total, 0});
                           cancellable = canCancel;
                           if (reports.size() > 1) return;
                           // The page heard it first (connected when it was built).
                           buttonShown = page->cancelButton()->isVisible() && page->compileBar()->isVisible();
                           QTest::mouseClick(page->cancelButton(), Qt::LeftButton);
                         });
    QSignalSpy cancelled(page, &TrainingPane::stepCancelled);
    QSignalSpy stopped(page, &TrainingPane::runStopped);
    page->step();
    QVERIFY(waitFor(stopped));
    disconnect(heard);
    QVERIFY2(!reports.empty(), "the first step reported no compile progress");
    QCOMPARE(reports.front().ready, 0);
    QVERIFY(reports.front().total > 0);
    QVERIFY(cancellable);
    QVERIFY(buttonShown);
    QCOMPARE(cancelled.count(), 1);
    QCOMPARE(page->steps(), 0);
    QVERIFY2(page->statusText().contains("Cancelled"), qPrintable(page->statusText()));
    QVERIFY(!page->compileBar()->isVisible() && !page->cancelButton()->isVisible());

    QSignalSpy steps(page, &TrainingPane::stepped);
    page->step();
    QVERIFY(waitFor(steps));
    const double afterCancel = steps[0][1].toDouble();
    QCOMPARE(page->steps(), 1);
    QVERIFY(resetAndWait());
    page->step();
    QVERIFY(waitFor(steps, 2));
    QCOMPARE(steps[1][1].toDouble(), afterCancel);  // the same batch, weights and optimizer
    QVERIFY(std::isfinite(afterCancel) && afterCancel > 0);
  }

  // A step that compiles and is not cancelled counts every new kernel to
  // the end: the last report is total/total, heard before the step's result.
  void trainingStepProgressReachesItsTotal() {
    TrainingPane* page = window_->trainingPane();
    page->settingsForm()->batchBox()->setValue(24);  // new shapes: new kernels
    QSignalSpy ready(page, &TrainingPane::setupReady);
    page->reset();
    QVERIFY(waitFor(ready));
    std::vector<Report> reports;
    int heardBeforeStep = -1;
    auto heard = connect(window_->session(), &Session::trainCompileProgress, this,
                         [&](quint64, const QString&, int r, int total, bool) { reports.push_back({r, total, 0}); });
    QSignalSpy steps(page, &TrainingPane::stepped);
    auto atStep = connect(page, &TrainingPane::stepped, this, [&] { heardBeforeStep = int(reports.size()); });
    page->step();
    QVERIFY(waitFor(steps));
    disconnect(heard);
    disconnect(atStep);
    QVERIFY2(!reports.empty(), "a step with new shapes reported no compile progress");
    const QString bad = checkCounts(reports);
    QVERIFY2(bad.isEmpty(), qPrintable(bad));
    QCOMPARE(heardBeforeStep, int(reports.size()));
    QCOMPARE(reports.back().ready, reports.back().total);
    qInfo("the step at batch 24 compiled %d kernels", reports.back().total);
    QVERIFY(!page->compileBar()->isVisible());
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(TestUiProgress)
#include "test_ui_progress.moc"
