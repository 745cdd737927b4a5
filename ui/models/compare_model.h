// Device comparison: per-device latency, and per-kernel times side by side.
#pragma once
#include <QAbstractTableModel>
#include <QStringList>

#include "ui/run_data.h"

namespace tlui {

class CompareLatencyModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Device, ColdMs, WarmMs, KernelMs, Kernels, Top1, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setResult(const ComparePtr& result);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  ComparePtr result_;
};

// Rows are kernels matched across devices by name and occurrence ("E_64_32"
// twice gives E_64_32 and E_64_32 #2): the schedule is the same on every
// device, only the dialect differs. Columns: kernel, then one time per device.
class CompareKernelModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  void setResult(const ComparePtr& result);
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  // Seconds, or a negative number when that device has no such kernel.
  double seconds(int row, int device) const;

 private:
  QStringList devices_;
  QStringList keys_;
  std::vector<std::vector<double>> seconds_;  // [row][device]
};

}  // namespace tlui
