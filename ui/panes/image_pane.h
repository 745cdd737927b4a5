// The image the model saw, its top-5 as labelled bars, cold and warm times,
// and an inline error line. Accepts dropped files.
#pragma once
#include <QImage>
#include <QWidget>

#include "ui/models/prediction_model.h"
#include "ui/run_data.h"

class QLabel;
class QMenu;

namespace tlui {

class PredictionBars : public QWidget {
  Q_OBJECT
 public:
  explicit PredictionBars(PredictionModel* model, QWidget* parent = nullptr);
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  void setPlaceholder(const QString& text);
  QString placeholder() const { return placeholder_; }
  // The right-click menu at `pos`: copy the prediction there, or all of them
  // (the caller owns the menu).
  QMenu* makeContextMenu(const QPoint& pos);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;

 private:
  PredictionModel* model_;
  QString placeholder_;
};

class ImagePane : public QWidget {
  Q_OBJECT
 public:
  explicit ImagePane(QWidget* parent = nullptr);
  PredictionModel* predictions() const { return predictions_; }
  PredictionBars* bars() const { return bars_; }
  // `image` as shown (it may be a reduced copy); `size` the file's, for the caption.
  void setImage(const QString& path, const QImage& image, QSize size = {});
  void clearImage();  // no image, no predictions
  // The run's top-5 and its times: cold, and the median warm run whose
  // kernels (summing to kernelSeconds) the kernel table shows; headed by
  // the device, model and image they belong to.
  void setRun(const RunData& run);
  // What the window is doing for this image ("Compiling kernels for cpu...
  // 37/87"); shown above the predictions, and in their place while there
  // are none. Empty hides it.
  void setActivity(const QString& text);
  QString activity() const;
  QString timesText() const;
  QString timesToolTip() const;
  void clearPredictions();
  void setError(const QString& message);  // empty hides it
  QString error() const;
  QString warning() const;  // the run's warning (placeholder weights), or ""

  QString imagePath() const { return path_; }
  QImage image() const { return image_; }

 signals:
  void fileDropped(const QString& path);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void updatePixmap();
  PredictionModel* predictions_;
  QLabel* picture_;
  QLabel* caption_;
  QLabel* times_;
  QLabel* error_;
  QLabel* activity_;
  QLabel* warning_;
  PredictionBars* bars_;
  QImage image_;
  QString path_;
};

}  // namespace tlui
