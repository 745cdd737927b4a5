// The training page's state on the Session's worker thread: data sets, model,
// optimizer, batches and step counter. Only the worker touches it; the
// Session turns its results into signals.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/nn/layers.h"
#include "core/nn/optim.h"
#include "core/train/trainer.h"
#include "ui/run_data.h"
#include <algorithm>

#include "ui/train_data.h"

namespace tlui {

class TrainWorker {
 public:
  TrainWorker();
  ~TrainWorker();

  bool ready() const { return model_ != nullptr; }
  QString device() const { return settings_.device; }
  // Whether the next step may be abandoned half-way (a cancel throws
  // tl::Cancelled out of step()) and leave everything as it was: while the
  // optimizer has no state yet (the first step after a reset or a load, the
  // one that compiles), since the optimizers count a step before its
  // realize, and only a fresh one can be made again exactly.
  bool cancellable() const { return optimizer_ && optimizer_->steps() == 0; }
  // Builds a fresh model and optimizer from the settings. Throws with a
  // readable message (bad data set, bad option) and then keeps the previous
  // model, data and counters untouched.
  TrainSetupPtr reset(const TrainSettings& settings, quint64 generation);
  // One batch. When `graph` is given, the step's op graph (forward, loss,
  // backward and update) is snapshotted into it with the step's kernels.
  TrainStepPtr step(RunData* graph = nullptr);
  TrainEval evaluate();
  // Weights and the gradient of the last step of one parameter.
  HistogramsPtr histograms(const QString& parameter, int bins);
  void save(const QString& path);
  // Loads a state dict saved from the same architecture, then restarts the
  // optimizer's state (its moments belong to the old weights).
  void load(const QString& path);
  // Logits of the first `count` test images, for checking a save/load round trip.
  std::vector<float> probe(int count);

  quint64 generation() const { return generation_; }
  int steps() const { return step_; }
  bool evaluationDue() const;  // after a step, by the settings' evalEvery
  // The last step ended the schedule's last epoch (settings' epochs): Run
  // stops there; Run N and Step may go on past it.
  bool scheduleComplete() const { return lastEpochEnd_ && epoch_ + 1 >= std::max(1, settings_.epochs); }

 private:
  struct Data {
    tl::data::Dataset train, test;
  };
  std::shared_ptr<Data> loadData(const TrainSettings& s);
  void startEpoch(int epoch);
  void remakeOptimizer();  // fresh, from settings_, for the current epoch's learning rate
  tl::train::StepResult runStep(const tl::data::Batch& batch, RunData* graph);
  void applySchedule();  // the learning rate of epoch_

  TrainSettings settings_;
  quint64 generation_ = 0;
  std::map<std::string, std::shared_ptr<Data>> cache_;  // by data set (and split seed)
  std::shared_ptr<Data> data_;
  std::shared_ptr<tl::nn::Sequential> model_;
  std::unique_ptr<tl::nn::Optimizer> optimizer_;
  std::unique_ptr<tl::data::Batches> batches_;
  std::unique_ptr<tl::train::Trainer> trainer_;
  double baseLr_ = 0;
  int step_ = 0, epoch_ = 0, stepInEpoch_ = 0;
  bool lastEpochEnd_ = false;
  // The parameters as they were before the last step: their gradients are
  // the last step's (the optimizer installs fresh leaves in the slots).
  std::map<std::string, tl::Tensor> lastParameters_;
};

}  // namespace tlui
