#include "ui/panes/memory_pane.h"

#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QSplitter>
#include <QTableWidget>
#include <QToolTip>
#include <QVBoxLayout>

namespace tlui {

namespace {
QString mib(size_t bytes) { return QString::number(double(bytes) / (1024.0 * 1024.0), 'f', 3) + " MiB"; }
}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void MemoryChart::setProfile(std::shared_ptr<const tl::MemoryProfile> profile, std::vector<QString> names) {
  profile_ = std::move(profile);
  names_ = std::move(names);
  selected_ = -1;
  update();
}

void MemoryChart::setSelected(int launch) {
  selected_ = launch;
  update();
}

QRect MemoryChart::plotRect() const { return rect().adjusted(64, 8, -8, -20); }

int MemoryChart::launchAt(int x) const {
  if (!profile_ || profile_->live_bytes.empty()) return -1;
  const QRect r = plotRect();
  if (x < r.left() || x > r.right()) return -1;
  const int n = int(profile_->live_bytes.size());
  return std::clamp(int(double(x - r.left()) / double(std::max(r.width(), 1)) * n), 0, n - 1);
}

void MemoryChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QRect r = plotRect();
  p.setPen(palette().color(QPalette::Mid));
  p.drawRect(r);
  if (!profile_ || profile_->live_bytes.empty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, tr("No run yet: live memory per launch shows here"));
    return;
  }
  const auto& live = profile_->live_bytes;
  const double top = double(std::max<size_t>(profile_->peak_bytes, 1));
  const double step = double(r.width()) / double(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    const double h = double(live[i]) / top * r.height();
    QRectF bar(r.left() + step * double(i), r.bottom() - h, std::max(step - 1.0, 1.0), h);
    const bool peak = i == profile_->peak_launch;
    p.fillRect(bar, int(i) == selected_ ? QColor(230, 140, 40) : peak ? QColor(200, 60, 60) : QColor(74, 127, 193));
  }
  p.setPen(palette().color(QPalette::Text));
  p.drawText(QRect(0, r.top() - 2, r.left() - 4, 16), Qt::AlignRight | Qt::AlignTop, mib(profile_->peak_bytes));
  p.drawText(QRect(0, r.bottom() - 14, r.left() - 4, 16), Qt::AlignRight | Qt::AlignBottom, "0");
  p.drawText(QRect(r.left(), r.bottom() + 2, r.width(), 16), Qt::AlignCenter,
             tr("launches 0-%1 (red: the peak; click a bar to select its kernel)").arg(live.size() - 1));
}

void MemoryChart::mousePressEvent(QMouseEvent* event) {
  const int launch = launchAt(int(event->position().x()));
  if (launch < 0) return;
  setSelected(launch);
  emit launchClicked(launch);
}

bool MemoryChart::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int launch = launchAt(help->pos().x());
    if (launch >= 0 && size_t(launch) < names_.size())
      QToolTip::showText(help->globalPos(), tr("launch %1: %2\n%3 live").arg(launch).arg(names_[size_t(launch)],
                                                                               mib(profile_->live_bytes[size_t(launch)])));
    else
      QToolTip::hideText();
    return true;
  }
  return QWidget::event(event);
}

MemoryPane::MemoryPane(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel(tr("No run yet."), this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  chart_ = new MemoryChart(this);
  table_ = new QTableWidget(0, 7, this);
  table_->setHorizontalHeaderLabels({tr("Value"), tr("Size"), tr("Buffer"), tr("Writer"), tr("Readers"),
                                     tr("Live (launches)"), tr("Reuse")});
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setStretchLastSection(true);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(chart_);
  split->addWidget(table_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(summary_);
  layout->addWidget(split, 1);
  connect(chart_, &MemoryChart::launchClicked, this, [this](int launch) { emit kernelSelected(launch); });
  connect(table_, &QTableWidget::cellClicked, this, [this](int row, int) {
    if (!run_ || !run_->memory || size_t(row) >= run_->memory->values.size()) return;
    const int writer = int(run_->memory->values[size_t(row)].writers.front());
    chart_->setSelected(writer);
    emit kernelSelected(writer);
  });
}

QString MemoryPane::summaryText() const { return summary_->text(); }

void MemoryPane::setRun(const RunPtr& run) {
  run_ = run;
  table_->setRowCount(0);
  if (!run || !run->memory) {
    summary_->setText(tr("No memory profile for this run."));
    chart_->setProfile(nullptr, {});
    return;
  }
  const tl::MemoryProfile& m = *run->memory;
  std::vector<QString> names;
  for (const auto& r : run->records) names.push_back(QString::fromStdString(r.kernel->name));
  summary_->setText(tr("%1: peak %2 live at launch %3 (%4); %5 values in %6 buffers (%7), %8 reused; "
                       "read only (weights, inputs): %9 buffers, %10")
                        .arg(runSubject(*run), mib(m.peak_bytes))
                        .arg(m.peak_launch)
                        .arg(m.peak_launch < names.size() ? names[m.peak_launch] : QString("-"))
                        .arg(m.values.size())
                        .arg(m.buffers)
                        .arg(mib(m.buffer_bytes))
                        .arg(m.reused_buffers)
                        .arg(m.input_buffers)
                        .arg(mib(m.input_bytes)));
  chart_->setProfile(run->memory, names);
  table_->setRowCount(int(m.values.size()));
  for (size_t i = 0; i < m.values.size(); ++i) {
    const tl::MemoryValue& v = m.values[i];
    QStringList readers;
    for (size_t r : v.readers) readers << QString::number(r);
    const QString writer = v.writers.front() < names.size() ? names[v.writers.front()] : QString();
    const QStringList cells = {QString::number(i), mib(v.value_bytes), mib(v.bytes),
                               QString("%1 %2").arg(v.writers.front()).arg(writer), readers.join(", "),
                               QString("%1-%2%3").arg(v.first).arg(v.last).arg(v.kept ? tr(" (kept)") : QString()),
                               v.tenant ? tr("value %1 in its buffer").arg(v.tenant + 1) : tr("new buffer")};
    for (int c = 0; c < cells.size(); ++c) table_->setItem(int(i), c, new QTableWidgetItem(cells[c]));
  }
  table_->resizeColumnsToContents();
}

void MemoryPane::selectLaunch(int launch) {
  chart_->setSelected(launch);
  if (!run_ || !run_->memory) return;
  for (size_t i = 0; i < run_->memory->values.size(); ++i)
    if (int(run_->memory->values[i].writers.front()) == launch) {
      QSignalBlocker block(table_);
      table_->selectRow(int(i));
      return;
    }
}

}  // namespace tlui
