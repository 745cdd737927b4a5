// The run's memory (core/memory.h, computed on the worker): the bytes live
// at each launch drawn over the launches, the peak marked, and a table of
// the values (size, buffer size, writer, readers, lifetime, reuse). A click
// on the chart or on a row selects that launch's kernel everywhere.
#pragma once
#include <QWidget>
#include <memory>

#include "core/memory.h"
#include "ui/run_data.h"

class QLabel;
class QTableWidget;

namespace tlui {

class MemoryChart : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  void setProfile(std::shared_ptr<const tl::MemoryProfile> profile, std::vector<QString> names);
  void setSelected(int launch);
  int launchAt(int x) const;  // -1 outside the bars
  QSize sizeHint() const override { return {480, 150}; }
  QSize minimumSizeHint() const override { return {120, 80}; }

 signals:
  void launchClicked(int launch);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  QRect plotRect() const;
  std::shared_ptr<const tl::MemoryProfile> profile_;
  std::vector<QString> names_;
  int selected_ = -1;
};

class MemoryPane : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryPane(QWidget* parent = nullptr);
  void setRun(const RunPtr& run);
  void selectLaunch(int launch);  // from the kernel table: its row and the chart
  QString summaryText() const;
  QTableWidget* table() const { return table_; }
  MemoryChart* chart() const { return chart_; }

 signals:
  void kernelSelected(int record);

 private:
  QLabel* summary_;
  MemoryChart* chart_;
  QTableWidget* table_;
  RunPtr run_;
};

}  // namespace tlui
