// Runs the same model and image on several devices and lays the numbers side
// by side: latency chart and table, per-kernel times, logit agreement.
#pragma once
#include <QWidget>

#include "ui/models/compare_model.h"

class QChartView;
class QLabel;
class QListWidget;
class QPushButton;

namespace tlui {

class ComparePane : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePane(QWidget* parent = nullptr);
  void setDevices(const DeviceList& devices);
  QStringList checkedDevices() const;
  void setChecked(const QStringList& devices);
  void setResult(const ComparePtr& result);
  void setBusy(bool busy);
  CompareLatencyModel* latencyModel() const { return latency_; }
  CompareKernelModel* kernelModel() const { return kernels_; }
  QString summary() const;

 signals:
  void compareRequested(const QStringList& devices);

 private:
  QListWidget* devices_;
  QPushButton* run_;
  QLabel* summary_;
  QChartView* chart_;
  CompareLatencyModel* latency_;
  CompareKernelModel* kernels_;
};

}  // namespace tlui
