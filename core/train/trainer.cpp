#include "core/train/trainer.h"

#include <chrono>

#include "core/error.h"
#include "core/realize.h"

namespace tl::train {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

double accuracy(const std::vector<float>& logits, int64_t classes, const std::vector<int32_t>& labels) {
  if (labels.empty()) return 0;
  int64_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const float* row = logits.data() + int64_t(i) * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    right += best == labels[i];
  }
  return double(right) / double(labels.size());
}

StepResult Trainer::step(const data::Batch& batch) {
  StepResult r;
  double t0 = now();
  {
    ProfileCapture capture(time_kernels_);
    model_.train(true);
    optimizer_.zero_grad();
    // The whole step (forward, backward, optimizer update, batch-norm running
    // statistics) is one realize: one schedule, and from the second step on
    // (when the optimizer's state exists) one replayed plan.
    RealizeTogether step;
    Tensor logits = model_(batch.images);
    Tensor loss = logits.cross_entropy(batch.labels);
    realize_nodes({loss.node(), logits.node()});
    r.backward_first_id = Node::next_id();
    loss.backward();
    r.update_first_id = Node::next_id();
    optimizer_.step();
    step.realize();
    r.loss = loss.item();
    r.accuracy = accuracy(logits.to_vector(), logits.dim(1), batch.label_values);
    r.kernels = capture.records();
  }
  r.samples = int64_t(batch.label_values.size());
  r.seconds = now() - t0;
  return r;
}

EvalResult Trainer::evaluate(const data::Dataset& data, int64_t batch_size) {
  EvalResult r;
  double t0 = now();
  bool was_training = model_.training();
  model_.eval();
  NoGrad ng;
  // The test images go where the weights live: a model trained on a GPU is
  // evaluated there, whatever the default device is meanwhile.
  std::string device;
  for (Tensor* p : model_.parameters()) {
    device = p->device();
    break;
  }
  data::Batches batches(data, batch_size, false, 0, false, 2, device);
  data::Batch b;
  double loss_sum = 0, right = 0;
  while (batches.next(b)) {
    Tensor logits = model_(b.images);
    Tensor loss = logits.cross_entropy(b.labels);
    realize_nodes({loss.node(), logits.node()});
    double n = double(b.label_values.size());
    loss_sum += double(loss.item()) * n;
    right += accuracy(logits.to_vector(), logits.dim(1), b.label_values) * n;
    r.samples += int64_t(n);
  }
  model_.train(was_training);
  r.loss = loss_sum / double(r.samples);
  r.accuracy = right / double(r.samples);
  r.seconds = now() - t0;
  return r;
}

EpochResult Trainer::train_epoch(data::Batches& batches, int epoch, const data::Dataset* test,
                                 const std::function<void(const StepResult&)>& on_step) {
  EpochResult e;
  e.epoch = epoch;
  e.lr = optimizer_.lr();
  batches.start_epoch(epoch);
  data::Batch b;
  double loss_sum = 0, right = 0;
  int64_t samples = 0;
  while (batches.next(b)) {
    StepResult s = step(b);
    loss_sum += s.loss * double(s.samples);
    right += s.accuracy * double(s.samples);
    samples += s.samples;
    e.seconds += s.seconds;
    e.kernel_launches += int64_t(s.kernels.size());
    for (auto& k : s.kernels) e.kernel_seconds += k.seconds;
    if (on_step) on_step(s);
  }
  e.train_loss = loss_sum / double(samples);
  e.train_accuracy = right / double(samples);
  if (test) {
    EvalResult ev = evaluate(*test);
    e.test_loss = ev.loss;
    e.test_accuracy = ev.accuracy;
    e.eval_seconds = ev.seconds;
  }
  return e;
}

}  // namespace tl::train
