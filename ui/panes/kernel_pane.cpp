#include "kernel_pane.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
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
  total_ = new QLabel;
  bar->addWidget(filter_, 1);
  bar->addWidget(total_);
  layout->addLayout(bar);
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
  chart_->setMinimumWidth(260);
  split->addWidget(view_);
  split->addWidget(chart_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setSizes({560, 400});
  layout->addWidget(split, 1);
  connect(filter_, &QLineEdit::textChanged, proxy_, &QSortFilterProxyModel::setFilterFixedString);
  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& idx) {
    if (idx.isValid()) emit kernelSelected(proxy_->mapToSource(idx).row());
  });
}

void KernelPane::setRecords(const std::vector<tl::ProfileRecord>& records) {
  model_->setRecords(records);
  view_->resizeColumnsToContents();
  total_->setText(tr("%1 kernels, %2 ms").arg(records.size()).arg(model_->totalSeconds() * 1e3, 0, 'f', 3));
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
  const int top = std::min<int>(10, int(order.size()));
  auto* chart = new QChart;
  chart->setTitle(tr("Top %1 kernels by time (ms)").arg(top));
  chart->legend()->hide();
  chart->setMargins(QMargins(2, 2, 2, 2));
  auto* series = new QHorizontalBarSeries;
  auto* set = new QBarSet(tr("time"));
  set->setColor(QColor(46, 125, 200));
  QStringList names;
  double maxMs = 0;
  // Reversed: a horizontal bar chart draws its first category at the bottom.
  for (int i = top - 1; i >= 0; --i) {
    const auto& r = recs[size_t(order[size_t(i)])];
    QString name = QString::fromStdString(r.kernel->name);
    if (name.size() > 18) name = name.left(17) + QChar(0x2026);
    names << QString("#%1 %2").arg(order[size_t(i)]).arg(name);
    *set << r.seconds * 1e3;
    maxMs = std::max(maxMs, r.seconds * 1e3);
  }
  series->append(set);
  chart->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(names);
  QFont small = font();
  small.setPointSizeF(std::max(6.5, small.pointSizeF() - 1.5));
  y->setLabelsFont(small);
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

}  // namespace tlui
