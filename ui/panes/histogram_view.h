// Bars of a histogram the worker computed; the widget only draws them, with
// the value range under the bars and the counts in a tooltip.
#pragma once
#include <QWidget>
#include <utility>

#include "ui/train_data.h"

namespace tlui {

class HistogramView : public QWidget {
  Q_OBJECT
 public:
  explicit HistogramView(const QString& title, QWidget* parent = nullptr);
  void setHistogram(const Histogram& histogram, const QString& note = {});
  void clear();
  const Histogram& histogram() const { return histogram_; }
  QSize sizeHint() const override { return {260, 140}; }
  QSize minimumSizeHint() const override { return {60, 64}; }
  // Where the title and the note go at this width: side by side when both
  // fit, else the note on a line of its own under the title.
  std::pair<QRect, QRect> captionRects(int width) const;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QString title_, note_;
  Histogram histogram_;
};

}  // namespace tlui
