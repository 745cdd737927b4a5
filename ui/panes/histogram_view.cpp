#include "ui/panes/histogram_view.h"

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

std::pair<QRect, QRect> HistogramView::captionRects(int width) const {
  const QFontMetrics fm(font());
  const int line = fm.height();
  const int titleWidth = fm.horizontalAdvance(title_), noteWidth = fm.horizontalAdvance(note_);
  const QRect title(4, 2, std::min(titleWidth, width - 8), line);
  if (note_.isEmpty()) return {title, QRect()};
  if (titleWidth + noteWidth + 12 <= width - 8)
    return {title, QRect(width - 4 - noteWidth, 2, noteWidth, line)};
  return {title, QRect(4, 2 + line, std::min(noteWidth, width - 8), line)};
}

void HistogramView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QFontMetrics fm = p.fontMetrics();
  const int line = fm.height();
  p.setPen(palette().text().color());
  const auto [titleRect, noteRect] = captionRects(width());
  p.drawText(titleRect, Qt::AlignLeft, fm.elidedText(title_, Qt::ElideRight, titleRect.width()));
  if (!note_.isEmpty()) p.drawText(noteRect, Qt::AlignLeft, fm.elidedText(note_, Qt::ElideRight, noteRect.width()));
  const int top = std::max(titleRect.bottom(), noteRect.isNull() ? 0 : noteRect.bottom()) + 4;
  const QRect plot(4, top, width() - 8, height() - top - line - 6);
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
