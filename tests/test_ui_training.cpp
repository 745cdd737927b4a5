// The training page inside the real window, driven through its buttons:
// steps that match the core Trainer bit for bit, pause within one step,
// reset, histograms, evaluation, save/load round trip, and bad input that
// leaves the page usable.
#include <QAbstractAxis>
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QSettings>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <chrono>
#include <filesystem>
#include <set>

#include "core/data/dataset.h"
#include "core/train/models.h"
#include "core/train/trainer.h"
#include "tests/testing.h"
#include "ui/main_window.h"

using namespace tlui;

namespace {
constexpr int kTimeoutMs = 10 * 60 * 1000;  // the first step compiles every kernel of a CNN step
constexpr int kSeed = 3;

bool waitFor(QSignalSpy& spy, int count = 1) {
  QElapsedTimer t;
  t.start();
  while (spy.count() < count && t.elapsed() < kTimeoutMs) QTest::qWait(10);
  return spy.count() >= count;
}

void writeIdx(const QString& path, quint32 magic, const std::vector<quint32>& dims, int count) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
  QByteArray b;
  auto put32 = [&](quint32 v) {
    for (int s = 24; s >= 0; s -= 8) b.append(char(v >> s));
  };
  put32(magic);
  for (quint32 d : dims) put32(d);
  for (int i = 0; i < count; ++i) b.append(char(magic == 2049 ? i % 10 : (i * 37) % 256));
  f.write(b);
}

// Logits of the first `count` test images of the page's digits split, by the
// core alone, for a model loaded from `path`.
std::vector<float> coreLogits(const std::string& path, int count) {
  auto [train, test] = tl::data::split(tl::data::load_digits(tl::data::default_digits_path()), 0.2, kSeed);
  tl::Generator gen(99);
  auto model = tl::train::make_cnn(20, 20, 10, gen, "cpu");
  model->load(path);
  model->eval();
  tl::NoGrad ng;
  tl::data::Batches batches(test, count, false, 0, false, 0, "cpu");
  tl::data::Batch b;
  batches.next(b);
  return (*model)(b.images).to_vector();
}
}  // namespace

class TestUiTraining : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  TrainingPane* page_ = nullptr;
  double firstLoss_ = 0;
  QTemporaryDir tmp_;

  std::vector<float> probe() {
    QSignalSpy spy(window_->session(), &Session::trainProbed);
    window_->session()->trainProbe(16);
    if (!waitFor(spy)) return {};
    auto list = spy[0][0].value<QList<float>>();
    return std::vector<float>(list.begin(), list.end());
  }

  bool stepOnce() {
    QSignalSpy stopped(page_, &TrainingPane::runStopped);
    QTest::mouseClick(page_->stepButton(), Qt::LeftButton);
    return waitFor(stopped);
  }

 private slots:
  void initTestCase() {
    TL_REQUIRE(std::filesystem::exists(tl::data::default_digits_path()), "opencv-doc's digits.png is not installed");
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-test-training");
    QSettings().clear();
    window_ = std::make_unique<MainWindow>();
    window_->resize(1400, 900);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    page_ = window_->trainingPane();
    QVERIFY(page_);
    page_->seedBox()->setValue(kSeed);
  }

  // Step, then Run N = 2: three steps whose losses equal the core Trainer's
  // with the same seed, data split and optimizer; the first step's graph
  // reaches the op graph pane.
  void stepsMatchTheCoreTrainer() {
    QSignalSpy graph(page_, &TrainingPane::graphCaptured);
    QSignalSpy steps(page_, &TrainingPane::stepped);
    QVERIFY(stepOnce());
    QCOMPARE(page_->steps(), 1);
    QCOMPARE(page_->trainLossSeries()->count(), 1);
    QCOMPARE(page_->smoothLossSeries()->count(), 1);
    page_->amountBox()->setValue(2);
    QSignalSpy stopped(page_, &TrainingPane::runStopped);
    QStringList statuses;  // what the page said at each step of the run
    auto said = connect(page_, &TrainingPane::stepped, this, [&] { statuses << page_->statusText(); });
    page_->runSpinBoxAmount();
    QVERIFY(waitFor(stopped));
    disconnect(said);
    QCOMPARE(page_->steps(), 3);
    // A number and its unit wrap as one ("batch accuracy 93.8" and "%" went
    // on two lines).
    QVERIFY(!statuses.isEmpty());
    QVERIFY2(QRegularExpression(QString::fromUtf8("batch accuracy [0-9.]+\u00A0%, lr")).match(statuses[0]).hasMatch(),
             qPrintable(statuses[0]));
    QCOMPARE(page_->trainLossSeries()->count(), 3);
    QCOMPARE(steps.count(), 3);

    auto [train, test] = tl::data::split(tl::data::load_digits(tl::data::default_digits_path()), 0.2, kSeed);
    tl::Generator gen(kSeed);
    auto model = tl::train::make_cnn(train.height, train.width, train.classes, gen, "cpu");
    // The page's defaults are the CLI's recipe: Adam 0.002, batch 32, shifts
    // of up to one pixel (the cosine schedule keeps the base rate in epoch 0).
    tl::nn::Adam opt(model->parameters(), 2e-3, tl::nn::AdamOptions{0.9, 0.999, 1e-8, 0});
    tl::train::Trainer trainer(*model, opt);
    tl::data::Batches batches(train, 32, true, kSeed, true, 1, "cpu");
    batches.start_epoch(0);
    tl::data::Batch b;
    for (int i = 0; i < 3; ++i) {
      QVERIFY(batches.next(b));
      double expected = trainer.step(b).loss;
      double shown = page_->trainLossSeries()->at(i).y();
      QVERIFY(std::isfinite(shown));
      QCOMPARE(page_->trainLossSeries()->at(i).x(), double(i + 1));
      QCOMPARE(shown, expected);
      QCOMPARE(steps[i][1].toDouble(), expected);
    }
    firstLoss_ = page_->trainLossSeries()->at(0).y();
    QVERIFY(firstLoss_ > 1.5);  // ~ln 10 for an untrained 10-class model

    QCOMPARE(graph.count(), 1);
    RunPtr run = graph[0][0].value<RunPtr>();
    QVERIFY(run->graph.size() > 50);
    QVERIFY(!run->records.empty());
    std::set<uint64_t> ids;
    for (auto& n : run->graph) ids.insert(n.id);
    for (auto& r : run->records)
      for (uint64_t id : r.kernel->node_ids) QVERIFY2(ids.count(id), r.kernel->name.c_str());
    // Forward, backward and the optimizer's update are all in it.
    bool hasSqrt = false;
    for (auto& n : run->graph) hasSqrt |= n.op == "SQRT";  // Adam's denominator
    QVERIFY(hasSqrt);
    std::set<std::string> phases;
    for (auto& n : run->graph) phases.insert(n.scope.substr(0, n.scope.find('.')));
    QVERIFY(phases.count("backward") && phases.count("update"));
    QCOMPARE(window_->lastRun(), run);
    QCOMPARE(window_->kernelPane()->model()->rowCount(), int(run->records.size()));
  }

  void lastStepsKernelsAreListed() {
    KernelTableModel* model = page_->kernelModel();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY(model->rowCount() > 0);
    double total = 0;
    for (auto& r : model->records()) total += r.seconds;
    QVERIFY(total > 0);
    QCOMPARE(model->totalSeconds(), total);
  }

  void histogramsCountEveryElement() {
    QComboBox* box = page_->parameterBox();
    // four conv + batch-norm blocks and the linear layer, weight and bias each
    QCOMPARE(box->count(), 18);
    const qint64 sizes[] = {32 * 9,      32, 32, 32, 32 * 32 * 9, 32, 32, 32, 64 * 32 * 9,
                            64,          64, 64, 64 * 64 * 9,     64, 64, 64, 10 * 64 * 5 * 5, 10};
    for (int i = 0; i < box->count(); ++i) {
      QSignalSpy shown(page_, &TrainingPane::histogramsShown);
      if (box->currentIndex() == i) page_->requestHistograms();  // no change, no request
      else box->setCurrentIndex(i);
      QVERIFY(waitFor(shown));
      const Histogram& w = page_->weightHistogram()->histogram();
      const Histogram& g = page_->gradientHistogram()->histogram();
      QCOMPARE(w.total(), sizes[i]);
      QCOMPARE(g.total(), sizes[i]);
      QVERIFY(w.low < w.high);
      QCOMPARE(w.nonFinite, qint64(0));
    }
  }

  void runThenPauseStopsAfterTheRunningStep() {
    QSignalSpy stepped(page_, &TrainingPane::stepped);
    QSignalSpy stopped(page_, &TrainingPane::runStopped);
    QSignalSpy worked(window_->session(), &Session::trainStepped);
    QTest::mouseClick(page_->runButton(), Qt::LeftButton);
    QVERIFY(page_->running());
    QCOMPARE(page_->runButton()->text(), QString("Pause"));
    QVERIFY(!page_->stepButton()->isEnabled());
    QVERIFY(waitFor(stepped, 3));
    // steps() counts the steps the window has been told of. When the pause
    // is clicked, one more may be finished but still on its way through the
    // event queue (a step of this small model takes a few milliseconds on
    // the CPU device), and one may be running: the worker starts no other.
    QCoreApplication::processEvents();
    QTest::mouseClick(page_->runButton(), Qt::LeftButton);
    const qint64 pausedAt =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    const int atPause = page_->steps();
    QVERIFY(waitFor(stopped));
    // What a pause promises: the worker starts no step after it (the step
    // running then finishes, and may arrive after the click).
    QVERIFY(worked.count() >= 3);
    qint64 last = 0;
    for (const auto& args : worked) {
      const TrainStepPtr s = args[0].value<TrainStepPtr>();
      last = std::max(last, s->startedUs);
      QVERIFY2(s->startedUs > 0 && s->startedUs <= pausedAt,
               qPrintable(QString("step %1 started %2 us after the pause").arg(s->step).arg(s->startedUs - pausedAt)));
    }
    qInfo("%lld steps; the last started %lld us before the pause", qlonglong(worked.count()), qlonglong(pausedAt - last));
    QVERIFY2(page_->steps() <= atPause + 2, qPrintable(QString("%1 > %2 + 2").arg(page_->steps()).arg(atPause)));
    QTest::qWait(300);
    const int settled = page_->steps();
    QVERIFY(settled <= atPause + 2);
    QTest::qWait(500);
    QCOMPARE(page_->steps(), settled);
    QVERIFY(!page_->running());
    QVERIFY(page_->stepButton()->isEnabled());
    QCOMPARE(page_->runButton()->text(), QString("Run"));
    QCOMPARE(page_->trainLossSeries()->count(), settled);
    for (int i = 0; i < settled; ++i) QVERIFY(std::isfinite(page_->trainLossSeries()->at(i).y()));
  }

  // Run trains to the end of the schedule's epochs and stops there (it ran
  // on at lr 0 past a cosine schedule's end); the status says so.
  void runStopsAtTheEndOfTheSchedule() {
    QSpinBox* batch = page_->settingsForm()->batchBox();
    QSpinBox* epochs = page_->settingsForm()->epochsBox();
    const int oldBatch = batch->value(), oldEpochs = epochs->value();
    batch->setValue(1024);
    epochs->setValue(2);
    QSignalSpy ready(page_, &TrainingPane::setupReady);
    QTest::mouseClick(page_->resetButton(), Qt::LeftButton);
    QVERIFY(waitFor(ready));
    const int perEpoch = page_->stepsPerEpoch();
    QVERIFY(perEpoch > 0 && perEpoch < 20);
    QSignalSpy stopped(page_, &TrainingPane::runStopped);
    QTest::mouseClick(page_->runButton(), Qt::LeftButton);
    QVERIFY(waitFor(stopped));
    QCOMPARE(page_->steps(), 2 * perEpoch);
    QVERIFY(!page_->running());
    QVERIFY2(page_->statusText().contains("epoch"), qPrintable(page_->statusText()));
    batch->setValue(oldBatch);
    epochs->setValue(oldEpochs);
    QSignalSpy again(page_, &TrainingPane::setupReady);
    QTest::mouseClick(page_->resetButton(), Qt::LeftButton);
    QVERIFY(waitFor(again));
    QVERIFY(stepOnce());  // the tests after this one start from a trained model, as before it
  }

  void evaluateOnDemand() {
    QSignalSpy evaluated(page_, &TrainingPane::evaluated);
    const int before = page_->testLossSeries()->count();
    page_->evaluate();
    QVERIFY(waitFor(evaluated));
    QCOMPARE(page_->testLossSeries()->count(), before + 1);
    QCOMPARE(page_->testAccuracySeries()->count(), before + 1);
    QCOMPARE(evaluated[0][0].toInt(), page_->steps());
    double acc = evaluated[0][2].toDouble();
    QVERIFY(acc > 0.0 && acc <= 1.0);
    QVERIFY(evaluated[0][1].toDouble() > 0);
  }

  void saveThenLoadRoundTrips() {
    const std::vector<float> trained = probe();
    QCOMPARE(trained.size(), size_t(16 * 10));
    const QString path = tmp_.filePath("trained.safetensors");
    QSignalSpy saved(page_, &TrainingPane::modelSaved);
    page_->saveModel(path);
    QVERIFY(waitFor(saved));
    QCOMPARE(coreLogits(path.toStdString(), 16), trained);  // the file holds exactly the page's model

    QSignalSpy ready(page_, &TrainingPane::setupReady);
    QTest::mouseClick(page_->resetButton(), Qt::LeftButton);
    QVERIFY(waitFor(ready));
    QVERIFY(probe() != trained);

    QSignalSpy loaded(page_, &TrainingPane::modelLoaded);
    page_->loadModel(path);
    QVERIFY(waitFor(loaded));
    QCOMPARE(probe(), trained);

    // A file that is not a model of this shape is refused, and the model stays.
    QSignalSpy error(page_, &TrainingPane::errorShown);
    page_->loadModel(tmp_.filePath("missing.safetensors"));
    QVERIFY(waitFor(error));
    QVERIFY(error[0][0].toString().contains("missing.safetensors"));
    QCOMPARE(probe(), trained);
  }

  void resetClearsTheCurves() {
    QVERIFY(stepOnce());
    QVERIFY(page_->trainLossSeries()->count() > 0);
    QSignalSpy ready(page_, &TrainingPane::setupReady);
    QTest::mouseClick(page_->resetButton(), Qt::LeftButton);
    QVERIFY(waitFor(ready));
    QCOMPARE(page_->steps(), 0);
    QCOMPARE(page_->trainLossSeries()->count(), 0);
    QCOMPARE(page_->smoothLossSeries()->count(), 0);
    QCOMPARE(page_->trainAccuracySeries()->count(), 0);
    QCOMPARE(page_->testLossSeries()->count(), 0);
    QCOMPARE(page_->kernelModel()->rowCount(), 0);
    // The fresh model from the same seed repeats the first loss exactly.
    QVERIFY(stepOnce());
    QCOMPARE(page_->steps(), 1);
    QCOMPARE(page_->trainLossSeries()->count(), 1);
    QCOMPARE(page_->trainLossSeries()->at(0).y(), firstLoss_);
  }

  void badMnistFolderShowsAnErrorAndKeepsThePage() {
    const int steps = page_->steps();
    const int points = page_->trainLossSeries()->count();
    QTemporaryDir bad;
    for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                             "t10k-labels-idx1-ubyte"}) {
      QFile f(bad.filePath(name));
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("this is not an IDX file");
    }
    for (const QString& dir : {bad.path(), tmp_.filePath("no-such-folder")}) {
      QSignalSpy error(page_, &TrainingPane::errorShown);
      QSignalSpy failed(window_->session(), &Session::failed);
      page_->setMnistFolder(dir);
      QTest::mouseClick(page_->resetButton(), Qt::LeftButton);
      QVERIFY(waitFor(error));
      QVERIFY2(error[0][0].toString().contains("Could not set up training"), qPrintable(error[0][0].toString()));
      // A training failure, which the main window leaves to this page.
      QCOMPARE(failed.count(), 1);
      QCOMPARE(failed[0][1].value<Session::FailureSource>(), Session::FailureSource::Train);
      QCOMPARE(failed[0][2].toString(), error[0][0].toString());
      QVERIFY(!page_->errorText().isEmpty());
      QCOMPARE(page_->steps(), steps);
      QCOMPARE(page_->trainLossSeries()->count(), points);
      QVERIFY(page_->ready());
    }
    // The old model keeps training.
    QVERIFY(stepOnce());
    QCOMPARE(page_->steps(), steps + 1);
    QCOMPARE(page_->trainLossSeries()->count(), points + 1);
    QVERIFY(page_->errorText().isEmpty());

    // A well-formed folder (tiny, 28x28 like MNIST) trains.
    QTemporaryDir good;
    // 30 images: one batch of the default 32.
    writeIdx(good.filePath("train-images-idx3-ubyte"), 2051, {30, 28, 28}, 30 * 28 * 28);
    writeIdx(good.filePath("train-labels-idx1-ubyte"), 2049, {30}, 30);
    writeIdx(good.filePath("t10k-images-idx3-ubyte"), 2051, {10, 28, 28}, 10 * 28 * 28);
    writeIdx(good.filePath("t10k-labels-idx1-ubyte"), 2049, {10}, 10);
    QSignalSpy ready(page_, &TrainingPane::setupReady);
    page_->setMnistFolder(good.path());
    QTest::mouseClick(page_->resetButton(), Qt::LeftButton);
    QVERIFY(waitFor(ready));
    QVERIFY2(page_->statusText().startsWith("30 train / 10 test images, 1 steps per epoch"), qPrintable(page_->statusText()));
    QCOMPARE(page_->trainLossSeries()->count(), 0);
    QSignalSpy evaluated(page_, &TrainingPane::evaluated);
    QVERIFY(stepOnce());  // one step is the whole epoch: the test set is evaluated after it
    QVERIFY(waitFor(evaluated));
    QCOMPARE(evaluated[0][0].toInt(), 1);
    QVERIFY(std::isfinite(page_->trainLossSeries()->at(0).y()));
    page_->setMnistFolder({});
  }

  // Every axis of the two charts shows its labels whole: a short chart cut
  // the accuracy axis's to "0 ... ... ..." (Qt Charts truncates by default).
  void chartAxesShowWholeLabels() {
    TrainingCharts* charts = page_->charts();
    int axes = 0;
    for (QAbstractSeries* series : std::initializer_list<QAbstractSeries*>{charts->trainLoss(), charts->smoothAccuracy()})
      for (QAbstractAxis* axis : series->attachedAxes()) {
        ++axes;
        QVERIFY2(!axis->truncateLabels(), qPrintable(axis->titleText()));
      }
    QCOMPARE(axes, 4);
  }

  void cleanupTestCase() { window_.reset(); }
};

QTEST_MAIN(TestUiTraining)
#include "test_ui_training.moc"
