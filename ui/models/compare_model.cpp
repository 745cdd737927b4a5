#include "compare_model.h"

#include <map>

namespace tlui {

void CompareLatencyModel::setResult(const ComparePtr& result) {
  beginResetModel();
  result_ = result;
  endResetModel();
}
int CompareLatencyModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !result_ ? 0 : int(result_->runs.size());
}
int CompareLatencyModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CompareLatencyModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RunData& r = *result_->runs[size_t(index.row())];
  double kernel = 0;
  for (auto& rec : r.records) kernel += rec.seconds;
  if (role == Qt::UserRole) {
    switch (index.column()) {
      case ColdMs: return r.coldSeconds * 1e3;
      case WarmMs: return r.warmSeconds * 1e3;
      case KernelMs: return kernel * 1e3;
      case Kernels: return int(r.records.size());
      default: return data(index, Qt::DisplayRole);
    }
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Device: return r.device;
    case ColdMs: return QString::number(r.coldSeconds * 1e3, 'f', 1);
    case WarmMs: return QString::number(r.warmSeconds * 1e3, 'f', 2);
    case KernelMs: return QString::number(kernel * 1e3, 'f', 2);
    case Kernels: return int(r.records.size());
    case Top1:
      return r.top.empty() ? QString() : QString("%1 (%2 %)").arg(QString::fromStdString(r.top[0].label))
                                              .arg(r.top[0].probability * 100.0, 0, 'f', 1);
  }
  return {};
}

QVariant CompareLatencyModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"Device", "Cold (ms)", "Warm (ms)", "Kernel time (ms)", "Kernels", "Top-1"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

void CompareKernelModel::setResult(const ComparePtr& result) {
  beginResetModel();
  devices_.clear();
  keys_.clear();
  seconds_.clear();
  if (result) {
    std::map<QString, int> rowOf;
    for (size_t d = 0; d < result->runs.size(); ++d) {
      const RunData& run = *result->runs[d];
      devices_ << run.device;
      std::map<QString, int> seen;
      for (auto& rec : run.records) {
        QString name = QString::fromStdString(rec.kernel->name);
        int n = ++seen[name];
        QString key = n == 1 ? name : QString("%1 #%2").arg(name).arg(n);
        auto it = rowOf.find(key);
        if (it == rowOf.end()) {
          it = rowOf.emplace(key, int(keys_.size())).first;
          keys_ << key;
          seconds_.emplace_back(result->runs.size(), -1.0);
        }
        seconds_[size_t(it->second)][d] = rec.seconds;
      }
    }
  }
  endResetModel();
}

int CompareKernelModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(keys_.size()); }
int CompareKernelModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : 1 + int(devices_.size());
}
double CompareKernelModel::seconds(int row, int device) const { return seconds_[size_t(row)][size_t(device)]; }

QVariant CompareKernelModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  if (index.column() == 0) return role == Qt::DisplayRole || role == Qt::UserRole ? QVariant(keys_[index.row()]) : QVariant();
  double s = seconds(index.row(), index.column() - 1);
  if (role == Qt::UserRole) return s;
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::DisplayRole) return s < 0 ? QString("-") : QString::number(s * 1e3, 'f', 3);
  return {};
}

QVariant CompareKernelModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  if (section == 0) return QString("Kernel");
  if (section >= 1 && section <= devices_.size()) return devices_[section - 1] + " (ms)";
  return {};
}

}  // namespace tlui
