// The training page's hyper-parameters as a form: model, data set (digits or
// an MNIST folder), optimizer, learning rate, batch, weight decay, schedule,
// augmentation, seed and test cadence. They describe the next Reset.
#pragma once
#include <QWidget>

#include "ui/train_data.h"

class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QSpinBox;

namespace tlui {

// The wheel over a form scrolls the form: spin boxes and combo boxes under
// `root` take the wheel only once they have focus (clicked or tabbed into),
// so scrolling past "Batch 32" no longer turns it into 22.
void scrollFormWithWheel(QWidget* root);

class TrainingSettingsForm : public QWidget {
  Q_OBJECT
 public:
  explicit TrainingSettingsForm(QWidget* parent = nullptr);
  TrainSettings settings() const;  // device left at its default: the page sets it
  // "" = the digits image; otherwise an MNIST folder (what Browse sets).
  void setMnistFolder(const QString& dir);
  QComboBox* modelBox() const { return model_; }
  QSpinBox* seedBox() const { return seed_; }
  QSpinBox* batchBox() const { return batch_; }
  QSpinBox* epochsBox() const { return epochs_; }

 signals:
  void changed();

 private:
  QComboBox *model_, *dataset_, *optimizer_, *schedule_;
  QDoubleSpinBox *lr_, *weightDecay_;
  QSpinBox *batch_, *epochs_, *augment_, *seed_, *evalEvery_;
  QLineEdit* folder_;
};

}  // namespace tlui
