// The tuner, visible (core/tune.h): per kernel of the run shown, the
// renderings the tuner timed, each one's best time, and the one it chose;
// whether this run searched or read the choice from the kernel cache. A
// click on a row selects its kernel everywhere. Tuning is off unless
// TINYLENS_TUNE is set (tinylens-cli --tune, scripts/bench): the pane says so.
#pragma once
#include <QWidget>

#include "ui/run_data.h"

class QLabel;
class QTableWidget;

namespace tlui {

class TunerPane : public QWidget {
  Q_OBJECT
 public:
  explicit TunerPane(QWidget* parent = nullptr);
  void setRun(const RunPtr& run);
  QString summaryText() const;
  QTableWidget* table() const { return table_; }

 signals:
  void kernelSelected(int record);

 private:
  QLabel* summary_;
  QTableWidget* table_;
  std::vector<int> recordOfRow_;
};

}  // namespace tlui
