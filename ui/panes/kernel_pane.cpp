#include "ui/panes/kernel_pane.h"

#include <QApplication>
#include <QBarCategoryAxis>
#include <QClipboard>
#include <QMenu>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QGraphicsLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHorizontalBarSeries>
#include <QLabel>
#include <QLineEdit>
#include <QSplitter>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>
#include <algorithm>
#include <numeric>

namespace tlui {

namespace {
// More bars than this and Qt Charts elides the category names in a dock of
// ordinary height.
constexpr int kChartBars = 8;
}  // namespace

KernelPane::KernelPane(QWidget* parent)
    : QWidget(parent), model_(new KernelTableModel(this)), proxy_(new QSortFilterProxyModel(this)) {
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(KernelTableModel::SortRole);
  proxy_->setFilterKeyColumn(-1);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* bar = new QHBoxLayout;
  filter_ = new QLineEdit;
  filter_->setPlaceholderText(tr("Filter kernels (name, device, size...)"));
  filter_->setClearButtonEnabled(true);
  filter_->setMinimumWidth(fontMetrics().horizontalAdvance(filter_->placeholderText()) / 2 + 40);
  // The totals get a line of their own under the filter, wrapped: beside it
  // at 1280x800 they were cut ("host overhead 0.") and the filter was "Fi...".
  total_ = new QLabel;
  total_->setWordWrap(true);
  total_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  total_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  bar->addWidget(filter_, 1);
  layout->addLayout(bar);
  layout->addWidget(total_);
  auto* split = new QSplitter(Qt::Horizontal);
  view_ = new QTableView;
  view_->setModel(proxy_);
  view_->setSortingEnabled(true);
  view_->sortByColumn(KernelTableModel::Index, Qt::AscendingOrder);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view_->verticalHeader()->hide();
  view_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->setAlternatingRowColors(true);
  chart_ = new QChartView;
  chart_->setRenderHint(QPainter::Antialiasing);
  chart_->setMinimumWidth(160);
  split->addWidget(view_);
  split->addWidget(chart_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({560, 400});
  layout->addWidget(split, 1);
  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
  view_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(view_, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
    const QModelIndex idx = view_->indexAt(pos);
    if (!idx.isValid()) return;
    QMenu* menu = makeContextMenu(idx);
    menu->exec(view_->viewport()->mapToGlobal(pos));
    delete menu;
  });
  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& idx) {
    if (idx.isValid()) emit kernelSelected(proxy_->mapToSource(idx).row());
  });
}

void KernelPane::setRecords(const std::vector<tl::ProfileRecord>& records, double wallSeconds, bool byJit,
                            const QString& subject) {
  model_->setRecords(records);
  view_->resizeColumnsToContents();
  tl::ProfileTotals totals = tl::profile_totals(records);
  QString text = tr("%1 kernels (%2 replayed), sum %3 ms").arg(records.size()).arg(totals.replayed)
                     .arg(model_->totalSeconds() * 1e3, 0, 'f', 3);
  if (totals.wall_seconds > 0)
    text += tr("; realize wall %1 ms, host overhead %2 ms")
                .arg(totals.wall_seconds * 1e3, 0, 'f', 3)
                .arg(totals.host_overhead() * 1e3, 0, 'f', 3);
  if (wallSeconds > 0)
    text += byJit ? tr(" (run wall time %1 ms, replayed by the Jit: no graph built)").arg(wallSeconds * 1e3, 0, 'f', 2)
                  : tr(" (run wall time %1 ms)").arg(wallSeconds * 1e3, 0, 'f', 2);
  if (!subject.isEmpty()) text = subject + ": " + text;
  total_->setText(text);
  total_->setToolTip(tr("<p><b>Sum</b>: the kernel times of one run added up: the median warm run, the one "
                        "whose latency the predictions show as <i>warm</i>.</p>"
                        "<p><b>Run wall time</b>: that run from start to end; the difference is launching "
                        "and waiting, copying the result back and, unless the Jit replayed the run, building "
                        "and scheduling the graph.</p>"
                        "<p><b>Realize wall</b>: from the start of the realize to the return of its one "
                        "wait for the device (compiles not counted); <b>host overhead</b> is what of it was "
                        "not kernels: scheduling, allocation, launching and waiting.</p>"
                        "<p><b>Run</b>: <i>replayed</i> when the kernels came from the plan remembered for this "
                        "graph (nothing scheduled or rendered; TINYLENS_NOREPLAY=1 turns it off), "
                        "<i>planned</i> when the graph was scheduled afresh.</p>"
                        "<p><b>Time (ms)</b> per row: the kernel's own time as the device measured it "
                        "(OpenCL events, or the CPU's clock around the launch). <b>Share</b>: its part of "
                        "the sum.</p>"));
  updateChart();
}

void KernelPane::selectRecord(int record) {
  QModelIndex idx = proxy_->mapFromSource(model_->index(record, 0));
  if (!idx.isValid()) {  // filtered out: clear the filter so it can be shown
    filter_->clear();
    idx = proxy_->mapFromSource(model_->index(record, 0));
  }
  view_->selectionModel()->setCurrentIndex(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  view_->scrollTo(idx);
}

void KernelPane::updateChart() {
  const auto& recs = model_->records();
  std::vector<int> order(recs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return recs[size_t(a)].seconds > recs[size_t(b)].seconds; });
  const int top = std::min<int>(kChartBars, int(order.size()));
  auto* chart = new QChart;
  chart->setTitle(tr("Top %1 kernels by time (ms)").arg(top));
  QFont titleFont = font();
  titleFont.setBold(true);
  chart->setTitleFont(titleFont);
  chart->legend()->hide();
  chart->setMargins(QMargins(0, 0, 4, 0));
  chart->layout()->setContentsMargins(0, 0, 0, 0);
  chart->setBackgroundRoundness(0);
  auto* series = new QHorizontalBarSeries;
  auto* set = new QBarSet(tr("time"));
  set->setColor(QColor(46, 125, 200));
  QStringList names;
  double maxMs = 0;
  QFont small = font();
  small.setPointSizeF(std::max(6.5, small.pointSizeF() - 1.5));
  // Each bar is named by its kernel and table row; a long name is cut in
  // its middle to a share of the chart's width (Qt Charts would cut it to
  // "..."), the tooltip has it whole.
  const QFontMetrics metrics(small);
  const int labelWidth = std::max(80, chart_->width() / 3);
  chartLabels_.clear();
  // Reversed: a horizontal bar chart draws its first category at the bottom.
  for (int i = top - 1; i >= 0; --i) {
    const auto& r = recs[size_t(order[size_t(i)])];
    const QString label = QString("#%1 %2").arg(order[size_t(i)]).arg(QString::fromStdString(r.kernel->name));
    names << metrics.elidedText(label, Qt::ElideMiddle, labelWidth);
    chartLabels_.prepend(names.last());
    *set << r.seconds * 1e3;
    maxMs = std::max(maxMs, r.seconds * 1e3);
  }
  series->append(set);
  chart->addSeries(series);
  std::vector<int> shown(order.begin(), order.begin() + top);
  connect(set, &QBarSet::hovered, chart_, [this, shown, top](bool on, int index) {
    int rank = top - 1 - index;
    if (!on || rank < 0 || rank >= int(shown.size())) return chart_->setToolTip({});
    const auto& r = model_->records()[size_t(shown[size_t(rank)])];
    chart_->setToolTip(QString("#%1 %2: %3 ms").arg(shown[size_t(rank)]).arg(QString::fromStdString(r.kernel->name))
                           .arg(r.seconds * 1e3, 0, 'f', 3));
  });
  connect(set, &QBarSet::clicked, this, [this, shown, top](int index) {
    int rank = top - 1 - index;
    if (rank >= 0 && rank < int(shown.size())) selectRecord(shown[size_t(rank)]);
  });
  auto* y = new QBarCategoryAxis;
  y->append(names);
  y->setLabelsFont(small);
  y->setTruncateLabels(false);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  auto* x = new QValueAxis;
  x->setRange(0, maxMs > 0 ? maxMs * 1.05 : 1);
  x->setLabelFormat("%.1f");
  x->setLabelsFont(small);
  x->setTickCount(4);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  QChart* old = chart_->chart();
  chart_->setChart(chart);
  delete old;
  chartBars_ = top;
}

QMenu* KernelPane::makeContextMenu(const QModelIndex& index) {
  auto* menu = new QMenu(this);
  const int record = proxy_->mapToSource(index).row();
  if (record < 0 || size_t(record) >= model_->records().size()) return menu;
  const auto& kernel = *model_->records()[size_t(record)].kernel;
  const QString name = QString::fromStdString(kernel.name), source = QString::fromStdString(kernel.source);
  auto copy = [](const QString& text) { QApplication::clipboard()->setText(text); };
  menu->addAction(tr("Copy Kernel Name"), this, [copy, name] { copy(name); });
  menu->addAction(tr("Copy Kernel Source"), this, [copy, source] { copy(source); })->setEnabled(!source.isEmpty());
  menu->addAction(tr("Copy Row"), this, [this, copy, index] {
    QStringList cells;
    for (int c = 0; c < proxy_->columnCount(); ++c) cells << proxy_->index(index.row(), c).data().toString();
    copy(cells.join('\t'));
  });
  return menu;
}

QString KernelPane::totalText() const { return total_->text(); }

}  // namespace tlui
