// The window's only door to the core. Every core call runs on one worker
// thread (the core keeps per-thread state such as the cancel flag, and the
// model's weights are not safe to touch from two threads). Each request gets
// a job id; a newer run request cancels the older one and results of stale
// jobs are dropped before they reach any widget.
#pragma once
#include <QObject>
#include <QThread>
#include <atomic>
#include <functional>
#include <memory>

#include "ui/run_data.h"
#include "ui/train_data.h"

namespace tlui {

class TrainWorker;

class Session : public QObject {
  Q_OBJECT
 public:
  // Which request a failure answers: each widget that keeps its previous
  // state on a failure decides by it.
  enum class FailureSource {
    Devices,        // enumerateDevices
    Model,          // loadModel
    Image,          // classify: the image could not be read
    Run,            // classify: the model could not run
    Compare,        // compare
    WarningKernel,  // buildWarningKernel
    Train,          // every training request
    Export,         // exportTrace, exportReport
  };
  Q_ENUM(FailureSource)

  explicit Session(QObject* parent = nullptr);
  ~Session() override;

  // Each returns the job id; results arrive through the signals below.
  quint64 enumerateDevices();
  // A .onnx file is first read as a graph (onnxInspected), then loaded as a
  // classifier; a graph that cannot classify still shows, and the previous
  // classifier stays loaded.
  quint64 loadModel(const QString& nameOrPath);
  quint64 classify(const QString& imagePath, const QString& device);
  quint64 compare(const QString& imagePath, const QStringList& devices);
  // Re-tunes the kernels of the current model's run on `device` with the
  // image (core/tune.h, TuneSearch): all of them, or those named `kernel`
  // whose output shape is `outputShape` (KernelInfo's). Searches, telling
  // tuneProgress; then stores the choices, runs every later classification
  // with TINYLENS_TUNE=1 and classifies again (retuned, then classified).
  // cancel() stops it between two candidates' launches (cancelled): every
  // stored choice, and every result shown, stays as it was.
  quint64 retune(const QString& imagePath, const QString& device, const QString& kernel = {},
                 const QString& outputShape = {});
  void cancel();  // the running classify/compare/retune job, if any
  // Forget the image (its decoded copy) or the model (its weights, compiled
  // plans and kernel records, and the buffers the devices keep for reuse);
  // the next classify reads the image again, or loads the built-in model.
  void closeImage();
  void closeModel();
  // Compiles, on `device`, a tiny kernel whose source makes the compiler
  // warn (C: an assignment used as a condition; OpenCL: a double constant and
  // a literal that loses its fraction), so the clickable build log can be
  // seen working. Answers with warningKernelBuilt or failed(FailureSource::WarningKernel).
  quint64 buildWarningKernel(const QString& device);

  // Writes a file from results already shown, on the worker: a run's trace
  // (core/trace.h), or the report (core/report.h) of a run and, when given,
  // a comparison. Answers with exported or failed(FailureSource::Export).
  quint64 exportTrace(const QString& path, const RunPtr& run);
  quint64 exportReport(const QString& path, const RunPtr& run, const ComparePtr& compare, const ModelPtr& model);

  bool busy() const { return busyJob_ != 0; }
  quint64 latestRunJob() const { return runJob_; }

  // ---- training (session_training.cpp) ----
  // A fresh model and optimizer from the settings; stops a running training
  // first. A failure keeps the previous model.
  quint64 trainReset(const TrainSettings& settings);
  // steps > 0: that many steps; steps < 0: until trainPause(). One step per
  // posted job, so other jobs interleave and a pause lands before the next
  // step. `captureGraph` snapshots the first step's graph (trainGraph).
  quint64 trainRun(int steps, bool captureGraph = false);
  void trainPause();
  // Pauses, and abandons a step in flight whose optimizer has no state yet
  // (the first after a reset or a load, which compiles the step's kernels):
  // it stops at its next kernel and leaves nothing changed (trainCancelled).
  void trainCancel();
  bool training() const { return trainRunJob_ != 0; }
  quint64 trainEvaluate();
  quint64 trainHistograms(const QString& parameter, int bins);
  quint64 trainSave(const QString& path);
  quint64 trainLoad(const QString& path);
  quint64 trainProbe(int count);  // logits of the first `count` test images

 signals:
  void progress(quint64 job, const QString& stage, int percent);
  // A classify's cold run compiling its new kernels: `ready` of `total`,
  // both over the whole cold run (told when a realize finds new kernels,
  // then after each kernel can run; nothing when all are compiled already).
  void compileProgress(quint64 job, const QString& device, int ready, int total);
  // Then its timed warm runs: `run` (1-based) of `runs` is starting.
  void runProgress(quint64 job, const QString& device, int run, int runs);
  // A re-tune's search: `done` of `total` kernels searched (total grows as
  // the model's realizes find kernels); then retuned with how many.
  void tuneProgress(quint64 job, int done, int total);
  void retuned(quint64 job, int searched);
  void warningKernelBuilt(const QString& device, const QString& name, const QString& source, const QString& buildLog);
  void devicesReady(const tlui::DeviceList& devices);
  void modelLoaded(const tlui::ModelPtr& model);
  void onnxInspected(const tlui::OnnxPtr& graph);
  // `image` is the picture to show (at most 2048 pixels a side), `size` the file's.
  void imageDecoded(quint64 job, const QString& path, const QImage& image, const QSize& size);
  void classified(const tlui::RunPtr& run);
  void compared(const tlui::ComparePtr& result);
  void failed(quint64 job, tlui::Session::FailureSource source, const QString& message);
  void cancelled(quint64 job);
  void idle();
  void exported(quint64 job, const QString& path);

  // Training results of the newest model only (older ones are dropped);
  // failures arrive through failed() with FailureSource::Train.
  void trainReady(const tlui::TrainSetupPtr& setup);
  void trainStepped(const tlui::TrainStepPtr& step);
  void trainGraph(const tlui::RunPtr& run);
  void trainEvaluated(const tlui::TrainEval& eval);
  void trainHistogramsReady(const tlui::HistogramsPtr& histograms);
  void trainSaved(const QString& path);
  void trainLoaded(const QString& path);
  void trainProbed(const QList<float>& logits);
  void trainStopped(quint64 job, int steps);  // a run ended: done, paused, cancelled or failed
  // A step compiling its new kernels: `ready` of `total` (CompileProgress);
  // `cancellable`: trainCancel() abandons this step.
  void trainCompileProgress(quint64 job, const QString& device, int ready, int total, bool cancellable);
  void trainCancelled(quint64 job);  // the step was abandoned; trainStopped follows

 private:
  using Flag = std::shared_ptr<std::atomic<bool>>;
  void post(std::function<void()> work);
  // Called on the worker thread; hops back to the UI thread and drops the
  // result when a newer job of the same channel exists.
  void deliverRun(quint64 job, std::function<void()> emitter);
  void finishRun(quint64 job);
  Flag startRunJob(quint64 job);
  void classifyOnWorker(quint64 job, const Flag& flag, const QString& imagePath, const QString& device);
  void timeWarmRuns(quint64 job, const tl::Image& image, RunData& data);  // on the worker
  void checkInputMatters(const tl::Image& image, RunData& data);
  // Training: the worker-side helpers, run on thread_.
  void trainChunk(quint64 job, Flag stop, Flag cancel, int remaining, int done, bool capture);
  // Runs `work` on the worker; a failure's message starts with `context`.
  void trainJob(quint64 job, const QString& context, std::function<void(TrainWorker&)> work);
  void deliverTrain(quint64 generation, std::function<void()> emitter);
  void trainFailed(quint64 job, const QString& message);

  QThread thread_;
  QObject* workerContext_ = nullptr;  // lives on thread_
  struct WorkerState;
  std::unique_ptr<WorkerState> state_;  // touched only on thread_
  quint64 nextJob_ = 1;
  quint64 runJob_ = 0;    // newest classify/compare request
  quint64 modelJob_ = 0;  // newest model request
  quint64 busyJob_ = 0;
  Flag runFlag_;
  std::unique_ptr<TrainWorker> trainer_;  // touched only on thread_
  quint64 trainGeneration_ = 0;  // the model results must belong to
  quint64 trainRunJob_ = 0;
  Flag trainStop_;
  Flag trainCancel_;  // of the newest run: trainCancel()
  // Set when the window closes: a training step in flight (a cold first one
  // compiles for a while) stops at its next kernel instead of delaying exit.
  std::atomic<bool> closing_{false};
};

}  // namespace tlui
