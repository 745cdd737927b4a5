#include "ui/models/compare_model.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tlui {

DeviceFigures deviceFigures(const RunData& run, const RunData& reference) {
  DeviceFigures f;
  f.coldMs = run.coldSeconds * 1e3;
  f.warmMs = run.warmSeconds * 1e3;
  for (const auto& rec : run.records) f.kernelMs += rec.seconds * 1e3;
  f.hostMs = f.warmMs - f.kernelMs;
  for (size_t k = 0; k < std::min(run.logits.size(), reference.logits.size()); ++k)
    f.maxLogitDiff = std::max(f.maxLogitDiff, std::fabs(double(run.logits[k]) - double(reference.logits[k])));
  f.speedup = run.warmSeconds > 0 ? reference.warmSeconds / run.warmSeconds : 0;
  return f;
}

void CompareLatencyModel::setResult(const ComparePtr& result) {
  beginResetModel();
  result_ = result;
  reference_ = 0;
  recompute();
  endResetModel();
}

void CompareLatencyModel::setReference(int row) {
  if (!result_ || row < 0 || size_t(row) >= result_->runs.size() || row == reference_) return;
  reference_ = row;
  recompute();
  if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

void CompareLatencyModel::recompute() {
  figures_.clear();
  if (!result_) return;
  for (const auto& run : result_->runs) figures_.push_back(deviceFigures(*run, *result_->runs[size_t(reference_)]));
}

int CompareLatencyModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !result_ ? 0 : int(result_->runs.size());
}
int CompareLatencyModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CompareLatencyModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RunData& r = *result_->runs[size_t(index.row())];
  const DeviceFigures& f = figures_[size_t(index.row())];
  const bool isReference = index.row() == reference_;
  if (role == Qt::UserRole) {
    switch (index.column()) {
      case Device: return r.device;
      case ColdMs: return f.coldMs;
      case WarmMs: return f.warmMs;
      case KernelMs: return f.kernelMs;
      case HostMs: return f.hostMs;
      case Speedup: return f.speedup;
      case Kernels: return int(r.records.size());
      case Top1: return r.top.empty() ? QString() : QString::fromStdString(r.top[0].label);
      case LogitDiff: return f.maxLogitDiff;
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole)
    return index.column() == Device || index.column() == Top1 ? int(Qt::AlignLeft | Qt::AlignVCenter)
                                                                : int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && index.column() == HostMs)
    return tr("Warm run time not spent in kernels: launches, copies, synchronisation");
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Device: return isReference ? tr("%1 (reference)").arg(r.device) : r.device;
    case ColdMs: return QString::number(f.coldMs, 'f', 1);
    case WarmMs: return QString::number(f.warmMs, 'f', 2);
    case KernelMs: return QString::number(f.kernelMs, 'f', 2);
    case HostMs: return QString::number(f.hostMs, 'f', 2);
    case Speedup: return isReference ? QString("1.00x") : QString("%1x").arg(f.speedup, 0, 'f', 2);
    case Kernels: return int(r.records.size());
    case Top1:
      return r.top.empty() ? QString() : QString("%1 (%2 %)").arg(QString::fromStdString(r.top[0].label))
                                              .arg(r.top[0].probability * 100.0, 0, 'f', 1);
    case LogitDiff: return isReference ? QString("-") : QString::number(f.maxLogitDiff, 'g', 3);
  }
  return {};
}

QVariant CompareLatencyModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || (role != Qt::DisplayRole && role != Qt::ToolTipRole))
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[] = {"Device",           "Cold (ms)", "Warm (ms)", "Kernel sum (ms)", "Host overhead (ms)",
                                "Speed-up (warm)", "Kernels",   "Top-1",     "Max logit diff"};
  static const char* tips[] = {"Device the model ran on",
                               "First run: compiles every kernel (or reads the cache), then runs",
                               "Best of the warm runs, end to end",
                               "Sum of the device times of one warm run's kernels",
                               "Warm minus kernel sum: launches, copies, synchronisation",
                               "Reference device's warm time over this device's",
                               "Kernel launches of one warm run",
                               "Top class and its probability",
                               "Largest |logit - reference logit| over the 1000 classes"};
  if (section < 0 || section >= ColumnCount) return {};
  return role == Qt::DisplayRole ? tr(names[section]) : tr(tips[section]);
}

void CompareKernelModel::setResult(const ComparePtr& result) {
  beginResetModel();
  devices_.clear();
  keys_.clear();
  seconds_.clear();
  range_.clear();
  runs_.clear();
  reference_ = 0;
  if (result) {
    std::map<QString, int> rowOf;
    for (size_t d = 0; d < result->runs.size(); ++d) {
      const RunData& run = *result->runs[d];
      devices_ << run.device;
      runs_.push_back(std::max(1, run.kernelSamples.empty() ? 1 : run.warmRuns));
      std::map<QString, int> seen;
      for (size_t k = 0; k < run.records.size(); ++k) {
        const auto& rec = run.records[k];
        QString name = QString::fromStdString(rec.kernel->name);
        int n = ++seen[name];
        QString key = n == 1 ? name : QString("%1 #%2").arg(name).arg(n);
        auto it = rowOf.find(key);
        if (it == rowOf.end()) {
          it = rowOf.emplace(key, int(keys_.size())).first;
          keys_ << key;
          seconds_.emplace_back(result->runs.size(), -1.0);
          range_.emplace_back(result->runs.size(), std::make_pair(-1.0, -1.0));
        }
        seconds_[size_t(it->second)][d] = rec.seconds;
        std::pair<double, double> r{rec.seconds, rec.seconds};
        if (k < run.kernelSamples.size() && !run.kernelSamples[k].empty()) {
          const auto& samples = run.kernelSamples[k];
          r = {*std::min_element(samples.begin(), samples.end()), *std::max_element(samples.begin(), samples.end())};
        }
        range_[size_t(it->second)][d] = r;
      }
    }
  }
  endResetModel();
}

void CompareKernelModel::setReference(int device) {
  if (device < 0 || device >= devices_.size() || device == reference_) return;
  beginResetModel();  // the speed-up columns change devices
  reference_ = device;
  endResetModel();
}

int CompareKernelModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(keys_.size()); }
int CompareKernelModel::columnCount(const QModelIndex& parent) const {
  if (parent.isValid() || devices_.isEmpty()) return parent.isValid() ? 0 : 1;
  return 1 + int(devices_.size()) + int(devices_.size()) - 1;
}
double CompareKernelModel::seconds(int row, int device) const { return seconds_[size_t(row)][size_t(device)]; }
std::pair<double, double> CompareKernelModel::range(int row, int device) const {
  return range_[size_t(row)][size_t(device)];
}
int CompareKernelModel::runs(int device) const { return runs_[size_t(device)]; }

double CompareKernelModel::speedup(int row, int device) const {
  const double ref = seconds(row, reference_), s = seconds(row, device);
  return ref > 0 && s > 0 ? ref / s : 0;
}

int CompareKernelModel::speedupDevice(int column) const {
  int k = column - 1 - int(devices_.size());  // k-th device other than the reference
  if (k < 0 || k >= int(devices_.size()) - 1) return -1;
  return k < reference_ ? k : k + 1;
}

QVariant CompareKernelModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  if (index.column() == 0) {
    if (role == Qt::DisplayRole || role == Qt::UserRole || role == Qt::ToolTipRole) return keys_[index.row()];
    return {};
  }
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (int d = speedupDevice(index.column()); d >= 0) {
    const double x = speedup(index.row(), d);
    if (role == Qt::UserRole) return x;
    if (role == Qt::DisplayRole) return x > 0 ? QString("%1x").arg(x, 0, 'f', 2) : QString("-");
    if (role == Qt::ToolTipRole && x > 0)
      return tr("median %1 time over median %2 time").arg(devices_[reference_], devices_[d]);
    return {};
  }
  const int device = index.column() - 1;
  const double s = seconds(index.row(), device);
  if (role == Qt::UserRole) return s;
  if (s < 0) return role == Qt::DisplayRole ? QVariant(QString("-")) : QVariant();
  // The median, and half the range of the runs around it as a share of it.
  const auto [low, high] = range(index.row(), device);
  const int n = runs(device);
  if (role == Qt::DisplayRole) {
    if (n < 2 || s <= 0) return QString::number(s * 1e3, 'f', 3);
    return QString("%1 \u00B1%2%").arg(s * 1e3, 0, 'f', 3).arg(std::lround(50.0 * (high - low) / s));
  }
  if (role == Qt::ToolTipRole)
    return n < 2 ? tr("%1 ms in one run").arg(s * 1e3, 0, 'f', 4)
                 : tr("median of %1 runs: %2 ms; fastest %3 ms, slowest %4 ms")
                       .arg(n).arg(s * 1e3, 0, 'f', 4).arg(low * 1e3, 0, 'f', 4).arg(high * 1e3, 0, 'f', 4);
  return {};
}

QVariant CompareKernelModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || (role != Qt::DisplayRole && role != Qt::ToolTipRole))
    return QAbstractTableModel::headerData(section, orientation, role);
  if (section == 0) return role == Qt::DisplayRole ? tr("Kernel") : tr("Kernel name, #N for its N-th launch");
  if (int d = speedupDevice(section); d >= 0)
    return role == Qt::DisplayRole ? tr("Speed-up %1").arg(devices_[d])
                                   : tr("%1 time over %2 time").arg(devices_[reference_], devices_[d]);
  if (section >= 1 && section <= devices_.size())
    return role == Qt::DisplayRole ? tr("%1 (ms)").arg(devices_[section - 1])
                                   : tr("Device time of the kernel on %1").arg(devices_[section - 1]);
  return {};
}

}  // namespace tlui
