#include "histogram_view.h"

#include <QPainter>
#include <algorithm>

namespace tlui {

HistogramView::HistogramView(const QString& title, QWidget* parent) : QWidget(parent), title_(title) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void HistogramView::setHistogram(const Histogram& histogram, const QString& note) {
  histogram_ = histogram;
  note_ = note;
  setToolTip(histogram.bins.empty()
                 ? note
                 : tr("%1 values in [%2, %3]%4")
                       .arg(histogram.total())
                       .arg(histogram.low, 0, 'g', 4)
                       .arg(histogram.high, 0, 'g', 4)
                       .arg(histogram.nonFinite ? tr(", %1 not finite").arg(histogram.nonFinite) : QString()));
  update();
}

void HistogramView::clear() { setHistogram({}, {}); }

void HistogramView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QFontMetrics fm = p.fontMetrics();
  const int line = fm.height();
  p.setPen(palette().text().color());
  p.drawText(QRect(4, 2, width() - 8, line), Qt::AlignLeft, title_);
  if (!note_.isEmpty()) p.drawText(QRect(4, 2, width() - 8, line), Qt::AlignRight, note_);
  const QRect plot(4, line + 6, width() - 8, height() - 2 * line - 12);
  if (histogram_.bins.empty() || plot.height() < 4) {
    p.drawText(plot, Qt::AlignCenter, tr("no data"));
    return;
  }
  const qint64 peak = std::max<qint64>(1, *std::max_element(histogram_.bins.begin(), histogram_.bins.end()));
  const double barWidth = double(plot.width()) / double(histogram_.bins.size());
  const QColor bar = palette().highlight().color();
  for (size_t i = 0; i < histogram_.bins.size(); ++i) {
    const double h = double(plot.height()) * double(histogram_.bins[i]) / double(peak);
    p.fillRect(QRectF(plot.left() + double(i) * barWidth, plot.bottom() - h, std::max(1.0, barWidth - 1), h), bar);
  }
  p.setPen(palette().text().color());
  const QRect axis(plot.left(), plot.bottom() + 2, plot.width(), line);
  p.drawText(axis, Qt::AlignLeft, QString::number(histogram_.low, 'g', 3));
  p.drawText(axis, Qt::AlignRight, QString::number(histogram_.high, 'g', 3));
}

}  // namespace tlui
