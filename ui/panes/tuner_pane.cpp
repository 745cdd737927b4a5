#include "ui/panes/tuner_pane.h"

#include <QHeaderView>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

namespace tlui {

TunerPane::TunerPane(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel(tr("No run yet."), this);
  summary_->setWordWrap(true);
  retuneModel_ = new QPushButton(tr("Re-tune Model"), this);
  retuneModel_->setToolTip(tr("Time every rendering of every kernel of the run again and keep the fastest"));
  retuneKernel_ = new QPushButton(tr("Re-tune Kernel"), this);
  retuneKernel_->setToolTip(tr("Time the selected row's kernel again; the others keep their choices"));
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setToolTip(tr("Stop the search: every previous choice is kept"));
  progress_ = new QProgressBar(this);
  progress_->setMaximumWidth(220);
  progress_->setFormat(tr("%v/%m kernels"));
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  auto* bar = new QHBoxLayout;
  bar->addWidget(retuneModel_);
  bar->addWidget(retuneKernel_);
  bar->addWidget(progress_);
  bar->addWidget(cancel_);
  bar->addStretch(1);
  table_ = new QTableWidget(0, 6, this);
  table_->setHorizontalHeaderLabels(
      {tr("#"), tr("Kernel"), tr("Candidate"), tr("Time (us)"), tr("vs chosen"), tr("Choice")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(summary_);
  layout->addLayout(bar);
  layout->addWidget(status_);
  layout->addWidget(table_, 1);
  connect(retuneModel_, &QPushButton::clicked, this, [this] { emit retuneRequested({}, {}); });
  connect(retuneKernel_, &QPushButton::clicked, this, [this] {
    const int row = table_->currentRow();
    if (!run_ || row < 0 || size_t(row) >= recordOfRow_.size()) return;
    const tl::KernelInfo& k = *run_->records[size_t(recordOfRow_[size_t(row)])].kernel;
    emit retuneRequested(QString::fromStdString(k.name), QString::fromStdString(k.output_shape));
  });
  connect(cancel_, &QPushButton::clicked, this, &TunerPane::cancelRequested);
  connect(table_, &QTableWidget::itemSelectionChanged, this, &TunerPane::updateButtons);
  updateButtons();
  connect(table_, &QTableWidget::cellClicked, this, [this](int row, int) {
    if (row >= 0 && size_t(row) < recordOfRow_.size()) emit kernelSelected(recordOfRow_[size_t(row)]);
  });
}

QString TunerPane::summaryText() const { return summary_->text(); }
QString TunerPane::statusText() const { return status_->text(); }

void TunerPane::updateButtons() {
  const bool busy = job_ != 0;
  retuneModel_->setEnabled(!busy && run_);
  retuneKernel_->setEnabled(!busy && run_ && table_->currentRow() >= 0);
  cancel_->setVisible(busy);
  progress_->setVisible(busy);
}

void TunerPane::setStatus(const QString& text) { status_->setText(text); }

void TunerPane::retuneStarted(quint64 job, const QString& what) {
  job_ = job;
  progress_->setRange(0, 0);  // busy until the search counts its kernels
  status_->setText(tr("Re-tuning %1: compiling its renderings...").arg(what));
  updateButtons();
}

void TunerPane::setProgress(quint64 job, int done, int total) {
  if (job != job_) return;
  progress_->setRange(0, std::max(total, 1));
  progress_->setValue(done);
  status_->setText(tr("Re-tuning: %1 of %2 kernels searched").arg(done).arg(total));
}

void TunerPane::finishRetune(const QString& text) {
  job_ = 0;
  status_->setText(text);
  updateButtons();
}

void TunerPane::retuneDone(quint64 job, int searched) {
  if (job != job_) return;
  finishRetune(tr("Re-tuned: %1 kernels searched and their choices stored; running the model with them...")
                   .arg(searched));
}

void TunerPane::jobCancelled(quint64 job) {
  if (job != job_) return;
  finishRetune(tr("Re-tune cancelled: every kernel keeps its previous choice, and the table its previous run."));
}

void TunerPane::jobFailed(quint64 job, const QString& message) {
  if (job != job_) return;
  finishRetune(message);
}

void TunerPane::setRun(const RunPtr& run) {
  run_ = run;
  table_->setRowCount(0);
  recordOfRow_.clear();
  updateButtons();
  if (!run) {
    summary_->setText(tr("No run yet."));
    return;
  }
  int tuned = 0, searched = 0;
  for (size_t i = 0; i < run->records.size(); ++i) {
    const tl::KernelInfo& k = *run->records[i].kernel;
    if (k.tuned.empty()) continue;
    ++tuned;
    searched += k.tune_searched;
    double chosen = 0;
    for (const auto& [label, seconds] : k.tune_candidates)
      if (label == k.tuned) chosen = seconds;
    for (const auto& [label, seconds] : k.tune_candidates) {
      const int row = table_->rowCount();
      table_->insertRow(row);
      recordOfRow_.push_back(int(i));
      const bool winner = label == k.tuned;
      const QStringList cells = {
          QString::number(i), QString::fromStdString(k.name), QString::fromStdString(label),
          QString::number(seconds * 1e6, 'f', 1),
          chosen > 0 ? QString("%1x").arg(seconds / chosen, 0, 'f', 2) : QString("-"),
          winner ? (k.tune_searched ? tr("chosen (searched in this run)") : tr("chosen (from the kernel cache)"))
                 : QString()};
      for (int c = 0; c < cells.size(); ++c) {
        auto* item = new QTableWidgetItem(cells[c]);
        if (winner) {
          QFont bold = item->font();
          bold.setBold(true);
          item->setFont(bold);
        }
        table_->setItem(row, c, item);
      }
    }
  }
  table_->resizeColumnsToContents();
  updateButtons();
  if (tuned == 0)
    summary_->setText(tr("%1: no kernel was tuned. Tuning is off unless TINYLENS_TUNE=1 is set when tinylens starts "
                         "(tinylens-cli --tune) or Re-tune Model is pressed: then each kernel's renderings are timed "
                         "and the fastest kept in the kernel cache.")
                          .arg(runSubject(*run)));
  else
    summary_->setText(tr("%1: %2 kernels tuned, %3 searched in this run, %4 read from the kernel cache; "
                         "bold: the rendering the tuner chose.")
                          .arg(runSubject(*run))
                          .arg(tuned)
                          .arg(searched)
                          .arg(tuned - searched));
}

}  // namespace tlui
