#include "ui/panes/training_pane.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <cmath>

namespace tlui {

namespace {
constexpr int kHistogramBins = 40;
constexpr int kHistogramEvery = 20;  // steps between histogram refreshes while running
}  // namespace

TrainingPane::TrainingPane(Session* session, QWidget* parent)
    : QWidget(parent), session_(session), kernels_(new KernelTableModel(this)) {
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(buildSettings());
  charts_ = new TrainingCharts;
  split->addWidget(charts_);
  split->addWidget(buildInspection());
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 2);
  split->setCollapsible(0, false);
  split->setSizes({300, 600, 400});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(split);

  connect(session_, &Session::trainReady, this, &TrainingPane::onReady);
  connect(session_, &Session::trainStepped, this, &TrainingPane::onStep);
  connect(session_, &Session::trainEvaluated, this, &TrainingPane::onEval);
  connect(session_, &Session::trainHistogramsReady, this, &TrainingPane::onHistograms);
  connect(session_, &Session::trainGraph, this, &TrainingPane::graphCaptured);
  connect(session_, &Session::trainCompileProgress, this, &TrainingPane::showCompileProgress);
  connect(session_, &Session::trainCancelled, this, [this](quint64 job) {
    if (job != runJob_) return;
    cancelledJob_ = job;
    setStatus(tr("Cancelled the step while it compiled: nothing was applied. Step or Run starts it again."));
    emit stepCancelled();
  });
  connect(session_, &Session::trainStopped, this, [this](quint64 job, int done) {
    if (job != runJob_) return;
    runJob_ = 0;
    pausing_ = false;
    hideCompileProgress();
    updateButtons();
    showLastKernels();
    requestHistograms();
    const int epochs = settingsForm_->settings().epochs;
    if (cancelledJob_ != job) {  // else the status says what was cancelled
      if (stepsPerEpoch_ > 0 && steps_ >= epochs * stepsPerEpoch_)
        setStatus(tr("The schedule's %n epoch(s) are done (%1 steps). Run N goes on past them; Reset starts again.",
                     nullptr, epochs).arg(steps_));
      else
        setStatus(tr("Stopped after %n step(s); %1 steps in all.", nullptr, done).arg(steps_));
    }
    emit runStopped(steps_);
  });
  connect(session_, &Session::trainSaved, this, [this](const QString& path) {
    setStatus(tr("Saved %1").arg(path));
    emit modelSaved(path);
  });
  connect(session_, &Session::trainLoaded, this, [this](const QString& path) {
    setStatus(tr("Loaded %1 (optimizer state restarted)").arg(path));
    requestHistograms();
    emit modelLoaded(path);
  });
  connect(session_, &Session::failed, this, [this](quint64 job, Session::FailureSource source, const QString& msg) {
    if (source != Session::FailureSource::Train) return;
    if (job == resetJob_) resetJob_ = 0;
    showError(msg);
  });
  updateButtons();
}

QWidget* TrainingPane::buildSettings() {
  auto* box = new QWidget;
  auto* form = new QFormLayout(box);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);

  // The buttons and the status come first, the settings after them: below
  // the settings, the buttons were under the dock's edge at 1280x800 and
  // 1600x1000 alike.
  settingsForm_ = new TrainingSettingsForm;
  connect(settingsForm_, &TrainingSettingsForm::changed, this, [this] {
    // Settings describe the next model; the running one keeps its own.
    if (ready_) setStatus(tr("Settings changed: press Reset to train a fresh model with them."));
  });

  resetButton_ = new QPushButton(tr("Reset"));
  resetButton_->setToolTip(tr("A fresh model from the seed, with the settings below"));

  stepButton_ = new QPushButton(tr("Step"));
  stepButton_->setToolTip(tr("Train on one batch"));
  runButton_ = new QPushButton(tr("Run"));
  runButton_->setToolTip(tr("Train until paused"));
  auto* row1 = new QHBoxLayout;
  row1->addWidget(resetButton_);
  row1->addWidget(stepButton_);
  row1->addWidget(runButton_);
  form->addRow(row1);

  amount_ = new QSpinBox;
  amount_->setRange(1, 1000000);
  amount_->setValue(50);
  unit_ = new QComboBox;
  unit_->addItem(tr("steps"));
  unit_->addItem(tr("epochs"));
  runNButton_ = new QPushButton(tr("Run N"));
  auto* row2 = new QHBoxLayout;
  row2->addWidget(runNButton_);
  row2->addWidget(amount_, 1);
  row2->addWidget(unit_);
  form->addRow(row2);

  evalButton_ = new QPushButton(tr("Evaluate"));
  evalButton_->setToolTip(tr("Loss and accuracy on the test set now"));
  graphButton_ = new QPushButton(tr("Capture graph"));
  graphButton_->setToolTip(tr("Show the next step's forward, backward and update graph in the op graph pane"));
  auto* row3 = new QHBoxLayout;
  row3->addWidget(evalButton_);
  row3->addWidget(graphButton_);
  form->addRow(row3);

  saveButton_ = new QPushButton(tr("Save..."));
  loadButton_ = new QPushButton(tr("Load..."));
  auto* row4 = new QHBoxLayout;
  row4->addWidget(saveButton_);
  row4->addWidget(loadButton_);
  form->addRow(row4);

  status_ = new QLabel(tr("Press Step or Run to start training."));
  status_->setWordWrap(true);
  form->addRow(status_);
  // A step that compiles (the first: seconds on a cold cache) shows how far
  // it got, and the first one can be cancelled.
  compileBar_ = new QProgressBar;
  compileBar_->hide();
  cancelButton_ = new QPushButton(tr("Cancel"));
  cancelButton_->setToolTip(tr("Abandon this step: nothing of it is applied"));
  cancelButton_->hide();
  auto* progressRow = new QHBoxLayout;
  progressRow->addWidget(compileBar_, 1);
  progressRow->addWidget(cancelButton_);
  form->addRow(progressRow);
  connect(cancelButton_, &QPushButton::clicked, this, &TrainingPane::cancelStep);
  error_ = new QLabel;
  error_->setWordWrap(true);
  error_->setStyleSheet("color: #b00020;");
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->hide();
  form->addRow(error_);
  form->addRow(settingsForm_);

  connect(resetButton_, &QPushButton::clicked, this, &TrainingPane::reset);
  connect(stepButton_, &QPushButton::clicked, this, &TrainingPane::step);
  connect(runNButton_, &QPushButton::clicked, this, &TrainingPane::runSpinBoxAmount);
  connect(runButton_, &QPushButton::clicked, this, [this] {
    if (running()) pause();
    else runContinuous();
  });
  connect(evalButton_, &QPushButton::clicked, this, &TrainingPane::evaluate);
  connect(graphButton_, &QPushButton::clicked, this, &TrainingPane::captureGraph);
  connect(saveButton_, &QPushButton::clicked, this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Save model"), "model.safetensors",
                                                tr("safetensors (*.safetensors)"));
    if (!path.isEmpty()) saveModel(path);
  });
  connect(loadButton_, &QPushButton::clicked, this, [this] {
    QString path = QFileDialog::getOpenFileName(this, tr("Load model"), {},
                                                tr("safetensors (*.safetensors);;All files (*)"));
    if (!path.isEmpty()) loadModel(path);
  });

  scrollFormWithWheel(box);
  auto* scroll = new QScrollArea;
  scroll->setWidget(box);
  scroll->setWidgetResizable(true);
  // Wide enough for the form: a narrower dock scrolls vertically only.
  scroll->setMinimumWidth(box->minimumSizeHint().width() + scroll->verticalScrollBar()->sizeHint().width() + 4);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  return scroll;
}

QWidget* TrainingPane::buildInspection() {
  auto* tabs = new QTabWidget;

  auto* kernelsPage = new QWidget;
  auto* kl = new QVBoxLayout(kernelsPage);
  kl->setContentsMargins(0, 0, 0, 0);
  totals_ = new QLabel(tr("No step yet."));
  totals_->setWordWrap(true);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(kernels_);
  proxy->setSortRole(KernelTableModel::SortRole);
  kernelView_ = new QTableView;
  kernelView_->setModel(proxy);
  kernelView_->setSortingEnabled(true);
  kernelView_->verticalHeader()->hide();
  kernelView_->horizontalHeader()->setStretchLastSection(true);
  kernelView_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  kernelView_->setSelectionBehavior(QAbstractItemView::SelectRows);
  kl->addWidget(totals_);
  kl->addWidget(kernelView_, 1);
  tabs->addTab(kernelsPage, tr("Last step's kernels"));

  auto* histPage = new QWidget;
  auto* hl = new QVBoxLayout(histPage);
  hl->setContentsMargins(2, 2, 2, 2);
  parameterBox_ = new QComboBox;
  hl->addWidget(parameterBox_);
  weightHist_ = new HistogramView(tr("weights"));
  gradHist_ = new HistogramView(tr("gradients of the last step"));
  // Side by side: the dock is wide and short.
  auto* bars = new QHBoxLayout;
  bars->addWidget(weightHist_, 1);
  bars->addWidget(gradHist_, 1);
  hl->addLayout(bars, 1);
  tabs->addTab(histPage, tr("Histograms"));
  connect(parameterBox_, &QComboBox::currentIndexChanged, this, [this] { requestHistograms(); });
  return tabs;
}

TrainSettings TrainingPane::settings() const {
  TrainSettings s = settingsForm_->settings();
  s.device = device_;
  return s;
}

void TrainingPane::setMnistFolder(const QString& dir) { settingsForm_->setMnistFolder(dir); }

QString TrainingPane::errorText() const { return error_->text(); }
QString TrainingPane::statusText() const { return status_->text(); }

void TrainingPane::showError(const QString& message) {
  error_->setText(message);
  error_->show();
  emit errorShown(message);
}

void TrainingPane::setStatus(const QString& text) { status_->setText(text); }

void TrainingPane::updateButtons() {
  const bool run = running();
  stepButton_->setEnabled(!run);
  runNButton_->setEnabled(!run);
  resetButton_->setEnabled(true);  // a reset pauses first
  runButton_->setText(run ? (pausing_ ? tr("Pausing...") : tr("Pause")) : tr("Run"));
  runButton_->setEnabled(!pausing_);
  saveButton_->setEnabled(ready_);
  evalButton_->setEnabled(ready_ || resetJob_);
}

void TrainingPane::reset() {
  if (!session_) return;
  error_->clear();
  error_->hide();
  if (running()) pausing_ = true;
  resetJob_ = session_->trainReset(settings());
  captureNext_ = true;  // the fresh model's first step shows its graph
  setStatus(tr("Building the model..."));
  updateButtons();
}

bool TrainingPane::ensureModel() {
  if (!session_) return false;
  if (!ready_ && !resetJob_) reset();
  return true;
}

void TrainingPane::startRun(int steps) {
  if (!ensureModel() || running()) return;
  error_->clear();
  error_->hide();
  pausing_ = false;
  runJob_ = session_->trainRun(steps, captureNext_);
  captureNext_ = false;
  setStatus(steps < 0 ? tr("Training to the end of the schedule (%n epoch(s)) or a pause...", nullptr,
                           settingsForm_->settings().epochs)
                      : tr("Training %n step(s)...", nullptr, steps));
  updateButtons();
}

void TrainingPane::step() { startRun(1); }
void TrainingPane::runSteps(int steps) { startRun(std::max(1, steps)); }
void TrainingPane::runContinuous() { startRun(-1); }

void TrainingPane::runSpinBoxAmount() {
  const int n = amount_->value();
  if (unit_->currentIndex() == 0) return runSteps(n);
  if (stepsPerEpoch_ > 0) return runSteps(n * stepsPerEpoch_);
  // Epochs need the data set's size: build the model first, then run.
  ensureModel();
  auto* once = new QObject(this);
  connect(this, &TrainingPane::setupReady, once, [this, n, once] {
    once->deleteLater();
    runSteps(n * stepsPerEpoch_);
  });
  connect(this, &TrainingPane::errorShown, once, &QObject::deleteLater);
}

void TrainingPane::pause() {
  if (!session_ || !running()) return;
  session_->trainPause();
  pausing_ = true;
  setStatus(tr("Pausing after the current step..."));
  updateButtons();
}

void TrainingPane::cancelStep() {
  if (!session_ || !running()) return;
  session_->trainCancel();
  pausing_ = true;
  cancelButton_->setEnabled(false);
  setStatus(tr("Cancelling the step..."));
  updateButtons();
}

void TrainingPane::showCompileProgress(quint64 job, const QString& device, int ready, int total, bool cancellable) {
  if (job != runJob_ || cancelledJob_ == job) return;
  compileBar_->setRange(0, std::max(total, 1));
  compileBar_->setValue(ready);
  compileBar_->setFormat(tr("%1/%2 kernels").arg(ready).arg(total));
  compileBar_->show();
  cancelButton_->setVisible(cancellable);
  cancelButton_->setEnabled(!pausing_);
  setStatus(tr("Compiling the step's kernels for %1... %2/%3").arg(device).arg(ready).arg(total));
}

void TrainingPane::hideCompileProgress() {
  compileBar_->hide();
  cancelButton_->hide();
  cancelButton_->setEnabled(true);
}

void TrainingPane::evaluate() {
  if (ensureModel()) session_->trainEvaluate();
}

void TrainingPane::captureGraph() {
  captureNext_ = true;
  setStatus(tr("The next step's graph will be shown in the op graph pane."));
}

void TrainingPane::saveModel(const QString& path) {
  if (!session_) return;
  if (!ready_) {
    showError(tr("Nothing to save yet: train a step first."));
    return;
  }
  session_->trainSave(path);
}

void TrainingPane::loadModel(const QString& path) {
  if (!ensureModel()) return;
  error_->clear();
  error_->hide();
  session_->trainLoad(path);
}

void TrainingPane::requestHistograms() {
  if (!session_ || !ready_ || parameterBox_->currentIndex() < 0) return;
  session_->trainHistograms(parameterBox_->currentData().toString(), kHistogramBins);
}

void TrainingPane::clearCurves() {
  charts_->clear();
  steps_ = 0;
  lastStep_.reset();
  kernels_->setRecords({});
  totals_->setText(tr("No step yet."));
}

void TrainingPane::onReady(const TrainSetupPtr& setup) {
  if (setup->generation != resetJob_) return;
  resetJob_ = 0;
  ready_ = true;
  pausing_ = false;
  stepsPerEpoch_ = setup->stepsPerEpoch;
  clearCurves();
  const QString keep = parameterBox_->currentText();
  {
    QSignalBlocker block(parameterBox_);
    parameterBox_->clear();
    for (int i = 0; i < setup->parameters.size(); ++i)
      parameterBox_->addItem(tr("%1 (%2 values)").arg(setup->parameters[i]).arg(setup->parameterSizes[size_t(i)]),
                             setup->parameters[i]);
    int again = parameterBox_->findData(keep.section(' ', 0, 0));
    parameterBox_->setCurrentIndex(again >= 0 ? again : 0);
  }
  parameters_ = setup->parameters;
  setStatus(tr("%1 train / %2 test images, %3 steps per epoch, lr %4.\n%5")
                .arg(setup->trainSize)
                .arg(setup->testSize)
                .arg(setup->stepsPerEpoch)
                .arg(setup->lr)
                .arg(setup->summary.trimmed()));
  weightHist_->clear();
  gradHist_->clear();
  updateButtons();
  requestHistograms();
  emit setupReady();
}

void TrainingPane::onStep(const TrainStepPtr& s) {
  if (!ready_) return;
  steps_ = s->step;
  lastStep_ = s;
  hideCompileProgress();
  charts_->addStep(s->step, s->loss, s->accuracy);
  // The table is rebuilt at most a few times a second while running.
  if (!kernelsDirty_) {
    kernelsDirty_ = true;
    QTimer::singleShot(running() ? 250 : 0, this, &TrainingPane::showLastKernels);
  }
  if (running() && s->step % kHistogramEvery == 0) requestHistograms();
  QLineSeries* losses = charts_->trainLoss();
  const bool wasFinite = losses->count() < 2 || std::isfinite(losses->at(losses->count() - 2).y());
  if (!std::isfinite(s->loss) && wasFinite)  // said once, not at every following step
    showError(tr("The loss became %1 at step %2: lower the learning rate and press Reset.").arg(s->loss).arg(s->step));
  if (running())
    setStatus(tr("Step %1 (epoch %2): loss %3, batch accuracy %4\u00A0%, lr %5")
                  .arg(s->step)
                  .arg(s->epoch + 1)
                  .arg(s->loss, 0, 'f', 4)
                  .arg(s->accuracy * 100, 0, 'f', 1)
                  .arg(s->lr, 0, 'g', 3));
  emit stepped(s->step, s->loss);
}

void TrainingPane::showLastKernels() {
  kernelsDirty_ = false;
  if (!lastStep_) return;
  if (kernels_->records().size() != lastStep_->kernels.size() || kernels_->records().empty() ||
      kernels_->records().front().seconds != lastStep_->kernels.front().seconds)
    kernels_->setRecords(lastStep_->kernels);
  double device = 0;
  for (const auto& r : lastStep_->kernels) device += r.seconds;
  totals_->setText(tr("Step %1: %2 kernel launches, %3 ms on the device, %4 ms in all (loss %5).")
                       .arg(lastStep_->step)
                       .arg(lastStep_->kernels.size())
                       .arg(device * 1e3, 0, 'f', 2)
                       .arg(lastStep_->seconds * 1e3, 0, 'f', 2)
                       .arg(lastStep_->loss, 0, 'f', 4));
}

void TrainingPane::onEval(const TrainEval& e) {
  if (!ready_) return;
  charts_->addTest(e.step, e.loss, e.accuracy);
  setStatus(tr("Test after %1 steps: loss %2, accuracy %3\u00A0% (%4\u00A0s)")
                .arg(e.step)
                .arg(e.loss, 0, 'f', 4)
                .arg(e.accuracy * 100, 0, 'f', 2)
                .arg(e.seconds, 0, 'f', 2));
  emit evaluated(e.step, e.loss, e.accuracy);
}

void TrainingPane::onHistograms(const HistogramsPtr& h) {
  if (parameterBox_->currentData().toString() != h->parameter) return;  // the user moved on
  weightHist_->setHistogram(h->weights, tr("%1 values").arg(h->elements));
  gradHist_->setHistogram(h->gradients, h->gradients.bins.empty() ? tr("no step yet") : tr("step %1").arg(h->step));
  emit histogramsShown();
}

}  // namespace tlui
