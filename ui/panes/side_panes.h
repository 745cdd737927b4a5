// The small docks: model choice and summary, and the device list.
#pragma once
#include <QWidget>

#include "ui/models/device_model.h"
#include "ui/run_data.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QTableView;
class QTextBrowser;

namespace tlui {

class ModelPane : public QWidget {
  Q_OBJECT
 public:
  explicit ModelPane(QWidget* parent = nullptr);
  void setModel(const ModelPtr& model);
  QString summaryText() const;
  QComboBox* modelBox() const { return builtin_; }

 signals:
  void builtinChosen(const QString& name);
  void openRequested();

 private:
  QComboBox* builtin_;
  QLabel* summary_;
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

 signals:
  void devicePicked(const QString& name);

 private:
  void showFacts(int row);
  DeviceModel* model_;
  QTableView* view_;
  QTextBrowser* facts_;
  QString current_;
  bool quiet_ = false;
};

}  // namespace tlui
