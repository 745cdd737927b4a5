// The Tuner dock's re-tune: its buttons start a Session job on the worker
// (Session::retune) on the image and device of the window; its progress,
// end, cancel and failure come back to the pane and the status bar.
#include <QFileInfo>
#include <QLabel>
#include <QProgressBar>
#include <QToolButton>

#include "ui/main_window.h"

namespace tlui {

void MainWindow::connectTuner() {
  connect(tuner_, &TunerPane::retuneRequested, this, [this](const QString& kernel, const QString& shape) {
    if (currentImage_.isEmpty()) {
      tuner_->setStatus(tr("Classify an image first: the tuner times the kernels of its run."));
      return;
    }
    const QString what = kernel.isEmpty() ? tr("every kernel of %1 on %2").arg(modelShortName(loadedModel_.isEmpty()
                                                                                               ? QString("efficientnet-lite0")
                                                                                               : loadedModel_),
                                                                              device_)
                                          : tr("%1 (%2) on %3").arg(kernel, shape, device_);
    const quint64 job = session_->retune(currentImage_, device_, kernel, shape);
    tuner_->retuneStarted(job, what);
    status_->setText(tr("Re-tuning %1...").arg(what));
    progress_->setRange(0, 0);
    progress_->show();
    cancel_->show();
    updateRunActions();
  });
  connect(tuner_, &TunerPane::cancelRequested, session_, &Session::cancel);
  connect(session_, &Session::tuneProgress, this, [this](quint64 job, int done, int total) {
    tuner_->setProgress(job, done, total);
    status_->setText(tr("Re-tuning on %1: %2 of %3 kernels searched").arg(device_).arg(done).arg(total));
    progress_->setRange(0, std::max(total, 1));
    progress_->setValue(done);
    progress_->setFormat(tr("%1/%2 kernels").arg(done).arg(total));
  });
  connect(session_, &Session::retuned, tuner_, &TunerPane::retuneDone);
  connect(session_, &Session::cancelled, tuner_, &TunerPane::jobCancelled);
  connect(session_, &Session::failed, this, [this](quint64 job, Session::FailureSource, const QString& message) {
    tuner_->jobFailed(job, message);
  });
}

}  // namespace tlui
