// What the training page asks of the worker and what comes back: plain
// values, results shared read-only like RunData.
#pragma once
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <memory>
#include <vector>

#include "core/profile.h"

namespace tlui {

// The same choices as `tinylens-cli train` (app/train_command.h), so a
// configuration behaves identically on the page and on the command line.
struct TrainSettings {
  QString dataset = "digits";  // "digits" or "mnist:DIR"
  QString model = "cnn";       // "cnn" or "mlp"
  QString optimizer = "adam";  // "sgd", "adam", "adamw"
  double lr = -1;              // < 0: the optimizer's default
  int batch = 32;
  double weightDecay = 0;
  QString schedule = "cosine";  // "none", "cosine", "step": per epoch over `epochs`
  int epochs = 5;              // the schedule's horizon
  int augment = 1;             // max shift in pixels
  quint64 seed = 0;
  int evalEvery = 0;           // test every K steps; 0 = at the end of each epoch
  QString device = "cpu";
};

struct TrainSetup {
  quint64 generation = 0;  // the reset job that built this model
  QString summary;         // the layer list with parameter counts
  QStringList parameters;  // state dict names, e.g. "0.weight"
  std::vector<qint64> parameterSizes;
  qint64 trainSize = 0, testSize = 0;
  int stepsPerEpoch = 0;
  double lr = 0;
};
using TrainSetupPtr = std::shared_ptr<const TrainSetup>;

struct TrainStep {
  quint64 generation = 0;
  int step = 0;   // 1-based, since the reset
  int epoch = 0;  // 0-based epoch the step belongs to
  bool epochEnd = false;
  double loss = 0, accuracy = 0, seconds = 0, lr = 0;
  // When the worker began the step, in microseconds of std::chrono's
  // steady_clock, which the window can compare with (a pause starts no step).
  qint64 startedUs = 0;
  std::vector<tl::ProfileRecord> kernels;
};
using TrainStepPtr = std::shared_ptr<const TrainStep>;

struct TrainEval {
  quint64 generation = 0;
  int step = 0;  // steps done when it was measured
  double loss = 0, accuracy = 0, seconds = 0;
};

struct Histogram {
  double low = 0, high = 0;
  std::vector<qint64> bins;
  qint64 nonFinite = 0;  // NaN and infinities, not in any bin
  qint64 total() const;
};

struct ParameterHistograms {
  QString parameter;
  qint64 elements = 0;
  Histogram weights;
  Histogram gradients;  // empty bins when no step has run yet
  int step = 0;
};
using HistogramsPtr = std::shared_ptr<const ParameterHistograms>;

// `bins` equal-width bins over [min, max] of the finite values.
Histogram make_histogram(const std::vector<float>& values, int bins);

}  // namespace tlui

Q_DECLARE_METATYPE(tlui::TrainSetupPtr)
Q_DECLARE_METATYPE(tlui::TrainStepPtr)
Q_DECLARE_METATYPE(tlui::TrainEval)
Q_DECLARE_METATYPE(tlui::HistogramsPtr)
