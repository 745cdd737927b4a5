// The Session's training jobs. The model, optimizer and data live in a
// TrainWorker touched only on the worker thread; a run is a chain of one-step
// jobs, each posting the next, so a pause (or a classify request) gets in
// between two steps and never waits for a whole run.
#include "core/realize.h"
#include "ui/session.h"
#include "ui/train_worker.h"

namespace tlui {

namespace {
// What interrupts a step: closing the window, and trainCancel() when the
// step can be abandoned whole (TrainWorker::cancellable). A pause waits for
// the step to end, so a step is always applied whole or not at all.
struct CancelScope {
  explicit CancelScope(const std::atomic<bool>* flag) { tl::set_cancel_flag(flag); }
  ~CancelScope() { tl::set_cancel_flag(nullptr); }
};
}  // namespace

void Session::deliverTrain(quint64 generation, std::function<void()> emitter) {
  QMetaObject::invokeMethod(
      this,
      [this, generation, emitter = std::move(emitter)] {
        if (generation != trainGeneration_) return;  // a newer reset replaced that model
        emitter();
      },
      Qt::QueuedConnection);
}

void Session::trainFailed(quint64 job, const QString& message) {
  QMetaObject::invokeMethod(this, [this, job, message] { emit failed(job, FailureSource::Train, message); }, Qt::QueuedConnection);
}

void Session::trainJob(quint64 job, const QString& context, std::function<void(TrainWorker&)> work) {
  post([this, job, context, work = std::move(work)] {
    try {
      work(*trainer_);
    } catch (const std::exception& e) {
      trainFailed(job, QString("%1: %2").arg(context, QString::fromUtf8(e.what())));
    }
  });
}

quint64 Session::trainReset(const TrainSettings& settings) {
  quint64 job = nextJob_++;
  trainPause();
  trainGeneration_ = job;
  post([this, job, settings] {
    try {
      TrainSetupPtr setup = trainer_->reset(settings, job);
      deliverTrain(job, [this, setup] { emit trainReady(setup); });
    } catch (const std::exception& e) {
      // The worker kept its previous model: its results count again.
      quint64 kept = trainer_->generation();
      QString msg = QString("Could not set up training: %1").arg(QString::fromUtf8(e.what()));
      QMetaObject::invokeMethod(
          this,
          [this, job, kept, msg] {
            if (trainGeneration_ == job) trainGeneration_ = kept;
            emit failed(job, FailureSource::Train, msg);
          },
          Qt::QueuedConnection);
    }
  });
  return job;
}

quint64 Session::trainRun(int steps, bool captureGraph) {
  quint64 job = nextJob_++;
  if (trainStop_) trainStop_->store(true);
  trainStop_ = std::make_shared<std::atomic<bool>>(false);
  trainCancel_ = std::make_shared<std::atomic<bool>>(false);
  trainRunJob_ = job;
  Flag stop = trainStop_, cancel = trainCancel_;
  post([this, job, stop, cancel, steps, captureGraph] { trainChunk(job, stop, cancel, steps, 0, captureGraph); });
  return job;
}

void Session::trainPause() {
  if (trainStop_) trainStop_->store(true);
}

void Session::trainCancel() {
  trainPause();
  if (trainCancel_) trainCancel_->store(true);
}

void Session::trainChunk(quint64 job, Flag stop, Flag cancel, int remaining, int done, bool capture) {
  auto finish = [this, job](int steps) {
    QMetaObject::invokeMethod(
        this,
        [this, job, steps] {
          if (trainRunJob_ == job) trainRunJob_ = 0;
          emit trainStopped(job, steps);
        },
        Qt::QueuedConnection);
  };
  // A run until paused (remaining < 0) ends with the schedule's epochs.
  if (stop->load() || remaining == 0 || !trainer_->ready() || (remaining < 0 && trainer_->scheduleComplete())) {
    finish(done);
    return;
  }
  try {
    std::shared_ptr<RunData> graph;
    if (capture) {
      graph = std::make_shared<RunData>();
      graph->job = job;
      graph->model = tr("training step");
    }
    TrainStepPtr step;
    {
      const bool cancellable = trainer_->cancellable();
      CancelScope scope(cancellable ? cancel.get() : &closing_);
      // A step that compiles (the first one: about 14 s on PoCL) says how far.
      const QString device = trainer_->device();
      tl::CompileProgress watch([this, job, device, cancellable](size_t ready, size_t total) {
        QMetaObject::invokeMethod(
            this, [=, this] { emit trainCompileProgress(job, device, int(ready), int(total), cancellable); },
            Qt::QueuedConnection);
      });
      step = trainer_->step(graph.get());
    }
    const quint64 generation = step->generation;
    deliverTrain(generation, [this, step] { emit trainStepped(step); });
    if (graph) {
      graph->device = step->kernels.empty() ? QString() : qs(step->kernels.front().kernel->device);
      graph->model = tr("training step %1").arg(step->step);
      RunPtr run = graph;
      deliverTrain(generation, [this, run] { emit trainGraph(run); });
    }
    if (trainer_->evaluationDue()) {
      TrainEval eval = trainer_->evaluate();
      deliverTrain(generation, [this, eval] { emit trainEvaluated(eval); });
    }
  } catch (const tl::Cancelled&) {
    if (closing_.load()) return;  // the window is closing
    QMetaObject::invokeMethod(this, [this, job] { emit trainCancelled(job); }, Qt::QueuedConnection);
    finish(done);
    return;
  } catch (const std::exception& e) {
    trainFailed(job, QString("Training step failed: %1").arg(QString::fromUtf8(e.what())));
    finish(done);
    return;
  }
  const int left = remaining > 0 ? remaining - 1 : remaining;
  post([this, job, stop, cancel, left, done] { trainChunk(job, stop, cancel, left, done + 1, false); });
}

quint64 Session::trainEvaluate() {
  quint64 job = nextJob_++;
  trainJob(job, tr("Evaluation failed"), [this](TrainWorker& w) {
    TrainEval eval = w.evaluate();
    deliverTrain(eval.generation, [this, eval] { emit trainEvaluated(eval); });
  });
  return job;
}

quint64 Session::trainHistograms(const QString& parameter, int bins) {
  quint64 job = nextJob_++;
  trainJob(job, tr("Could not compute the histograms of %1").arg(parameter), [this, parameter, bins](TrainWorker& w) {
    HistogramsPtr h = w.histograms(parameter, bins);
    deliverTrain(w.generation(), [this, h] { emit trainHistogramsReady(h); });
  });
  return job;
}

quint64 Session::trainSave(const QString& path) {
  quint64 job = nextJob_++;
  trainJob(job, tr("Could not save the model to %1").arg(path), [this, path](TrainWorker& w) {
    w.save(path);
    QMetaObject::invokeMethod(this, [this, path] { emit trainSaved(path); }, Qt::QueuedConnection);
  });
  return job;
}

quint64 Session::trainLoad(const QString& path) {
  quint64 job = nextJob_++;
  trainJob(job, tr("Could not load the model from %1").arg(path), [this, path](TrainWorker& w) {
    w.load(path);
    deliverTrain(w.generation(), [this, path] { emit trainLoaded(path); });
  });
  return job;
}

quint64 Session::trainProbe(int count) {
  quint64 job = nextJob_++;
  trainJob(job, tr("Could not run the model"), [this, count](TrainWorker& w) {
    std::vector<float> v = w.probe(count);
    QList<float> logits(v.begin(), v.end());
    deliverTrain(w.generation(), [this, logits] { emit trainProbed(logits); });
  });
  return job;
}

}  // namespace tlui
