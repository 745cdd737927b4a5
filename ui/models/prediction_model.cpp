#include "ui/models/prediction_model.h"

namespace tlui {

void PredictionModel::setPredictions(const std::vector<tl::Prediction>& top) {
  beginResetModel();
  top_ = top;
  endResetModel();
}

int PredictionModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(top_.size()); }

QVariant PredictionModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const auto& p = top_[size_t(index.row())];
  switch (role) {
    case Qt::DisplayRole: return QString::fromStdString(p.label);
    case Qt::ToolTipRole:
      return QString("%1 (class %2): %3 %").arg(QString::fromStdString(p.label)).arg(p.index).arg(p.probability * 100.0, 0, 'f', 2);
    case ProbabilityRole: return double(p.probability);
    case ClassIndexRole: return p.index;
    default: return {};
  }
}

QHash<int, QByteArray> PredictionModel::roleNames() const {
  auto names = QAbstractListModel::roleNames();
  names[ProbabilityRole] = "probability";
  names[ClassIndexRole] = "classIndex";
  return names;
}

QString PredictionModel::topLabel() const { return top_.empty() ? QString() : QString::fromStdString(top_[0].label); }

}  // namespace tlui
