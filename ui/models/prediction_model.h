// The top-k predictions of the current image, best first.
#pragma once
#include <QAbstractListModel>
#include <vector>

#include "core/models/classifier.h"

namespace tlui {

class PredictionModel : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Roles { ProbabilityRole = Qt::UserRole + 1, ClassIndexRole };
  using QAbstractListModel::QAbstractListModel;
  void setPredictions(const std::vector<tl::Prediction>& top);
  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;
  QString topLabel() const;

 private:
  std::vector<tl::Prediction> top_;
};

}  // namespace tlui
