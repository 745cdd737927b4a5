#include "ui/models/device_model.h"

#include <QBrush>
#include <QColor>
#include <QStringList>

namespace tlui {

namespace {
QString human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return QString::number(double(b) / double(1ull << 30), 'f', 1) + " GiB";
  if (b >= (1ull << 20)) return QString::number(double(b) / double(1ull << 20), 'f', 1) + " MiB";
  return QString::number(double(b) / 1024.0, 'f', 1) + " KiB";
}
}  // namespace

void DeviceModel::setDevices(const std::vector<tl::DeviceInfo>& devices) {
  beginResetModel();
  devices_ = devices;
  endResetModel();
}

int DeviceModel::rowOf(const QString& name) const {
  for (size_t i = 0; i < devices_.size(); ++i)
    if (QString::fromStdString(devices_[i].name) == name) return int(i);
  return -1;
}

QStringList DeviceModel::availableNames() const {
  QStringList out;
  for (auto& d : devices_)
    if (d.available) out << QString::fromStdString(d.name);
  return out;
}

QString DeviceModel::facts(const tl::DeviceInfo& d) {
  QStringList l;
  auto add = [&](const QString& key, const QString& value) {
    if (!value.isEmpty()) l << key + ": " + value;
  };
  add("Name", QString::fromStdString(d.name));
  add("Kind", QString::fromStdString(d.kind));
  add("Description", QString::fromStdString(d.description));
  add("Vendor", QString::fromStdString(d.vendor));
  add("Platform", QString::fromStdString(d.platform));
  add("Driver", QString::fromStdString(d.driver_version));
  add("Language", QString::fromStdString(d.language_version));
  if (d.compute_units) add("Compute units", QString::number(d.compute_units));
  if (d.clock_mhz) add("Clock", QString::number(d.clock_mhz) + " MHz");
  if (d.global_memory) add("Global memory", human_bytes(d.global_memory));
  if (d.local_memory) add("Local memory", human_bytes(d.local_memory));
  add("Max work-group", QString::number(d.max_work_group));
  add("fp16 / fp64", QString("%1 / %2").arg(d.fp16 ? "yes" : "no", d.fp64 ? "yes" : "no"));
  if (!d.extensions.empty()) add("Extensions", QString::number(d.extensions.size()));
  add("Status", d.available ? QString("available") : "unavailable: " + QString::fromStdString(d.unavailable_reason));
  return l.join('\n');
}

int DeviceModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(devices_.size()); }
int DeviceModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant DeviceModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& d = devices_[size_t(index.row())];
  switch (role) {
    case DeviceNameRole: return QString::fromStdString(d.name);
    case AvailableRole: return d.available;
    case Qt::ToolTipRole: return facts(d);
    case Qt::ForegroundRole:
      return d.available ? QVariant() : QVariant(QBrush(QColor(140, 140, 140)));
    case Qt::DisplayRole:
      switch (index.column()) {
        case Name: return QString::fromStdString(d.name);
        case Kind: return QString::fromStdString(d.kind);
        case Description: return QString::fromStdString(d.description);
        case Status:
          return d.available ? QString("available") : "unavailable: " + QString::fromStdString(d.unavailable_reason);
      }
  }
  return {};
}

QVariant DeviceModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"Device", "Kind", "Description", "Status"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

Qt::ItemFlags DeviceModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return Qt::NoItemFlags;
  // Unavailable devices stay visible (with their reason) but cannot be picked.
  return devices_[size_t(index.row())].available ? Qt::ItemIsEnabled | Qt::ItemIsSelectable : Qt::NoItemFlags;
}

}  // namespace tlui
