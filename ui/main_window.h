// The explorer's window: docks for image + predictions, model, devices, op
// graph, kernels, kernel source, device comparison and training. All core work goes
// through the Session's worker thread.
#pragma once
#include <QMainWindow>

#include "ui/panes/compare_pane.h"
#include "ui/panes/graph_pane.h"
#include "ui/panes/image_pane.h"
#include "ui/panes/kernel_pane.h"
#include "ui/panes/memory_pane.h"
#include "ui/panes/timeline_pane.h"
#include "ui/panes/tuner_pane.h"
#include "ui/panes/side_panes.h"
#include "ui/panes/source_pane.h"
#include "ui/panes/training_pane.h"
#include "ui/session.h"

class QAction;
class QLabel;
class QMenu;
class QProgressBar;
class QToolButton;

namespace tlui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // A model file (.pth, .safetensors, .onnx) loads the model; anything else
  // is treated as an image and classified.
  void openFile(const QString& path);
  void openImage(const QString& path);
  void openModel(const QString& nameOrPath);
  // File > Close Image / Close Model: the panes forget them and the session
  // frees what it kept (Session::closeImage, closeModel).
  void closeImage();
  void closeModel();
  void setDevice(const QString& name);
  QString device() const { return device_; }
  QString currentImage() const { return currentImage_; }
  void rerun();
  void compareDevices(const QStringList& devices);
  void showCompare();  // the comparison's own window
  // Saves a grab of the window to `path` after the first result and quits,
  // `lingerMs` after saving it.
  void setScreenshotPath(const QString& path, int lingerMs = 0);
  static bool isModelFile(const QString& path);
  // "53 kernels", or "75 kernel launches of 50 kernels" when some share a source.
  static QString kernelCountText(const RunData& run);

  Session* session() const { return session_; }
  ImagePane* imagePane() const { return image_; }
  ModelPane* modelPane() const { return model_; }
  DevicePane* devicePane() const { return devices_; }
  GraphPane* graphPane() const { return graph_; }
  KernelPane* kernelPane() const { return kernels_; }
  SourcePane* sourcePane() const { return source_; }
  ComparePane* comparePane() const { return compare_; }
  TrainingPane* trainingPane() const { return training_; }
  MemoryPane* memoryPane() const { return memory_; }
  TimelinePane* timelinePane() const { return timeline_; }
  TunerPane* tunerPane() const { return tuner_; }
  RunPtr lastRun() const { return lastRun_; }
  QString statusText() const;
  QStringList recentFiles() const;

  bool exportGraph(const QString& path, QString* error);  // .svg or .png by suffix
  // File > Export Trace / Export Report (ui/main_window_exports.cpp): written
  // on the worker from the run shown (and the last comparison); false, with
  // the reason in `error`, when there is nothing to write yet. The file is
  // there when exportFinished(job) comes; a failure shows as an error.
  bool exportTrace(const QString& path, QString* error, quint64* job = nullptr);
  bool exportReport(const QString& path, QString* error, quint64* job = nullptr);
  // Writes the report to `path` after the first result and quits (as
  // setScreenshotPath does): `tinylens MODEL IMAGE --report FILE`.
  void setReportPath(const QString& path);
  // Brings the dock titled `title` (any case: "timeline", "memory") to the
  // front of its tab group; false when there is none (`tinylens --pane`).
  bool raisePane(const QString& title);
  ComparePtr lastCompare() const { return lastCompare_; }
  bool exportKernelsCsv(const QString& path, QString* error);
  // Help > Build a Kernel with a Known Warning, on the current device.
  void buildWarningKernel();
  // Shrinks and moves the window so that it lies within its screen.
  void fitToScreen();
  QLabel* graphHint() const { return hint_; }
  QProgressBar* progressBar() const { return progress_; }
  QToolButton* cancelButton() const { return cancel_; }
  QAction* rerunAction() const { return rerunAction_; }
  QAction* cancelAction() const { return cancelAction_; }

 signals:
  void runFinished(const tlui::RunPtr& run);
  void runFailed(const QString& message);
  void devicesKnown();
  void warningKernelShown();  // the known-warning kernel is in the source pane
  void exportFinished(quint64 job, const QString& path);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void buildDocks();
  void buildMenus();
  void placeDocks();
  void sizeDocks();
  void connectProgress();
  void connectResults();
  void connectTuner();  // main_window_tuner.cpp
  void saveSettings();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  void showError(const QString& message);
  void settleProgress();  // hides progress and Cancel when nothing runs
  void updateRunActions();
  void showKernel(int record);
  void onClassified(const RunPtr& run);
  void showTrainingGraph(const RunPtr& run);
  void maybeScreenshot();
  void placeHint();  // centred on the op graph

  Session* session_;
  ImagePane* image_;
  ModelPane* model_;
  DevicePane* devices_;
  GraphPane* graph_;
  KernelPane* kernels_;
  SourcePane* source_;
  ComparePane* compare_;
  TrainingPane* training_;
  MemoryPane* memory_;
  TimelinePane* timeline_;
  TunerPane* tuner_;
  QLabel* status_;
  QLabel* hint_ = nullptr;
  QProgressBar* progress_;
  QToolButton* cancel_;
  QMenu* recentMenu_ = nullptr;
  QAction* rerunAction_ = nullptr;
  QAction* cancelAction_ = nullptr;
  bool sizeDocksOnShow_ = false;

  QString device_ = "cpu";
  QString currentImage_;
  QString pendingModel_;
  QString loadedModel_;  // the classifier runs use now
  RunPtr lastRun_;
  ComparePtr lastCompare_;
  ModelPtr lastModel_;
  QString reportPath_;
  QString screenshotPath_;
  int screenshotLingerMs_ = 0;
  bool screenshotResult_ = false;
};

}  // namespace tlui
