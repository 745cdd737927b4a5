// The tuner, visible (core/tune.h): per kernel of the run shown, the
// renderings the tuner timed, each one's best time, and the one it chose;
// whether this run searched or read the choice from the kernel cache. A
// click on a row selects its kernel everywhere. Tuning is off unless
// TINYLENS_TUNE is set (tinylens-cli --tune, scripts/bench) or the model was
// tuned from here: Re-tune Model searches every kernel of the run again,
// Re-tune Kernel the selected row's kernel only, on the Session's worker,
// with a progress bar and Cancel (which keeps every previous choice).
#pragma once
#include <QWidget>

#include "ui/run_data.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace tlui {

class TunerPane : public QWidget {
  Q_OBJECT
 public:
  explicit TunerPane(QWidget* parent = nullptr);
  void setRun(const RunPtr& run);
  QString summaryText() const;
  QString statusText() const;
  QTableWidget* table() const { return table_; }
  QPushButton* retuneModelButton() const { return retuneModel_; }
  QPushButton* retuneKernelButton() const { return retuneKernel_; }
  QPushButton* cancelButton() const { return cancel_; }
  QProgressBar* progressBar() const { return progress_; }

  // The window's answers to retuneRequested: the Session's job started, its
  // progress, the search done, the job cancelled or failed (other jobs'
  // answers are ignored), or why no re-tune can start.
  void retuneStarted(quint64 job, const QString& what);
  void setProgress(quint64 job, int done, int total);
  void retuneDone(quint64 job, int searched);
  void jobCancelled(quint64 job);
  void jobFailed(quint64 job, const QString& message);
  void setStatus(const QString& text);
  bool retuning() const { return job_ != 0; }

 signals:
  void kernelSelected(int record);
  // kernel and outputShape empty: every kernel of the model's run.
  void retuneRequested(const QString& kernel, const QString& outputShape);
  void cancelRequested();

 private:
  void finishRetune(const QString& text);
  void updateButtons();

  QLabel* summary_;
  QTableWidget* table_;
  QPushButton* retuneModel_;
  QPushButton* retuneKernel_;
  QPushButton* cancel_;
  QProgressBar* progress_;
  QLabel* status_;
  std::vector<int> recordOfRow_;
  RunPtr run_;
  quint64 job_ = 0;  // the re-tune going on
};

}  // namespace tlui
