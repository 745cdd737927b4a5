#include "ui/panes/timeline_pane.h"

#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QScrollArea>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <map>

namespace tlui {

namespace {

// The phase a host span belongs to: its name before the first number.
QString phaseOf(const std::string& name) {
  for (size_t i = 1; i + 1 < name.size(); ++i)
    if (name[i] == ' ' && name[i + 1] >= '0' && name[i + 1] <= '9') return QString::fromStdString(name.substr(0, i));
  return QString::fromStdString(name);
}

QString duration(double seconds) {
  return seconds >= 1e-3 ? QString::number(seconds * 1e3, 'f', 3) + " ms" : QString::number(seconds * 1e6, 'f', 1) + " us";
}

// The record of `run`'s kernel table that trace kernel `k` is: exact inside
// the table's own run (found in the trace by names and times), else the
// first record of the same name.
int recordOf(const RunData& run, int k) {
  if (!run.trace || k < 0 || size_t(k) >= run.trace->kernels.size()) return -1;
  const auto& all = run.trace->kernels;
  const size_t n = run.records.size();
  for (size_t start = 0; n > 0 && start + n <= all.size(); ++start) {
    bool same = true;
    for (size_t i = 0; same && i < n; ++i)
      same = all[start + i].kernel->name == run.records[i].kernel->name && all[start + i].seconds == run.records[i].seconds;
    if (same && size_t(k) >= start && size_t(k) < start + n) return int(size_t(k) - start);
  }
  for (size_t i = 0; i < n; ++i)
    if (run.records[i].kernel->name == all[size_t(k)].kernel->name) return int(i);
  return -1;
}

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void TimelineView::setRuns(const std::vector<RunPtr>& runs) {
  runs_.clear();
  rows_.clear();
  total_ = 0;
  for (const RunPtr& run : runs) {
    if (!run || !run->trace) continue;
    const int index = int(runs_.size());
    runs_.push_back(run);
    const tl::TraceDocument& doc = *run->trace;
    const QString prefix = runs.size() > 1 ? run->device + ": " : QString();
    std::map<QString, size_t> phaseRow;
    auto rowFor = [&](const QString& label, bool device) -> Row& {
      auto [it, fresh] = phaseRow.try_emplace((device ? "\x01" : "") + label, rows_.size());
      if (fresh) rows_.push_back({prefix + label, index, device, {}});
      return rows_[it->second];
    };
    // The devices' rows first: the kernels are what a trace is opened for.
    for (const auto& d : tl::place_kernels(doc.kernels, doc.origin)) {
      const auto& r = doc.kernels[d.record];
      rowFor("device " + QString::fromStdString(r.kernel->device), true)
          .spans.push_back({d.start - doc.origin, d.seconds, QString::fromStdString(r.kernel->name), int(d.record)});
      total_ = std::max(total_, d.start - doc.origin + d.seconds);
    }
    for (const auto& s : doc.host) {
      rowFor(phaseOf(s.name), false).spans.push_back({s.start - doc.origin, s.seconds, QString::fromStdString(s.name), -1});
      total_ = std::max(total_, s.start - doc.origin + s.seconds);
    }
    for (const auto& r : doc.kernels)
      if (r.enqueued > 0 && r.enqueue_seconds > 0)
        rowFor("launch", false).spans.push_back({r.enqueued - doc.origin, r.enqueue_seconds,
                                                 "launch " + QString::fromStdString(r.kernel->name), -1});
  }
  setMinimumHeight(kTop + int(rows_.size()) * kRowHeight + 4);
  fit();
}

void TimelineView::setView(double start, double end) {
  if (!(end > start)) return;
  t0_ = start, t1_ = end;
  update();
}

void TimelineView::zoom(double factor, double around) {
  if (factor <= 0) return;
  const double width = std::max((t1_ - t0_) / factor, 1e-9);
  const double share = (t1_ > t0_) ? (around - t0_) / (t1_ - t0_) : 0.5;
  setView(around - share * width, around - share * width + width);
}

void TimelineView::fit() { setView(0, std::max(total_, 1e-6) * 1.02); }

double TimelineView::xAt(double t) const {
  const double w = std::max(width() - kLabelWidth - 4, 1);
  return kLabelWidth + (t - t0_) / (t1_ - t0_) * w;
}

double TimelineView::timeAt(double x) const {
  const double w = std::max(width() - kLabelWidth - 4, 1);
  return t0_ + (x - kLabelWidth) / w * (t1_ - t0_);
}

QRectF TimelineView::spanRect(int row, int span) const {
  if (row < 0 || size_t(row) >= rows_.size() || span < 0 || size_t(span) >= rows_[size_t(row)].spans.size()) return {};
  const Span& s = rows_[size_t(row)].spans[size_t(span)];
  const double left = std::max(xAt(s.start), double(kLabelWidth));
  const double right = std::min(xAt(s.start + s.seconds), double(width() - 4));
  if (right < left) return {};
  return QRectF(left, kTop + row * kRowHeight + 2, std::max(right - left, 1.0), kRowHeight - 4);
}

std::pair<int, int> TimelineView::spanAt(QPointF pos) const {
  const int row = int((pos.y() - kTop) / kRowHeight);
  if (pos.y() < kTop || row < 0 || size_t(row) >= rows_.size() || pos.x() < kLabelWidth) return {-1, -1};
  const auto& spans = rows_[size_t(row)].spans;
  for (size_t i = spans.size(); i-- > 0;) {  // the innermost (latest) first
    const QRectF r = spanRect(row, int(i));
    if (!r.isEmpty() && r.adjusted(-1, 0, 1, 0).contains(pos)) return {row, int(i)};
  }
  return {-1, -1};
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (rows_.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, tr("No run yet: its host phases and kernels show here over time"));
    return;
  }
  p.setPen(palette().color(QPalette::Text));
  p.drawText(QRect(kLabelWidth, 0, width() - kLabelWidth, kTop), Qt::AlignLeft | Qt::AlignVCenter,
             QString("%1 .. %2 (wheel: zoom, drag: pan, double-click: fit)").arg(duration(t0_), duration(t1_)));
  for (size_t row = 0; row < rows_.size(); ++row) {
    const Row& r = rows_[row];
    const int y = kTop + int(row) * kRowHeight;
    if (row % 2) p.fillRect(QRect(0, y, width(), kRowHeight), palette().alternateBase());
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRect(4, y, kLabelWidth - 8, kRowHeight), Qt::AlignLeft | Qt::AlignVCenter,
               p.fontMetrics().elidedText(r.label, Qt::ElideRight, kLabelWidth - 8));
    const QColor fill = r.device ? QColor(74, 127, 193) : QColor(120, 170, 110);
    for (size_t i = 0; i < r.spans.size(); ++i) {
      const QRectF box = spanRect(int(row), int(i));
      if (box.isEmpty()) continue;
      p.fillRect(box, fill);
      if (box.width() > 40) {
        p.setPen(Qt::white);
        p.drawText(box.adjusted(2, 0, -2, 0), Qt::AlignLeft | Qt::AlignVCenter,
                   p.fontMetrics().elidedText(r.spans[i].name, Qt::ElideRight, int(box.width()) - 4));
      }
    }
  }
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return;
  zoom(std::pow(1.25, steps), timeAt(event->position().x()));
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  dragging_ = true, dragged_ = false;
  dragX_ = event->position().x(), dragT0_ = t0_;
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  if (!dragging_) return;
  const double dx = event->position().x() - dragX_;
  if (std::abs(dx) < 3 && !dragged_) return;
  dragged_ = true;
  const double shift = dx / std::max(width() - kLabelWidth - 4, 1) * (t1_ - t0_);
  setView(dragT0_ - shift, dragT0_ - shift + (t1_ - t0_));
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  dragging_ = false;
  if (dragged_) return;
  auto [row, span] = spanAt(event->position());
  if (row < 0) return;
  const Span& s = rows_[size_t(row)].spans[size_t(span)];
  if (s.kernel >= 0) emit kernelClicked(rows_[size_t(row)].run, s.kernel);
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) { fit(); }

bool TimelineView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    auto [row, span] = spanAt(help->pos());
    if (row >= 0) {
      const Span& s = rows_[size_t(row)].spans[size_t(span)];
      QToolTip::showText(help->globalPos(), QString("%1\n%2 at %3").arg(s.name, duration(s.seconds), duration(s.start)));
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(event);
}

TimelinePane::TimelinePane(QWidget* parent) : QWidget(parent) {
  info_ = new QLabel(tr("No run yet."), this);
  info_->setWordWrap(true);
  view_ = new TimelineView(this);
  auto* fit = new QPushButton(tr("Fit"), this);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(view_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* top = new QHBoxLayout;
  top->addWidget(info_, 1);
  top->addWidget(fit);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(top);
  layout->addWidget(scroll, 1);
  connect(fit, &QPushButton::clicked, view_, &TimelineView::fit);
  connect(view_, &TimelineView::kernelClicked, this, [this](int run, int kernel) {
    const auto& runs = view_->runs();
    if (run < 0 || size_t(run) >= runs.size() || !shown_) return;
    // A comparison's other devices have no kernel table in the window.
    if (runs[size_t(run)]->device != shown_->device || runs[size_t(run)]->trace != shown_->trace) {
      const int record = recordOf(*runs[size_t(run)], kernel);
      if (record >= 0 && runs[size_t(run)]->device == shown_->device) emit kernelSelected(record);
      return;
    }
    const int record = recordOf(*shown_, kernel);
    if (record >= 0) emit kernelSelected(record);
  });
}

QString TimelinePane::infoText() const { return info_->text(); }

void TimelinePane::setRun(const RunPtr& run) {
  shown_ = run;
  view_->setRuns({run});
  info_->setText(run && run->trace
                     ? tr("%1: %2 host spans, %3 kernels (the cold run, the graph run, the warm runs)")
                           .arg(runSubject(*run))
                           .arg(run->trace->host.size())
                           .arg(run->trace->kernels.size())
                     : tr("No trace for this run."));
}

void TimelinePane::setCompare(const ComparePtr& compare) {
  if (!compare) return;
  view_->setRuns(compare->runs);
  QStringList devices;
  for (const auto& r : compare->runs) devices << r->device;
  info_->setText(tr("Comparison: %1, one above the other").arg(devices.join(", ")));
}

}  // namespace tlui
