#include "ui/panes/side_panes.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QScrollBar>
#include <algorithm>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace tlui {

ModelPane::ModelPane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  builtin_ = new QComboBox;
  builtin_->addItem("EfficientNet-Lite0 (built in)", "efficientnet-lite0");
  auto* open = new QPushButton(tr("Open model file..."));
  open->setToolTip(tr("Open a .pth, .safetensors or .onnx model file"));
  row->addWidget(builtin_, 1);
  row->addWidget(open);
  layout->addLayout(row);
  summary_ = new QLabel(tr("No model loaded yet."));
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  layout->addWidget(summary_, 1);
  connect(builtin_, &QComboBox::activated, this, [this](int i) { emit builtinChosen(builtin_->itemData(i).toString()); });
  connect(open, &QPushButton::clicked, this, &ModelPane::openRequested);
}

void ModelPane::setModel(const ModelPtr& model) {
  if (!model) {  // closed: the built-in model runs the next image
    model_.clear();
    note_.clear();
    summaryHtml_ = tr("No model open: an image opened now runs on the built-in model.");
    summary_->setToolTip({});
    showSummary();
    return;
  }
  const tl::ModelSummary& s = model->summary;
  // The combo names what is loaded: the built-in model or the opened file.
  int item = builtin_->findData(model->nameOrPath);
  if (item < 0) {
    builtin_->addItem(QFileInfo(model->nameOrPath).fileName(), model->nameOrPath);
    item = builtin_->count() - 1;
    builtin_->setItemData(item, model->nameOrPath, Qt::ToolTipRole);
  }
  builtin_->setCurrentIndex(item);
  QLocale locale(QLocale::English);
  QStringList notes;
  for (auto& n : s.notes) notes << QString::fromStdString(n).toHtmlEscaped();
  if (model->nameOrPath != model_) note_.clear();
  model_ = model->nameOrPath;
  summaryHtml_ = (QString("<table cellspacing=3>"
                            "<tr><td><b>Model</b></td><td>%1</td></tr>"
                            "<tr><td><b>File</b></td><td>%2</td></tr>"
                            "<tr><td><b>Layers</b></td><td>%3 (conv + linear)</td></tr>"
                            "<tr><td><b>Parameters</b></td><td>%4</td></tr>"
                            "<tr><td><b>FLOPs</b></td><td>%5 GFLOP per image</td></tr>"
                            "<tr><td><b>Input</b></td><td>%6</td></tr></table>%7")
                        .arg(QString::fromStdString(s.name).toHtmlEscaped(),
                             QFileInfo(QString::fromStdString(s.source)).fileName().toHtmlEscaped(),
                             locale.toString(qlonglong(s.layers)), locale.toString(qlonglong(s.parameters)),
                             QString::number(s.flops * 1e-9, 'f', 3), QString::fromStdString(tl::shape_str(s.input_shape)),
                             notes.isEmpty() ? QString() : "<p>" + notes.join("<br>") + "</p>"));
  summary_->setToolTip(QString::fromStdString(s.source));
  showSummary();
}

void ModelPane::setRunNote(const QString& model, const QString& note) {
  if (model != model_) return;
  note_ = note;
  showSummary();
}

void ModelPane::showSummary() {
  summary_->setText(note_.isEmpty() ? summaryHtml_
                                    : summaryHtml_ + "<p style='color:#6a4a00'><b>Warning</b>: " +
                                          note_.toHtmlEscaped() + "</p>");
}

QString ModelPane::summaryText() const { return summary_->text(); }

DevicePane::DevicePane(QWidget* parent) : QWidget(parent), model_(new DeviceModel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  view_ = new QTableView;
  view_->setModel(model_);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->verticalHeader()->hide();
  view_->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->setWordWrap(false);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
  auto* row = new QHBoxLayout;
  use_ = new QPushButton(tr("Use this device"));
  use_->setEnabled(false);
  note_ = new QLabel;
  note_->setWordWrap(true);
  row->addWidget(note_, 1);
  row->addWidget(use_);
  facts_ = new QTextBrowser;
  facts_->setMinimumHeight(fontMetrics().height() * 3);
  layout->addWidget(view_);
  layout->addLayout(row);
  layout->addWidget(facts_, 1);
  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& idx) {
    if (!idx.isValid()) return;
    showFacts(idx.row());
    updateUseButton();
  });
  auto pick = [this] {
    QModelIndex idx = view_->selectionModel()->currentIndex();
    if (!idx.isValid() || !idx.data(DeviceModel::AvailableRole).toBool()) return;
    QString name = idx.data(DeviceModel::DeviceNameRole).toString();
    if (name == current_ && (resultsDevice_.isEmpty() || name == resultsDevice_)) return;
    current_ = name;
    updateUseButton();
    updateNote();
    emit devicePicked(name);
  };
  connect(use_, &QPushButton::clicked, this, pick);
  connect(view_, &QTableView::doubleClicked, this, pick);
  // Unavailable rows cannot be selected; clicking one still shows why.
  connect(view_, &QTableView::pressed, this, [this](const QModelIndex& idx) { showFacts(idx.row()); });
}

void DevicePane::setDevices(const DeviceList& devices) {
  model_->setDevices(devices);
  view_->resizeColumnsToContents();
  // Every device in view at once: the table is as tall as its rows.
  const int rows = std::max(1, model_->rowCount());
  view_->setMinimumHeight(view_->horizontalHeader()->height() + rows * view_->verticalHeader()->defaultSectionSize() +
                          2 * view_->frameWidth() + 2);
  view_->setMaximumHeight(view_->minimumHeight() + view_->horizontalScrollBar()->sizeHint().height());
  setCurrent(current_);
}

void DevicePane::setCurrent(const QString& name) {
  current_ = name;
  int row = model_->rowOf(name);
  updateNote();
  if (row < 0) return;
  view_->selectionModel()->setCurrentIndex(model_->index(row, 0),
                                           QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  showFacts(row);
  updateUseButton();
}

void DevicePane::setResultsDevice(const QString& name) {
  resultsDevice_ = name;
  updateNote();
  updateUseButton();
}

QString DevicePane::resultsNote() const { return note_->text(); }

void DevicePane::updateUseButton() {
  QModelIndex idx = view_->selectionModel()->currentIndex();
  bool available = idx.isValid() && idx.data(DeviceModel::AvailableRole).toBool();
  QString name = idx.data(DeviceModel::DeviceNameRole).toString();
  // The device in use can only be run on again, after a run there was
  // cancelled and another device's results are shown.
  const bool again = name == current_ && !resultsDevice_.isEmpty() && name != resultsDevice_;
  use_->setEnabled(available && (name != current_ || again));
  use_->setText(available && again ? tr("Run here again") : tr("Use this device"));
  use_->setToolTip(available && name == current_ && !again
                       ? tr("%1 is the device in use").arg(name)
                       : tr("Run the current image on the selected device (a first run there compiles every "
                            "kernel, which can take minutes)"));
}

void DevicePane::updateNote() {
  if (resultsDevice_.isEmpty()) note_->setText(tr("Using <b>%1</b>").arg(current_.toHtmlEscaped()));
  else if (resultsDevice_ == current_) note_->setText(tr("Using <b>%1</b>; results shown are from it").arg(current_.toHtmlEscaped()));
  else
    note_->setText(tr("Using <b>%1</b>; results shown are from <b>%2</b>")
                       .arg(current_.toHtmlEscaped(), resultsDevice_.toHtmlEscaped()));
}

void DevicePane::showFacts(int row) {
  if (row < 0 || size_t(row) >= model_->devices().size()) return;
  const auto& d = model_->devices()[size_t(row)];
  QString text = DeviceModel::facts(d).toHtmlEscaped().replace('\n', "<br>");
  if (!d.available) text = "<span style='color:#888'>" + text + "</span>";
  facts_->setHtml(text);
}

}  // namespace tlui
