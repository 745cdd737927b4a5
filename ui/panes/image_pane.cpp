#include "ui/panes/image_pane.h"

#include <QApplication>
#include <QClipboard>
#include <QContextMenuEvent>
#include <QDragEnterEvent>
#include <QMenu>
#include <QDropEvent>
#include <QFileInfo>
#include <QLabel>
#include <QMimeData>
#include <QPainter>
#include <QVBoxLayout>

namespace tlui {

PredictionBars::PredictionBars(PredictionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  connect(model_, &QAbstractItemModel::modelReset, this, qOverload<>(&QWidget::update));
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

QSize PredictionBars::sizeHint() const { return {320, 5 * (fontMetrics().height() * 2 + 6) + 4}; }
QSize PredictionBars::minimumSizeHint() const { return {160, sizeHint().height()}; }

void PredictionBars::setPlaceholder(const QString& text) {
  placeholder_ = text;
  update();
}

void PredictionBars::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const int rowH = fontMetrics().height() * 2 + 6;
  const int n = model_->rowCount();
  if (n == 0) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect().adjusted(4, 0, -4, 0), Qt::AlignCenter | Qt::TextWordWrap,
               placeholder_.isEmpty() ? tr("Drop an image here or use File > Open Image") : placeholder_);
    return;
  }
  for (int i = 0; i < n; ++i) {
    QModelIndex idx = model_->index(i);
    QString label = idx.data().toString();
    double prob = idx.data(PredictionModel::ProbabilityRole).toDouble();
    int y = i * rowH + 2;
    QRect textRect(4, y, width() - 8, fontMetrics().height());
    QFont f = font();
    f.setBold(i == 0);
    p.setFont(f);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(textRect, Qt::AlignLeft | Qt::AlignVCenter, label);
    p.drawText(textRect, Qt::AlignRight | Qt::AlignVCenter, QString::number(prob * 100.0, 'f', 1) + " %");
    QRectF track(4, y + fontMetrics().height() + 2, width() - 8, fontMetrics().height() - 4);
    p.setPen(Qt::NoPen);
    p.setBrush(QColor(225, 229, 235));
    p.drawRoundedRect(track, 3, 3);
    QRectF bar = track;
    bar.setWidth(std::max(2.0, track.width() * std::clamp(prob, 0.0, 1.0)));
    p.setBrush(i == 0 ? QColor(46, 125, 200) : QColor(120, 160, 210));
    p.drawRoundedRect(bar, 3, 3);
  }
}

namespace {
QString predictionLine(const QModelIndex& idx) {
  return QString("%1\t%2 %").arg(idx.data().toString())
      .arg(idx.data(PredictionModel::ProbabilityRole).toDouble() * 100.0, 0, 'f', 1);
}
}  // namespace

QMenu* PredictionBars::makeContextMenu(const QPoint& pos) {
  auto* menu = new QMenu(this);
  const int rowH = fontMetrics().height() * 2 + 6;
  const int row = (pos.y() - 2) / rowH;
  const int n = model_->rowCount();
  if (row >= 0 && row < n) {
    const QModelIndex idx = model_->index(row);
    const QString line = predictionLine(idx);
    menu->addAction(tr("Copy \u201C%1\u201D").arg(idx.data().toString()), this,
                    [line] { QApplication::clipboard()->setText(line); });
  }
  QAction* all = menu->addAction(tr("Copy All Predictions"), this, [this] {
    QStringList lines;
    for (int i = 0; i < model_->rowCount(); ++i) lines << predictionLine(model_->index(i));
    QApplication::clipboard()->setText(lines.join('\n'));
  });
  all->setEnabled(n > 0);
  return menu;
}

void PredictionBars::contextMenuEvent(QContextMenuEvent* event) {
  QMenu* menu = makeContextMenu(event->pos());
  menu->exec(event->globalPos());
  delete menu;
}

ImagePane::ImagePane(QWidget* parent) : QWidget(parent), predictions_(new PredictionModel(this)) {
  setAcceptDrops(true);
  auto* layout = new QVBoxLayout(this);
  picture_ = new QLabel;
  picture_->setAlignment(Qt::AlignCenter);
  picture_->setMinimumSize(120, 100);
  picture_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
  picture_->setText(tr("No image\n\nDrop an image here"));
  picture_->setStyleSheet("QLabel { background: #20242a; color: #c8ccd2; border-radius: 4px; }");
  caption_ = new QLabel;
  caption_->setWordWrap(true);
  caption_->setAlignment(Qt::AlignCenter);
  bars_ = new PredictionBars(predictions_);
  times_ = new QLabel;
  times_->setWordWrap(true);
  error_ = new QLabel;
  error_->setWordWrap(true);
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  error_->setStyleSheet("QLabel { color: #a00000; background: #ffe8e8; border: 1px solid #e0a0a0; "
                        "border-radius: 3px; padding: 4px; }");
  error_->hide();
  activity_ = new QLabel;
  activity_->setWordWrap(true);
  activity_->setStyleSheet("QLabel { color: #1f4e79; background: #e8f1fb; border: 1px solid #b5cde6; "
                           "border-radius: 3px; padding: 3px; }");
  activity_->hide();
  warning_ = new QLabel;
  warning_->setWordWrap(true);
  warning_->setObjectName("runWarning");
  warning_->setStyleSheet("QLabel { color: #6a4a00; background: #fff4d6; border: 1px solid #e6c36a; "
                          "border-radius: 3px; padding: 3px; }");
  warning_->hide();
  layout->addWidget(picture_, 1);
  layout->addWidget(caption_);
  layout->addWidget(error_);
  layout->addWidget(activity_);
  layout->addWidget(warning_);
  layout->addWidget(bars_);
  layout->addWidget(times_);
}

void ImagePane::setImage(const QString& path, const QImage& image, QSize size) {
  path_ = path;
  image_ = image;
  if (!size.isValid()) size = image.size();
  caption_->setText(QString("%1  (%2 x %3)").arg(QFileInfo(path).fileName()).arg(size.width()).arg(size.height()));
  updatePixmap();
  if (predictions_->rowCount() == 0) bars_->setPlaceholder(tr("Predictions appear here when the run finishes."));
}

void ImagePane::setRun(const RunData& run) {
  predictions_->setPredictions(run.top);
  const QString note = placeholderNote(run);
  warning_->setText(note);
  warning_->setVisible(!note.isEmpty());
  // The first run says what it included: compiles only when there were any.
  const QString cold = run.coldNewKernels == 1 ? tr("1 new kernel compiled or read from the disk cache")
                       : run.coldNewKernels > 1
                           ? tr("%1 new kernels compiled or read from the disk cache").arg(run.coldNewKernels)
                       : run.coldNewKernels == 0 ? tr("no kernel to compile: all loaded already")
                                                 : tr("kernel compiles included");
  QString text = tr("<b>Results from %1</b>: %2 on %3<br>first run %4 ms (%5)<br>warm %6 ms")
                     .arg(run.device.toHtmlEscaped(), modelShortName(run.model).toHtmlEscaped(),
                          QFileInfo(run.imagePath).fileName().toHtmlEscaped())
                     .arg(run.coldSeconds * 1e3, 0, 'f', 1)
                     .arg(cold)
                     .arg(run.warmSeconds * 1e3, 0, 'f', 2);
  if (run.warmRuns > 0)
    text += tr(" (median of %1 runs; its kernels: %2 ms)").arg(run.warmRuns).arg(run.kernelSeconds * 1e3, 0, 'f', 2);
  times_->setText(text);
  times_->setToolTip(tr("<p><b>First run</b>: wall time of the first run on this device: building the graph, "
                        "compiling every kernel not yet in the disk cache, and running them.</p>"
                        "<p><b>Warm</b>: wall time of the median of the runs after it (graph building, "
                        "scheduling, kernels and the copy of the logits back).</p>"
                        "<p><b>Its kernels</b>: the sum of the kernel times of that same median run; the "
                        "kernel table shows exactly these kernels. It is below the wall time because "
                        "building and scheduling the graph is not a kernel.</p>"));
}

void ImagePane::setActivity(const QString& text) {
  activity_->setText(text);
  activity_->setVisible(!text.isEmpty());
  if (predictions_->rowCount() == 0 && !text.isEmpty()) bars_->setPlaceholder(text);
  else if (predictions_->rowCount() == 0 && !image_.isNull())
    bars_->setPlaceholder(tr("Predictions appear here when the run finishes."));
}

QString ImagePane::activity() const { return activity_->text(); }
QString ImagePane::timesText() const { return times_->text(); }
QString ImagePane::timesToolTip() const { return times_->toolTip(); }

void ImagePane::clearPredictions() {
  predictions_->setPredictions({});
  warning_->clear();
  warning_->hide();
  times_->clear();
  times_->setToolTip({});
  setActivity(activity());  // the placeholder now says what is happening
}

void ImagePane::setError(const QString& message) {
  error_->setText(message);
  error_->setVisible(!message.isEmpty());
}

QString ImagePane::warning() const { return warning_->isVisible() ? warning_->text() : QString(); }

QString ImagePane::error() const { return error_->isVisible() ? error_->text() : QString(); }

void ImagePane::clearImage() {
  path_.clear();
  image_ = QImage();
  picture_->clear();
  caption_->clear();
  clearPredictions();
  setError({});
}

void ImagePane::updatePixmap() {
  if (image_.isNull()) return;
  QSize target = picture_->size() - QSize(8, 8);
  picture_->setPixmap(QPixmap::fromImage(image_.scaled(target.expandedTo({16, 16}), Qt::KeepAspectRatio,
                                                       Qt::SmoothTransformation)));
}

void ImagePane::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  updatePixmap();
}

void ImagePane::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void ImagePane::dropEvent(QDropEvent* event) {
  const auto urls = event->mimeData()->urls();
  if (urls.isEmpty() || !urls[0].isLocalFile()) {
    setError(tr("Only local files can be dropped here."));
    return;
  }
  event->acceptProposedAction();
  emit fileDropped(urls[0].toLocalFile());
}

}  // namespace tlui
