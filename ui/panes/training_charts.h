// The training page's two live charts: loss (per step, smoothed, test) and
// accuracy (smoothed train, test), side by side, axes growing with the data.
#pragma once
#include <QWidget>

class QChart;
class QLineSeries;
class QScatterSeries;
class QValueAxis;

namespace tlui {

class TrainingCharts : public QWidget {
  Q_OBJECT
 public:
  explicit TrainingCharts(QWidget* parent = nullptr);
  void clear();
  void addStep(int step, double loss, double accuracy);
  void addTest(int step, double loss, double accuracy);

  QLineSeries* trainLoss() const { return trainLoss_; }
  QLineSeries* smoothLoss() const { return smoothLoss_; }
  QLineSeries* smoothAccuracy() const { return smoothAccuracy_; }
  QScatterSeries* testLoss() const { return testLoss_; }
  QScatterSeries* testAccuracy() const { return testAccuracy_; }
  QValueAxis* lossStepAxis() const { return lossX_; }
  QValueAxis* accuracyStepAxis() const { return accX_; }
  // Pixels the chart's legend needs to show every series' name whole.
  static int legendWidth(const QChart* chart);

 private:
  static void grow(QValueAxis* x, QValueAxis* y, double px, double py);

  QLineSeries *trainLoss_, *smoothLoss_, *smoothAccuracy_;
  QScatterSeries *testLoss_, *testAccuracy_;
  QValueAxis *lossX_, *lossY_, *accX_, *accY_;
  double emaLoss_ = 0, emaAccuracy_ = 0, emaWeight_ = 0;
};

}  // namespace tlui
