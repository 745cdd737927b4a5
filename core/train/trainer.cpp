#include "core/train/trainer.h"

#include <chrono>
#include <optional>

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

struct Trainer::Launched {
  StepResult result;
  Tensor loss, logits;
  std::vector<int32_t> labels;
};

Trainer::Launched Trainer::launch(const data::Batch& batch, const std::function<void()>& before_realize) {
  Launched l;
  StepResult& r = l.result;
  ProfileCapture capture(time_kernels_);
  model_.train(true);
  optimizer_.zero_grad();
  // The whole step (forward, backward, optimizer update, batch-norm running
  // statistics) is one realize: one schedule, and from the second step on
  // (when the optimizer's state exists) one replayed plan.
  RealizeTogether step;
  l.logits = model_(batch.images);
  l.loss = l.logits.cross_entropy(batch.labels);
  realize_nodes({l.loss.node(), l.logits.node()});
  r.backward_first_id = Node::next_id();
  l.loss.backward();
  r.update_first_id = Node::next_id();
  optimizer_.step();
  if (before_realize) before_realize();
  step.realize();
  // Values only: the step's graph (and every activation it holds) goes now,
  // not when the next step has read this one (train_epoch).
  l.loss = l.loss.detach(), l.logits = l.logits.detach();
  r.kernels = capture.records();
  r.samples = int64_t(batch.label_values.size());
  l.labels = batch.label_values;
  return l;
}

void Trainer::read(Launched& l) {
  l.result.loss = l.loss.item();
  l.result.accuracy = accuracy(l.logits.to_vector(), l.logits.dim(1), l.labels);
}

StepResult Trainer::step(const data::Batch& batch) {
  double t0 = now();
  Launched l = launch(batch);
  read(l);
  l.result.seconds = now() - t0;
  return l.result;
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
  double last = now();
  auto done = [&](Launched& l) {
    StepResult& s = l.result;
    s.seconds = now() - last;  // since the previous step was done: steps overlap
    last += s.seconds;
    loss_sum += s.loss * double(s.samples);
    right += s.accuracy * double(s.samples);
    samples += s.samples;
    e.seconds += s.seconds;
    e.kernel_launches += int64_t(s.kernels.size());
    for (auto& k : s.kernels) e.kernel_seconds += k.seconds;
    if (on_step) on_step(s);
  };
  // Step k's loss and logits are read once step k + 1's graph is built,
  // just before its kernels are queued: on a device whose realize returns
  // early (a GPU, Device::realize_may_return_early) the host builds the next
  // graph while the device runs this step. Same values as step() by step().
  // `on_step` sees step k after step k + 1 is queued, outside its collection,
  // so it may realize and read what it likes.
  std::optional<Launched> previous;
  while (batches.next(b)) {
    Launched l = launch(b, [&] {
      if (previous) read(*previous);
    });
    if (previous) done(*previous);
    previous = std::move(l);
  }
  if (previous) read(*previous), done(*previous);
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
