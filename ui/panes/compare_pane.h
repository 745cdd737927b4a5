// Runs the same model and image on several devices and lays the numbers side
// by side, in a window of its own: one row per device (cold, warm, kernel
// sum, host overhead, speed-up, top-1, logit difference to the reference), a
// chart of the warm run split into kernel time and host overhead, and the
// kernels matched across devices with their speed-ups.
#pragma once
#include <QWidget>

#include "ui/models/compare_model.h"

class QChartView;
class QComboBox;
class QLabel;
class QListWidget;
class QPushButton;
class QTableView;

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
  void setReference(int device);  // index into the result's runs
  CompareLatencyModel* latencyModel() const { return latency_; }
  CompareKernelModel* kernelModel() const { return kernels_; }
  QChartView* chartView() const { return chart_; }
  QTableView* deviceTable() const { return deviceTable_; }
  QTableView* kernelTable() const { return kernelTable_; }
  QComboBox* referenceBox() const { return reference_; }
  QString summary() const;

 protected:
  void keyPressEvent(QKeyEvent* event) override;

 signals:
  void compareRequested(const QStringList& devices);

 private:
  void rebuildChart();
  void updateSummary();

  QListWidget* devices_;
  QPushButton* run_;
  QComboBox* reference_;
  QLabel* summary_;
  QChartView* chart_;
  QTableView *deviceTable_, *kernelTable_;
  CompareLatencyModel* latency_;
  CompareKernelModel* kernels_;
  ComparePtr result_;
};

}  // namespace tlui
