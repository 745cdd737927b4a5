// Device comparison: one row per device (latencies, host overhead, top-1,
// logit difference to a reference device), and per-kernel times side by side
// with each kernel's speed-up over the reference.
#pragma once
#include <QAbstractTableModel>
#include <QStringList>
#include <utility>

#include "ui/run_data.h"

namespace tlui {

// Plain numbers of one device's run, derived from its RunData.
struct DeviceFigures {
  double coldMs = 0, warmMs = 0;
  double kernelMs = 0;        // sum of the inspected warm run's kernel times
  double hostMs = 0;          // warm - kernel sum: launches, copies, waiting
  double maxLogitDiff = 0;    // max |logit - reference logit|
  double speedup = 0;         // reference warm / this warm
};
DeviceFigures deviceFigures(const RunData& run, const RunData& reference);

class CompareLatencyModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Device, ColdMs, WarmMs, KernelMs, HostMs, Speedup, Kernels, Top1, LogitDiff, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;
  void setResult(const ComparePtr& result);
  // The row the others are measured against (speed-up, logit difference).
  void setReference(int row);
  int reference() const { return reference_; }
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  // Qt::UserRole: the number behind the text, for sorting and charts.
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  DeviceFigures figures(int row) const { return figures_[size_t(row)]; }

 private:
  void recompute();
  ComparePtr result_;
  int reference_ = 0;
  std::vector<DeviceFigures> figures_;
};

// Rows are kernels matched across devices by name and occurrence ("E_64_32"
// twice gives E_64_32 and E_64_32 #2): the schedule is the same on every
// device, only the dialect differs. Columns: kernel, one time per device,
// then the speed-up of each other device over the reference.
class CompareKernelModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  using QAbstractTableModel::QAbstractTableModel;
  void setResult(const ComparePtr& result);
  void setReference(int device);
  int reference() const { return reference_; }
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  // Seconds (the median over the timed runs), or a negative number when
  // that device has no such kernel.
  double seconds(int row, int device) const;
  // The fastest and slowest of the timed runs; both seconds() for one run.
  std::pair<double, double> range(int row, int device) const;
  int runs(int device) const;  // timed runs behind each time
  // reference seconds / device seconds; 0 when either is missing.
  double speedup(int row, int device) const;
  QString key(int row) const { return keys_[row]; }
  int deviceCount() const { return int(devices_.size()); }
  // The device whose speed-up column `column` shows, or -1.
  int speedupDevice(int column) const;

 private:
  QStringList devices_;
  QStringList keys_;
  std::vector<std::vector<double>> seconds_;  // [row][device]
  std::vector<std::vector<std::pair<double, double>>> range_;  // [row][device]
  std::vector<int> runs_;  // [device]
  int reference_ = 0;
};

}  // namespace tlui
