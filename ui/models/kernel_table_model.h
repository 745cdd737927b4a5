// One row per kernel launch of a run: what it is, where it ran, how fast.
#pragma once
#include <QAbstractTableModel>
#include <vector>

#include "core/profile.h"

namespace tlui {

class KernelTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // Run: "replayed" when the launch came from a remembered plan, else
  // "planned"; "assembled in place" for a concatenation its inputs wrote.
  // Tuned: the rendering the tuner chose (core/tune.h), "" when none; its
  // tooltip lists every candidate's time (format_tune_line).
  enum Column { Index, Name, Device, Global, Local, Ops, TimeMs, GFlops, GBps, Share, Run, Tuned, ColumnCount };
  // Sort by this role: numbers sort as numbers, not as their text.
  enum Roles { SortRole = Qt::UserRole + 1, RecordRole };
  using QAbstractTableModel::QAbstractTableModel;

  void setRecords(const std::vector<tl::ProfileRecord>& records);
  const std::vector<tl::ProfileRecord>& records() const { return records_; }
  double totalSeconds() const { return total_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // Every row and column, comma-separated, quoted where needed; numbers in
  // full precision so a spreadsheet can recompute the shares.
  QString toCsv() const;

  static QString launchSize(const int64_t size[3]);

 private:
  std::vector<tl::ProfileRecord> records_;
  double total_ = 0;
};

}  // namespace tlui
