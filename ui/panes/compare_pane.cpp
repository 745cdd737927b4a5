#include "ui/panes/compare_pane.h"

#include <QBarCategoryAxis>
#include <cmath>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegend>
#include <QListWidget>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>

namespace tlui {

namespace {
QTableView* makeTable(QAbstractItemModel* model, QObject* owner) {
  auto* proxy = new QSortFilterProxyModel(owner);
  proxy->setSourceModel(model);
  proxy->setSortRole(Qt::UserRole);
  auto* view = new QTableView;
  view->setModel(proxy);
  view->setSortingEnabled(true);
  view->sortByColumn(-1, Qt::AscendingOrder);  // the model's order until a header is clicked
  view->verticalHeader()->hide();
  view->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setWordWrap(false);
  view->setTextElideMode(Qt::ElideMiddle);
  view->horizontalHeader()->setStretchLastSection(false);
  view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  return view;
}
}  // namespace

ComparePane::ComparePane(QWidget* parent)
    : QWidget(parent), latency_(new CompareLatencyModel(this)), kernels_(new CompareKernelModel(this)) {
  // The controls take one row at the top, so the tables get the full width.
  auto* layout = new QVBoxLayout(this);
  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Devices:")));
  devices_ = new QListWidget;
  devices_->setFlow(QListView::LeftToRight);
  devices_->setWrapping(true);
  devices_->setSpacing(2);
  devices_->setFixedHeight(2 * devices_->fontMetrics().height() + 12);
  controls->addWidget(devices_, 1);
  controls->addWidget(new QLabel(tr("Reference:")));
  reference_ = new QComboBox;
  reference_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  reference_->setToolTip(tr("Speed-ups and logit differences are measured against this device"));
  reference_->setEnabled(false);
  controls->addWidget(reference_);
  run_ = new QPushButton(tr("Compare"));
  run_->setToolTip(tr("Run the current image on every checked device"));
  controls->addWidget(run_);
  layout->addLayout(controls);

  summary_ = new QLabel(tr("Check two or more devices and press Compare: the current image runs on each."));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);

  deviceTable_ = makeTable(latency_, this);
  kernelTable_ = makeTable(kernels_, this);
  chart_ = new QChartView;
  chart_->setRenderHint(QPainter::Antialiasing);
  chart_->setMinimumSize(360, 220);

  // The device table spans the width (a dozen columns, a few rows); under it
  // the kernels, with the chart beside them.
  auto* bottom = new QSplitter(Qt::Horizontal);
  bottom->addWidget(kernelTable_);
  bottom->addWidget(chart_);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(deviceTable_);
  split->addWidget(bottom);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 4);
  split->setSizes({170, 500});
  bottom->setSizes({700, 460});
  layout->addWidget(split, 1);

  connect(run_, &QPushButton::clicked, this, [this] { emit compareRequested(checkedDevices()); });
  connect(reference_, &QComboBox::activated, this, &ComparePane::setReference);
  rebuildChart();
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

void ComparePane::keyPressEvent(QKeyEvent* event) {
  // A window of its own: Esc closes it, as it would a dialog.
  if (event->key() == Qt::Key_Escape && isWindow()) {
    close();
    return;
  }
  QWidget::keyPressEvent(event);
}

QString ComparePane::summary() const { return summary_->text(); }

void ComparePane::setResult(const ComparePtr& result) {
  result_ = result;
  latency_->setResult(result);
  kernels_->setResult(result);
  {
    QSignalBlocker block(reference_);
    reference_->clear();
    for (const auto& r : result->runs) reference_->addItem(r->device);
    reference_->setCurrentIndex(0);
    reference_->setEnabled(result->runs.size() >= 2);
  }
  updateSummary();
  rebuildChart();
}

void ComparePane::setReference(int device) {
  if (!result_ || device < 0 || size_t(device) >= result_->runs.size()) return;
  latency_->setReference(device);
  kernels_->setReference(device);
  reference_->setCurrentIndex(device);
  updateSummary();
}

void ComparePane::updateSummary() {
  if (!result_ || result_->runs.empty()) return;
  if (result_->runs.size() < 2) {
    summary_->setText(tr("Only one device was compared: nothing to diff."));
    return;
  }
  // Kernels matched on every device: the others ran on one only.
  const int ref = latency_->reference();
  int matched = 0;
  for (int row = 0; row < kernels_->rowCount(); ++row) {
    bool all = true;
    for (int d = 0; d < kernels_->deviceCount(); ++d) all = all && kernels_->seconds(row, d) >= 0;
    matched += all;
  }
  // One plain sentence first: how much faster, and how well they agree.
  const RunData& reference = *result_->runs[size_t(ref)];
  QStringList speeds;
  for (size_t d = 0; d < result_->runs.size(); ++d) {
    if (int(d) == ref) continue;
    const RunData& other = *result_->runs[d];
    if (reference.warmSeconds <= 0 || other.warmSeconds <= 0) continue;
    const double x = reference.warmSeconds / other.warmSeconds;
    if (std::abs(x - 1) < 0.005) {
      speeds << tr("%1 and %2 are as fast").arg(reference.device, other.device);
      continue;
    }
    const bool otherFaster = x >= 1;
    const double ratio = otherFaster ? x : 1 / x;
    speeds << tr("%1 is %2x faster than %3")
                  .arg(otherFaster ? other.device : reference.device)
                  .arg(ratio, 0, 'f', ratio < 1.95 ? 2 : 1)
                  .arg(otherFaster ? reference.device : other.device);
  }
  const int runs = reference.kernelSamples.empty() ? 1 : std::max(1, reference.warmRuns);
  const QString agreement = result_->maxLogitDiff > 0
                                ? tr("results agree to <b>%1</b> (largest logit difference, %2)")
                                      .arg(result_->maxLogitDiff, 0, 'g', 2)
                                      .arg(result_->maxDiffPair.toHtmlEscaped())
                                : tr("results are <b>identical</b> (%1)").arg(result_->maxDiffPair.toHtmlEscaped());
  QString text = tr("<b>%1</b> on %2 (%3); %4.")
                     .arg(speeds.join("; ").toHtmlEscaped(), modelShortName(reference.model).toHtmlEscaped(),
                          runs > 1 ? tr("median warm run of %1 each").arg(runs) : tr("one warm run each"), agreement);
  text += tr(" Reference: <b>%1</b>. %2 of %3 kernels ran on every device%4.")
              .arg(reference.device.toHtmlEscaped())
              .arg(matched)
              .arg(kernels_->rowCount())
              .arg(runs > 1 ? tr("; each kernel's time is its median over the %1 runs, \u00B1 half their range").arg(runs)
                            : QString());
  summary_->setText(text);
}

// The warm run of each device as one horizontal bar, kernel time then host
// overhead: device names sit on the vertical axis where they have room, the
// value axis and the legend say what the bars are. Cold runs (mostly
// compilation) would dwarf them; they are in the table.
void ComparePane::rebuildChart() {
  auto* chart = new QChart;
  chart->setTitle(tr("Warm run per device"));
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->legend()->setAlignment(Qt::AlignBottom);
  auto* kernel = new QBarSet(tr("kernel time"));
  auto* host = new QBarSet(tr("host overhead"));
  kernel->setColor(QColor(30, 80, 200));
  host->setColor(QColor(230, 150, 40));
  QStringList names;
  double maxMs = 0;
  for (int row = 0; row < latency_->rowCount(); ++row) {
    const DeviceFigures f = latency_->figures(row);
    names << result_->runs[size_t(row)]->device;
    *kernel << f.kernelMs;
    *host << std::max(0.0, f.hostMs);
    maxMs = std::max(maxMs, f.kernelMs + std::max(0.0, f.hostMs));
  }
  auto* series = new QHorizontalStackedBarSeries;
  series->append(kernel);
  series->append(host);
  series->setBarWidth(0.6);
  chart->addSeries(series);
  auto* devices = new QBarCategoryAxis;
  devices->append(names);
  devices->setTitleText(tr("device"));
  chart->addAxis(devices, Qt::AlignLeft);
  series->attachAxis(devices);
  auto* ms = new QValueAxis;
  ms->setRange(0, maxMs > 0 ? maxMs * 1.05 : 1);
  ms->setTitleText(tr("milliseconds"));
  ms->setLabelFormat("%.3g");
  ms->applyNiceNumbers();
  chart->addAxis(ms, Qt::AlignBottom);
  series->attachAxis(ms);
  QChart* old = chart_->chart();
  chart_->setChart(chart);
  delete old;
}

}  // namespace tlui
