#include "compare_pane.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>

namespace tlui {

ComparePane::ComparePane(QWidget* parent)
    : QWidget(parent), latency_(new CompareLatencyModel(this)), kernels_(new CompareKernelModel(this)) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* left = new QVBoxLayout;
  left->addWidget(new QLabel(tr("Devices to compare:")));
  devices_ = new QListWidget;
  devices_->setMaximumWidth(220);
  left->addWidget(devices_, 1);
  run_ = new QPushButton(tr("Compare"));
  left->addWidget(run_);
  layout->addLayout(left);

  auto* right = new QVBoxLayout;
  summary_ = new QLabel(tr("Pick two or more devices and press Compare."));
  summary_->setWordWrap(true);
  right->addWidget(summary_);
  auto* split = new QSplitter(Qt::Horizontal);
  chart_ = new QChartView;
  chart_->setRenderHint(QPainter::Antialiasing);
  auto* tables = new QSplitter(Qt::Vertical);
  auto makeTable = [](QAbstractItemModel* model, QObject* owner) {
    auto* proxy = new QSortFilterProxyModel(owner);
    proxy->setSourceModel(model);
    proxy->setSortRole(Qt::UserRole);
    auto* view = new QTableView;
    view->setModel(proxy);
    view->setSortingEnabled(true);
    view->verticalHeader()->hide();
    view->horizontalHeader()->setStretchLastSection(true);
    view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    return view;
  };
  tables->addWidget(makeTable(latency_, this));
  tables->addWidget(makeTable(kernels_, this));
  tables->setStretchFactor(1, 3);
  split->addWidget(chart_);
  split->addWidget(tables);
  right->addWidget(split, 1);
  layout->addLayout(right, 1);
  connect(run_, &QPushButton::clicked, this, [this] { emit compareRequested(checkedDevices()); });
}

void ComparePane::setDevices(const DeviceList& devices) {
  QStringList checked = checkedDevices();
  devices_->clear();
  for (const auto& d : devices) {
    auto* item = new QListWidgetItem(QString::fromStdString(d.name));
    item->setToolTip(QString::fromStdString(d.available ? d.description : d.unavailable_reason));
    if (d.available) {
      item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
      item->setCheckState(checked.isEmpty() || checked.contains(item->text()) ? Qt::Checked : Qt::Unchecked);
    } else {
      item->setFlags(Qt::NoItemFlags);
      item->setText(item->text() + tr(" (unavailable)"));
    }
    devices_->addItem(item);
  }
}

QStringList ComparePane::checkedDevices() const {
  QStringList out;
  for (int i = 0; i < devices_->count(); ++i)
    if (devices_->item(i)->checkState() == Qt::Checked) out << devices_->item(i)->text();
  return out;
}

void ComparePane::setChecked(const QStringList& devices) {
  for (int i = 0; i < devices_->count(); ++i) {
    auto* item = devices_->item(i);
    if (item->flags() & Qt::ItemIsUserCheckable)
      item->setCheckState(devices.contains(item->text()) ? Qt::Checked : Qt::Unchecked);
  }
}

void ComparePane::setBusy(bool busy) { run_->setEnabled(!busy); }

QString ComparePane::summary() const { return summary_->text(); }

void ComparePane::setResult(const ComparePtr& result) {
  latency_->setResult(result);
  kernels_->setResult(result);
  if (result->runs.size() >= 2)
    summary_->setText(tr("Largest absolute logit difference: <b>%1</b> (%2)")
                          .arg(result->maxLogitDiff, 0, 'g', 4)
                          .arg(result->maxDiffPair));
  else
    summary_->setText(tr("Only one device was compared: nothing to diff."));
  auto* chart = new QChart;
  chart->setTitle(tr("Latency per device (ms)"));
  chart->setMargins(QMargins(2, 2, 2, 2));
  auto* cold = new QBarSet(tr("cold"));
  auto* warm = new QBarSet(tr("warm"));
  QStringList names;
  double maxMs = 0;
  for (const auto& r : result->runs) {
    names << r->device;
    *cold << r->coldSeconds * 1e3;
    *warm << r->warmSeconds * 1e3;
    maxMs = std::max({maxMs, r->coldSeconds * 1e3, r->warmSeconds * 1e3});
  }
  auto* series = new QBarSeries;
  series->append(warm);
  series->append(cold);
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(names);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  auto* y = new QValueAxis;
  y->setRange(0, maxMs > 0 ? maxMs * 1.05 : 1);
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  QChart* old = chart_->chart();
  chart_->setChart(chart);
  delete old;
}

}  // namespace tlui
