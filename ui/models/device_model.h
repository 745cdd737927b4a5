// Every enumerated device; the ones that cannot run are listed, disabled,
// with the reason (the ANE always is, on this machine).
#pragma once
#include <QAbstractTableModel>

#include "core/runtime/device.h"

namespace tlui {

class DeviceModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { Name, Kind, Description, Status, ColumnCount };
  enum Roles { DeviceNameRole = Qt::UserRole + 1, AvailableRole };
  using QAbstractTableModel::QAbstractTableModel;

  void setDevices(const std::vector<tl::DeviceInfo>& devices);
  const std::vector<tl::DeviceInfo>& devices() const { return devices_; }
  int rowOf(const QString& name) const;  // -1 when unknown
  QStringList availableNames() const;
  // All facts of one device as readable lines (the details panel and tooltip).
  static QString facts(const tl::DeviceInfo& d);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 private:
  std::vector<tl::DeviceInfo> devices_;
};

}  // namespace tlui
