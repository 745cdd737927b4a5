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

#include "run_data.h"

namespace tlui {

class Session : public QObject {
  Q_OBJECT
 public:
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
  void cancel();  // the running classify/compare job, if any

  bool busy() const { return busyJob_ != 0; }
  quint64 latestRunJob() const { return runJob_; }

 signals:
  void progress(quint64 job, const QString& stage, int percent);
  void devicesReady(const tlui::DeviceList& devices);
  void modelLoaded(const tlui::ModelPtr& model);
  void onnxInspected(const tlui::OnnxPtr& graph);
  void imageDecoded(quint64 job, const QString& path, const QImage& image);
  void classified(const tlui::RunPtr& run);
  void compared(const tlui::ComparePtr& result);
  // `what` is "image", "model", "run" or "compare": the widget that keeps
  // its previous state decides by it.
  void failed(quint64 job, const QString& what, const QString& message);
  void cancelled(quint64 job);
  void idle();

 private:
  using Flag = std::shared_ptr<std::atomic<bool>>;
  void post(std::function<void()> work);
  // Called on the worker thread; hops back to the UI thread and drops the
  // result when a newer job of the same channel exists.
  void deliverRun(quint64 job, std::function<void()> emitter);
  void finishRun(quint64 job);
  Flag startRunJob(quint64 job);

  QThread thread_;
  QObject* workerContext_ = nullptr;  // lives on thread_
  struct WorkerState;
  std::unique_ptr<WorkerState> state_;  // touched only on thread_
  quint64 nextJob_ = 1;
  quint64 runJob_ = 0;    // newest classify/compare request
  quint64 modelJob_ = 0;  // newest model request
  quint64 busyJob_ = 0;
  Flag runFlag_;
};

}  // namespace tlui
