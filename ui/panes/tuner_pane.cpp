#include "ui/panes/tuner_pane.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

namespace tlui {

TunerPane::TunerPane(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel(tr("No run yet."), this);
  summary_->setWordWrap(true);
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
  layout->addWidget(table_, 1);
  connect(table_, &QTableWidget::cellClicked, this, [this](int row, int) {
    if (row >= 0 && size_t(row) < recordOfRow_.size()) emit kernelSelected(recordOfRow_[size_t(row)]);
  });
}

QString TunerPane::summaryText() const { return summary_->text(); }

void TunerPane::setRun(const RunPtr& run) {
  table_->setRowCount(0);
  recordOfRow_.clear();
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
  if (tuned == 0)
    summary_->setText(tr("%1: no kernel was tuned. Tuning is off unless TINYLENS_TUNE=1 is set when tinylens starts "
                         "(tinylens-cli --tune): then each new kernel's renderings are timed and the fastest kept "
                         "in the kernel cache.")
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
