// The small docks: model choice and summary, and the device list.
#pragma once
#include <QWidget>

#include "ui/models/device_model.h"
#include "ui/run_data.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QPushButton;
class QTableView;
class QTextBrowser;

namespace tlui {

class ModelPane : public QWidget {
  Q_OBJECT
 public:
  explicit ModelPane(QWidget* parent = nullptr);
  void setModel(const ModelPtr& model);
  // What a run of `model` found out about it (placeholder weights), shown
  // under its summary while it is the model shown; "" clears it.
  void setRunNote(const QString& model, const QString& note);
  QString summaryText() const;
  QComboBox* modelBox() const { return builtin_; }

 signals:
  void builtinChosen(const QString& name);
  void openRequested();

 private:
  void showSummary();
  QComboBox* builtin_;
  QLabel* summary_;
  QString model_, summaryHtml_, note_;
};

class DevicePane : public QWidget {
  Q_OBJECT
 public:
  explicit DevicePane(QWidget* parent = nullptr);
  DeviceModel* model() const { return model_; }
  QTableView* view() const { return view_; }
  void setDevices(const DeviceList& devices);
  void setCurrent(const QString& name);  // selects without emitting
  QString current() const { return current_; }
  // The device whose results the window shows; after a cancelled run on
  // another device it differs from current(), and the pane says so.
  void setResultsDevice(const QString& name);
  QString resultsNote() const;
  // Selecting a row only shows its facts; this button (or a double click)
  // picks it, which re-runs the current image there.
  QPushButton* useButton() const { return use_; }

 signals:
  void devicePicked(const QString& name);

 private:
  void showFacts(int row);
  void updateUseButton();
  void updateNote();
  DeviceModel* model_;
  QTableView* view_;
  QPushButton* use_;
  QLabel* note_;
  QTextBrowser* facts_;
  QString current_;
  QString resultsDevice_;
};

}  // namespace tlui
