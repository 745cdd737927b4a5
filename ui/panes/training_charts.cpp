#include "ui/panes/training_charts.h"

#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSplitter>
#include <QValueAxis>
#include <cmath>

namespace tlui {

namespace {
constexpr double kSmoothing = 0.95;  // exponential moving average of the per-step curves
// The step axis has kXTicks intervals of a whole, round number of steps, so
// its labels are distinct integers ("0 1 2 3 4", "0 50 100 150 200").
constexpr int kXTicks = 4;

// The dock is wide and short: titles live in the chart, not on the axes.
QValueAxis* makeAxis(const char* format, double max) {
  auto* a = new QValueAxis;
  a->setLabelFormat(format);
  a->setTickCount(5);
  a->setRange(0, max);
  // A short chart cut "0.5" to "..."; the labels are short enough to show whole.
  a->setTruncateLabels(false);
  return a;
}

// The smallest 1, 2 or 5 times a power of ten that is at least `x`.
double niceCeil(double x) {
  if (!(x > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x * (1 - 1e-12)) return m * p;
  return 10 * p;
}

QChartView* makeView(QChart* chart, const QString& title) {
  chart->setTitle(title);
  // Small legend text, so a docked chart shows its series' names whole.
  QFont small = chart->legend()->font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
  chart->legend()->setFont(small);
  chart->legend()->setAlignment(Qt::AlignTop);
  chart->setMargins(QMargins(2, 2, 2, 2));
  auto* view = new QChartView(chart);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumSize(std::max(150, TrainingCharts::legendWidth(chart)), 140);
  return view;
}

void attach(QChart* chart, QAbstractSeries* s, QValueAxis* x, QValueAxis* y) {
  chart->addSeries(s);
  s->attachAxis(x);
  s->attachAxis(y);
}

template <class S>
S* makeSeries(const QString& name, const QColor& colour) {
  auto* s = new S;
  s->setName(name);
  s->setColor(colour);
  return s;
}
}  // namespace

TrainingCharts::TrainingCharts(QWidget* parent) : QWidget(parent) {
  const QColor faint(120, 160, 230, 110), strong(30, 80, 200), test(220, 90, 20);
  auto* loss = new QChart;
  lossX_ = makeAxis("%d", kXTicks);
  lossY_ = makeAxis("%.2f", 1);
  loss->addAxis(lossX_, Qt::AlignBottom);
  loss->addAxis(lossY_, Qt::AlignLeft);
  trainLoss_ = makeSeries<QLineSeries>(tr("train"), faint);
  smoothLoss_ = makeSeries<QLineSeries>(tr("smoothed"), strong);
  testLoss_ = makeSeries<QScatterSeries>(tr("test"), test);
  testLoss_->setMarkerSize(8);
  for (QAbstractSeries* s : {static_cast<QAbstractSeries*>(trainLoss_), static_cast<QAbstractSeries*>(smoothLoss_),
                             static_cast<QAbstractSeries*>(testLoss_)})
    attach(loss, s, lossX_, lossY_);

  auto* acc = new QChart;
  accX_ = makeAxis("%d", kXTicks);
  accY_ = makeAxis("%.1f", 1);
  acc->addAxis(accX_, Qt::AlignBottom);
  acc->addAxis(accY_, Qt::AlignLeft);
  smoothAccuracy_ = makeSeries<QLineSeries>(tr("train"), strong);
  testAccuracy_ = makeSeries<QScatterSeries>(tr("test"), test);
  testAccuracy_->setMarkerSize(8);
  attach(acc, smoothAccuracy_, accX_, accY_);
  attach(acc, testAccuracy_, accX_, accY_);

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(makeView(loss, tr("Loss by step")));
  split->addWidget(makeView(acc, tr("Accuracy by step")));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(split);
}

void TrainingCharts::clear() {
  for (QXYSeries* s : {static_cast<QXYSeries*>(trainLoss_), static_cast<QXYSeries*>(smoothLoss_),
                       static_cast<QXYSeries*>(smoothAccuracy_), static_cast<QXYSeries*>(testLoss_),
                       static_cast<QXYSeries*>(testAccuracy_)})
    s->clear();
  lossX_->setRange(0, kXTicks);
  accX_->setRange(0, kXTicks);
  lossY_->setRange(0, 1);
  accY_->setRange(0, 1);
  emaLoss_ = emaAccuracy_ = emaWeight_ = 0;
}

// Axes only grow, and x in round jumps, so a long run does not rescale at
// every step and the step labels stay whole numbers.
void TrainingCharts::grow(QValueAxis* x, QValueAxis* y, double px, double py) {
  if (px > x->max()) x->setMax(kXTicks * niceCeil(px / kXTicks));
  if (std::isfinite(py) && py > y->max()) y->setMax(py * 1.1);
}

int TrainingCharts::legendWidth(const QChart* chart) {
  const QFontMetrics fm(chart->legend()->font());
  int width = 16;  // the legend's own margins
  for (const QAbstractSeries* s : chart->series()) width += fm.horizontalAdvance(s->name()) + fm.height() + 24;
  return width;
}

void TrainingCharts::addStep(int step, double loss, double accuracy) {
  // Bias-corrected, so the smoothed curve starts at the first value.
  emaWeight_ = kSmoothing * emaWeight_ + (1 - kSmoothing);
  emaLoss_ = kSmoothing * emaLoss_ + (1 - kSmoothing) * loss;
  emaAccuracy_ = kSmoothing * emaAccuracy_ + (1 - kSmoothing) * accuracy;
  trainLoss_->append(step, loss);
  smoothLoss_->append(step, emaLoss_ / emaWeight_);
  smoothAccuracy_->append(step, emaAccuracy_ / emaWeight_);
  grow(lossX_, lossY_, step, loss);
  grow(accX_, accY_, step, 1.0);
}

void TrainingCharts::addTest(int step, double loss, double accuracy) {
  testLoss_->append(step, loss);
  testAccuracy_->append(step, accuracy);
  grow(lossX_, lossY_, step, loss);
  grow(accX_, accY_, step, 1.0);
}

}  // namespace tlui
