// The kernel table (sortable, filterable) with a bar chart of the top kernels.
#pragma once
#include <QSortFilterProxyModel>
#include <QWidget>

#include "ui/models/kernel_table_model.h"

class QChartView;
class QLineEdit;
class QTableView;
class QLabel;
class QMenu;

namespace tlui {

class KernelPane : public QWidget {
  Q_OBJECT
 public:
  explicit KernelPane(QWidget* parent = nullptr);
  KernelTableModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  QTableView* view() const { return view_; }
  // `wallSeconds` > 0: the wall time of the run these kernels belong to,
  // shown beside their sum so the two are not mistaken for each other.
  // `byJit`: that run was replayed by a Jit, without building the graph.
  // `subject`: what the kernels belong to ("tinyA.onnx on cpu, squirrel.jpg"),
  // leading the totals line.
  void setRecords(const std::vector<tl::ProfileRecord>& records, double wallSeconds = 0, bool byJit = false,
                  const QString& subject = {});
  QString totalText() const;
  void selectRecord(int record);
  int chartBars() const { return chartBars_; }
  QStringList chartLabels() const { return chartLabels_; }  // the bars' names, slowest first
  // The table's right-click menu for the row of `index` (a proxy index):
  // copy the kernel's name, its source or the row. The caller owns it.
  QMenu* makeContextMenu(const QModelIndex& index);

 signals:
  void kernelSelected(int record);

 private:
  void updateChart();
  KernelTableModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* view_;
  QLineEdit* filter_;
  QLabel* total_;
  QChartView* chart_;
  int chartBars_ = 0;
  QStringList chartLabels_;
};

}  // namespace tlui
