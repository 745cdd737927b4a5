// The training page: model, optimizer, hyper-parameters and data set; Step,
// Run N, Run/Pause and Reset; live loss and accuracy curves, the last step's
// kernels, weight and gradient histograms, save and load. Every action goes
// through the Session, whose worker runs one step per job.
#pragma once
#include <QPointer>
#include <QWidget>

#include "ui/models/kernel_table_model.h"
#include "ui/panes/histogram_view.h"
#include "ui/panes/training_charts.h"
#include "ui/panes/training_settings.h"
#include "ui/session.h"

class QComboBox;
class QLabel;
class QLineSeries;
class QProgressBar;
class QPushButton;
class QScatterSeries;
class QSpinBox;
class QTableView;

namespace tlui {

class TrainingPane : public QWidget {
  Q_OBJECT
 public:
  explicit TrainingPane(Session* session, QWidget* parent = nullptr);

  TrainSettings settings() const;
  void setDevice(const QString& device) { device_ = device; }
  // "" = the digits image; otherwise an MNIST folder (what the Browse button sets).
  void setMnistFolder(const QString& dir);

  void reset();
  void step();
  void runSteps(int steps);
  void runSpinBoxAmount();  // the Run N button: steps or epochs as chosen
  void runContinuous();
  void pause();
  void cancelStep();  // the Cancel beside a compiling step's progress
  void evaluate();
  void captureGraph();  // the next step records its graph
  void saveModel(const QString& path);
  void loadModel(const QString& path);
  void requestHistograms();

  bool running() const { return runJob_ != 0; }
  bool ready() const { return ready_; }
  int steps() const { return steps_; }
  QString errorText() const;
  QString statusText() const;

  TrainingCharts* charts() const { return charts_; }
  QLineSeries* trainLossSeries() const { return charts_->trainLoss(); }
  QLineSeries* smoothLossSeries() const { return charts_->smoothLoss(); }
  QLineSeries* trainAccuracySeries() const { return charts_->smoothAccuracy(); }
  QScatterSeries* testLossSeries() const { return charts_->testLoss(); }
  QScatterSeries* testAccuracySeries() const { return charts_->testAccuracy(); }
  KernelTableModel* kernelModel() const { return kernels_; }
  QComboBox* parameterBox() const { return parameterBox_; }
  HistogramView* weightHistogram() const { return weightHist_; }
  HistogramView* gradientHistogram() const { return gradHist_; }
  QSpinBox* seedBox() const { return settingsForm_->seedBox(); }
  TrainingSettingsForm* settingsForm() const { return settingsForm_; }
  int stepsPerEpoch() const { return stepsPerEpoch_; }
  QSpinBox* amountBox() const { return amount_; }
  QPushButton* stepButton() const { return stepButton_; }
  QPushButton* runButton() const { return runButton_; }
  QPushButton* resetButton() const { return resetButton_; }
  QPushButton* evaluateButton() const { return evalButton_; }
  QProgressBar* compileBar() const { return compileBar_; }
  QPushButton* cancelButton() const { return cancelButton_; }

 signals:
  void graphCaptured(const tlui::RunPtr& run);
  void stepped(int step, double loss);
  void stepCancelled();
  void evaluated(int step, double loss, double accuracy);
  void runStopped(int steps);
  void setupReady();
  void errorShown(const QString& message);
  void histogramsShown();
  void modelSaved(const QString& path);
  void modelLoaded(const QString& path);

 private:
  QWidget* buildSettings();
  QWidget* buildInspection();
  void startRun(int steps);
  bool ensureModel();
  void clearCurves();
  void updateButtons();
  void showError(const QString& message);
  void setStatus(const QString& text);
  void onReady(const TrainSetupPtr& setup);
  void onStep(const TrainStepPtr& step);
  void onEval(const TrainEval& eval);
  void onHistograms(const HistogramsPtr& h);
  void showLastKernels();
  void showCompileProgress(quint64 job, const QString& device, int ready, int total, bool cancellable);
  void hideCompileProgress();

  QPointer<Session> session_;
  QString device_ = "cpu";

  TrainingSettingsForm* settingsForm_;
  QComboBox *unit_, *parameterBox_;
  QSpinBox* amount_;
  QPushButton *stepButton_, *runNButton_, *runButton_, *resetButton_, *evalButton_, *graphButton_, *saveButton_,
      *loadButton_;
  QLabel *status_, *error_, *totals_;
  QProgressBar* compileBar_;
  QPushButton* cancelButton_;

  TrainingCharts* charts_;

  KernelTableModel* kernels_;
  QTableView* kernelView_;
  HistogramView *weightHist_, *gradHist_;

  bool ready_ = false;
  quint64 resetJob_ = 0;
  quint64 runJob_ = 0;
  bool pausing_ = false;
  quint64 cancelledJob_ = 0;
  bool captureNext_ = true;
  int steps_ = 0;
  int stepsPerEpoch_ = 0;
  TrainStepPtr lastStep_;
  bool kernelsDirty_ = false;
  QStringList parameters_;
};

}  // namespace tlui
