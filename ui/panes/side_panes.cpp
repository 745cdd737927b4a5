#include "side_panes.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace tlui {

ModelPane::ModelPane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* row = new QHBoxLayout;
  builtin_ = new QComboBox;
  builtin_->addItem("EfficientNet-Lite0 (built in)", "efficientnet-lite0");
  auto* open = new QPushButton(tr("Open .pth / .safetensors..."));
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
  summary_->setText(QString("<table cellspacing=3>"
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
}

QString ModelPane::summaryText() const { return summary_->text(); }

DevicePane::DevicePane(QWidget* parent) : QWidget(parent), model_(new DeviceModel(this)) {
  auto* layout = new QVBoxLayout(this);
  view_ = new QTableView;
  view_->setModel(model_);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->verticalHeader()->hide();
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->setWordWrap(false);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  facts_ = new QTextBrowser;
  facts_->setMaximumHeight(150);
  layout->addWidget(view_, 1);
  layout->addWidget(facts_);
  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& idx) {
    if (!idx.isValid()) return;
    showFacts(idx.row());
    QString name = idx.data(DeviceModel::DeviceNameRole).toString();
    if (!quiet_ && idx.data(DeviceModel::AvailableRole).toBool() && name != current_) {
      current_ = name;
      emit devicePicked(name);
    }
  });
  // Unavailable rows cannot be selected; clicking one still shows why.
  connect(view_, &QTableView::pressed, this, [this](const QModelIndex& idx) { showFacts(idx.row()); });
}

void DevicePane::setDevices(const DeviceList& devices) {
  quiet_ = true;
  model_->setDevices(devices);
  view_->resizeColumnsToContents();
  quiet_ = false;
  setCurrent(current_);
}

void DevicePane::setCurrent(const QString& name) {
  current_ = name;
  int row = model_->rowOf(name);
  if (row < 0) return;
  quiet_ = true;
  view_->selectionModel()->setCurrentIndex(model_->index(row, 0),
                                           QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  quiet_ = false;
  showFacts(row);
}

void DevicePane::showFacts(int row) {
  if (row < 0 || size_t(row) >= model_->devices().size()) return;
  const auto& d = model_->devices()[size_t(row)];
  QString text = DeviceModel::facts(d).toHtmlEscaped().replace('\n', "<br>");
  if (!d.available) text = "<span style='color:#888'>" + text + "</span>";
  facts_->setHtml(text);
}

}  // namespace tlui
