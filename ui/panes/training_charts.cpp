#include "training_charts.h"

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

// The dock is wide and short: titles live in the chart, not on the axes.
QValueAxis* makeAxis(const char* format) {
  auto* a = new QValueAxis;
  a->setLabelFormat(format);
  a->setTickCount(5);
  a->setRange(0, 1);
  return a;
}

QChartView* makeView(QChart* chart, const QString& title) {
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignTop);
  chart->setMargins(QMargins(2, 2, 2, 2));
  auto* view = new QChartView(chart);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumSize(180, 140);
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
  lossX_ = makeAxis("%d");
  lossY_ = makeAxis("%.2f");
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
  accX_ = makeAxis("%d");
  accY_ = makeAxis("%.1f");
  acc->addAxis(accX_, Qt::AlignBottom);
  acc->addAxis(accY_, Qt::AlignLeft);
  smoothAccuracy_ = makeSeries<QLineSeries>(tr("train (smoothed)"), strong);
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
  for (QValueAxis* a : {lossX_, lossY_, accX_, accY_}) a->setRange(0, 1);
  emaLoss_ = emaAccuracy_ = emaWeight_ = 0;
}

// Axes only grow, and x in jumps, so a long run does not rescale at every step.
void TrainingCharts::grow(QValueAxis* x, QValueAxis* y, double px, double py) {
  if (px > x->max()) x->setMax(std::max(px, x->max() * 1.25));
  if (std::isfinite(py) && py > y->max()) y->setMax(py * 1.1);
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
