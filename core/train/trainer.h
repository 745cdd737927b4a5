// One training loop for every model and device: forward, cross-entropy,
// backward, optimizer step, with the kernels each step ran.
#pragma once
#include <functional>
#include <vector>

#include "core/data/dataset.h"
#include "core/nn/module.h"
#include "core/nn/optim.h"
#include "core/profile.h"

namespace tl::train {

struct StepResult {
  // seconds: step()'s whole call; inside train_epoch, where a step's graph
  // is built while the previous step runs, the time since the previous step
  // was done (so the steps' seconds add up to the epoch's).
  double loss = 0, accuracy = 0, seconds = 0;
  int64_t samples = 0;
  std::vector<ProfileRecord> kernels;  // every launch of the step, in order
  // Graph nodes are numbered in the order they are made: ids from
  // backward_first_id on were made by autograd, from update_first_id on by
  // the optimizer (the step is one realize, so this is how a viewer tells
  // the phases apart).
  uint64_t backward_first_id = 0, update_first_id = 0;
};

struct EvalResult {
  double loss = 0, accuracy = 0, seconds = 0;
  int64_t samples = 0;
};

struct EpochResult {
  int epoch = 0;
  double train_loss = 0, train_accuracy = 0;  // averaged over the epoch's samples
  double test_loss = 0, test_accuracy = 0;
  double seconds = 0;        // training steps only
  double eval_seconds = 0;
  double kernel_seconds = 0;  // device time of the training steps' kernels
  int64_t kernel_launches = 0;
  double lr = 0;
};

class Trainer {
 public:
  Trainer(nn::Module& model, nn::Optimizer& optimizer) : model_(model), optimizer_(optimizer) {}

  StepResult step(const data::Batch& batch);
  // Evaluation mode and no gradient graph; restores the previous mode.
  EvalResult evaluate(const data::Dataset& data, int64_t batch_size = 500);
  // One pass over `batches` (epoch k's shuffle) then evaluate on `test` when
  // given. `on_step` sees every step, e.g. for a progress bar.
  EpochResult train_epoch(data::Batches& batches, int epoch, const data::Dataset* test = nullptr,
                          const std::function<void(const StepResult&)>& on_step = {});
  // Off: steps still list their kernels but leave their seconds at 0, and a
  // GPU launches them without timing events (ProfileCapture(false)).
  void time_kernels(bool on) { time_kernels_ = on; }

 private:
  // A step whose kernels are queued (a GPU may still be running them) and
  // whose loss and logits are not read yet.
  struct Launched;
  // Builds the step's graph, calls `before_realize`, realizes the step.
  Launched launch(const data::Batch& batch, const std::function<void()>& before_realize = {});
  void read(Launched& l);  // fills loss and accuracy; waits for the step's kernels

  nn::Module& model_;
  nn::Optimizer& optimizer_;
  bool time_kernels_ = true;
};

// Fraction of rows whose first maximal logit is the label.
double accuracy(const std::vector<float>& logits, int64_t classes, const std::vector<int32_t>& labels);

}  // namespace tl::train
