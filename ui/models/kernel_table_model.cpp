#include "ui/models/kernel_table_model.h"

#include <QStringList>

namespace tlui {

void KernelTableModel::setRecords(const std::vector<tl::ProfileRecord>& records) {
  beginResetModel();
  records_ = records;
  total_ = 0;
  for (auto& r : records_) total_ += r.seconds;
  endResetModel();
}

int KernelTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(records_.size());
}
int KernelTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QString KernelTableModel::launchSize(const int64_t size[3]) {
  if (size[0] == 0) return "auto";
  QStringList parts;
  int dims = size[2] > 1 ? 3 : size[1] > 1 ? 2 : 1;
  for (int i = 0; i < dims; ++i) parts << QString::number(size[i]);
  return parts.join(QChar(0x00d7));
}

QVariant KernelTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& r = records_[size_t(index.row())];
  const auto& k = *r.kernel;
  double share = total_ > 0 ? r.seconds / total_ * 100.0 : 0.0;
  if (role == SortRole) {
    switch (index.column()) {
      case Index: return index.row();
      case Global: return double(k.global[0]) * double(k.global[1]) * double(k.global[2]);
      case Local: return double(k.local[0]) * double(std::max<int64_t>(k.local[1], 1)) * double(std::max<int64_t>(k.local[2], 1));
      case Ops: return int(k.ops.size());
      case TimeMs: return r.seconds * 1e3;
      case GFlops: return r.gflops();
      case GBps: return r.gbps();
      case Share: return share;
      default: return data(index, Qt::DisplayRole);
    }
  }
  if (role == RecordRole) return index.row();
  if (role == Qt::TextAlignmentRole)
    return (index.column() >= TimeMs && index.column() != Run && index.column() != Tuned) || index.column() == Index || index.column() == Ops
               ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
               : QVariant();
  if (role == Qt::ToolTipRole && index.column() == Ops) return QString::fromStdString([&] {
      std::string s;
      for (auto& o : k.ops) s += (s.empty() ? "" : " ") + o;
      return s;
    }());
  if (role == Qt::ToolTipRole && index.column() == Tuned) return QString::fromStdString(tl::format_tune_line(k));
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Index: return index.row();
    case Name: return QString::fromStdString(k.name);
    case Device: return QString::fromStdString(k.device);
    case Global: return launchSize(k.global);
    case Local: return launchSize(k.local);
    case Ops: return int(k.ops.size());
    case TimeMs: return QString::number(r.seconds * 1e3, 'f', 3);
    case GFlops: return QString::number(r.gflops(), 'f', 2);
    case GBps: return QString::number(r.gbps(), 'f', 2);
    case Share: return QString::number(share, 'f', 1) + " %";
    case Run: return QString::fromLatin1(tl::run_label(r));
    case Tuned: return QString::fromStdString(k.tuned);
  }
  return {};
}

QVariant KernelTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"#", "Kernel", "Device", "Global", "Local", "Ops", "Time (ms)", "GFLOP/s", "GB/s", "Share", "Run", "Tuned"};
  return section >= 0 && section < ColumnCount ? QString(names[section]) : QVariant();
}

QString KernelTableModel::toCsv() const {
  auto quote = [](QString s) {
    if (s.contains(',') || s.contains('"') || s.contains('\n')) s = '"' + s.replace('"', "\"\"") + '"';
    return s;
  };
  QString out = "index,kernel,device,global,local,ops,time_ms,gflops,gbps,share_percent,run,tuned\n";
  for (size_t i = 0; i < records_.size(); ++i) {
    const auto& r = records_[i];
    const auto& k = *r.kernel;
    QStringList row;
    row << QString::number(i) << quote(QString::fromStdString(k.name)) << quote(QString::fromStdString(k.device))
        << launchSize(k.global).replace(QChar(0x00d7), 'x') << launchSize(k.local).replace(QChar(0x00d7), 'x')
        << QString::number(k.ops.size()) << QString::number(r.seconds * 1e3, 'g', 9)
        << QString::number(r.gflops(), 'g', 9) << QString::number(r.gbps(), 'g', 9)
        << QString::number(total_ > 0 ? r.seconds / total_ * 100.0 : 0.0, 'g', 9)
        << tl::run_label(r) << quote(QString::fromStdString(k.tuned));
    out += row.join(',') + '\n';
  }
  return out;
}

}  // namespace tlui
