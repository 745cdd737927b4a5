#include "ui/train_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

#include "core/graph.h"
#include "core/realize.h"
#include "core/train/models.h"

namespace tlui {

namespace nn = tl::nn;
namespace data = tl::data;

qint64 Histogram::total() const {
  qint64 n = nonFinite;
  for (qint64 b : bins) n += b;
  return n;
}

Histogram make_histogram(const std::vector<float>& values, int bins) {
  Histogram h;
  bins = std::max(1, bins);
  bool any = false;
  for (float v : values) {
    if (!std::isfinite(v)) continue;
    if (!any) h.low = h.high = v;
    h.low = std::min(h.low, double(v));
    h.high = std::max(h.high, double(v));
    any = true;
  }
  h.bins.assign(size_t(bins), 0);
  // A constant parameter (a zero bias) still gets one visible bar.
  double width = h.high > h.low ? (h.high - h.low) / bins : 1.0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++h.nonFinite;
      continue;
    }
    int b = int((double(v) - h.low) / width);
    ++h.bins[size_t(std::clamp(b, 0, bins - 1))];
  }
  return h;
}

TrainWorker::TrainWorker() = default;
TrainWorker::~TrainWorker() = default;

std::shared_ptr<TrainWorker::Data> TrainWorker::loadData(const TrainSettings& s) {
  const std::string dataset = s.dataset.toStdString();
  const bool mnist = dataset.rfind("mnist:", 0) == 0;
  if (dataset != "digits" && !mnist)
    throw std::invalid_argument("unknown data set '" + dataset + "' (digits or an MNIST folder)");
  // The digits split depends on the seed; MNIST comes split.
  const std::string key = mnist ? dataset : dataset + "#" + std::to_string(s.seed);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  auto d = std::make_shared<Data>();
  if (mnist) std::tie(d->train, d->test) = data::load_mnist_dir(dataset.substr(6));
  else std::tie(d->train, d->test) = data::split(data::load_digits(data::default_digits_path()), 0.2, s.seed);
  if (d->train.size() == 0 || d->test.size() == 0) throw std::runtime_error("the data set " + dataset + " is empty");
  cache_.clear();  // one data set at a time: MNIST is 200 MB of floats
  cache_[key] = d;
  return d;
}

TrainSetupPtr TrainWorker::reset(const TrainSettings& s, quint64 generation) {
  if (s.model != "cnn" && s.model != "mlp")
    throw std::invalid_argument("unknown model '" + s.model.toStdString() + "' (cnn or mlp)");
  if (s.batch < 1) throw std::invalid_argument("the batch size must be at least 1");
  if (s.schedule != "none" && s.schedule != "cosine" && s.schedule != "step")
    throw std::invalid_argument("unknown schedule '" + s.schedule.toStdString() + "'");
  // Everything is built aside first so a failure leaves the old state whole.
  auto d = loadData(s);
  const std::string device = s.device.toStdString();
  tl::Generator gen(s.seed);
  auto model = tl::train::make_model(s.model.toStdString(), d->train, gen, device);
  auto optimizer = tl::train::make_optimizer(s.optimizer.toStdString(), model->parameters(), s.lr, s.weightDecay);
  auto batches = std::make_unique<data::Batches>(d->train, s.batch, true, s.seed, s.augment > 0, s.augment, device);

  trainer_.reset();
  settings_ = s;
  generation_ = generation;
  data_ = d;
  model_ = model;
  optimizer_ = std::move(optimizer);
  batches_ = std::move(batches);
  trainer_ = std::make_unique<tl::train::Trainer>(*model_, *optimizer_);
  baseLr_ = optimizer_->lr();
  step_ = 0;
  lastEpochEnd_ = false;
  lastParameters_.clear();
  startEpoch(0);

  auto setup = std::make_shared<TrainSetup>();
  setup->generation = generation;
  setup->summary = QString::fromStdString(nn::describe(*model_));
  for (auto& [name, slot] : model_->named_parameters()) {
    setup->parameters << QString::fromStdString(name);
    setup->parameterSizes.push_back(qint64(tl::numel(slot->shape())));
  }
  setup->trainSize = d->train.size();
  setup->testSize = d->test.size();
  setup->stepsPerEpoch = int(batches_->batches_per_epoch());
  setup->lr = baseLr_;
  return setup;
}

// The schedules step per epoch, as in `tinylens-cli train`.
void TrainWorker::startEpoch(int epoch) {
  epoch_ = epoch;
  stepInEpoch_ = 0;
  applySchedule();
  batches_->start_epoch(epoch);
}

// One trainer step; with `graph`, its op graph is snapshotted into it.
tl::train::StepResult TrainWorker::runStep(const data::Batch& batch, RunData* graph) {
  if (!graph) return trainer_->step(batch);
  // The step is one realize inside the core (forward and loss, gradients,
  // update together); its graph is the whole step. Autograd and the
  // optimizer make nodes outside any layer scope; naming them after their
  // phase (told by the node ids the trainer reports) lets the graph pane
  // box them as "backward" and "update" instead of one anonymous blob.
  std::set<uint64_t> seen;
  tl::RealizeObserver observer([&](const std::vector<tl::NodeRef>& roots) {
    for (auto& node : tl::snapshot_graph(roots))
      if (seen.insert(node.id).second) graph->graph.push_back(std::move(node));
  });
  tl::train::StepResult r = trainer_->step(batch);
  const std::string optimizerName = optimizer_->name();
  for (auto& node : graph->graph) {
    if (node.realized || node.id < r.backward_first_id) continue;
    const bool update = node.id >= r.update_first_id;
    node.scope = std::string(update ? "update." : "backward.") +
                 (node.scope.empty() ? (update ? optimizerName : "grad") : node.scope);
  }
  graph->records = r.kernels;
  return r;
}

void TrainWorker::remakeOptimizer() {
  trainer_.reset();
  optimizer_ = tl::train::make_optimizer(settings_.optimizer.toStdString(), model_->parameters(), settings_.lr,
                                         settings_.weightDecay);
  trainer_ = std::make_unique<tl::train::Trainer>(*model_, *optimizer_);
  baseLr_ = optimizer_->lr();
  applySchedule();
}

void TrainWorker::applySchedule() {
  // Past the horizon, cosine stays at its floor instead of rising again.
  const int total = std::max(1, settings_.epochs);
  if (settings_.schedule == "cosine") optimizer_->set_lr(nn::cosine_lr(baseLr_, std::min(epoch_, total), total));
  if (settings_.schedule == "step") optimizer_->set_lr(nn::step_lr(baseLr_, epoch_, std::max(1, total / 3), 0.1));
}

TrainStepPtr TrainWorker::step(RunData* graph) {
  if (!ready()) throw std::logic_error("no model: press Reset first");
  const auto started = std::chrono::steady_clock::now().time_since_epoch();
  // A cancelled step changed no weight and no optimizer moment (they are
  // assigned only once the step's realize succeeded, core/realize.h): the
  // batch it drew and the epoch it may have started go back, and its
  // optimizer, which counted the step already, is made again. So the next
  // step is the one that was cancelled, with the same batch.
  struct Position {
    int epoch, inEpoch;
    bool epochEnd;
    std::unique_ptr<data::Batches> batches;
  };
  std::optional<Position> before;
  if (cancellable()) before = Position{epoch_, stepInEpoch_, lastEpochEnd_, std::make_unique<data::Batches>(*batches_)};
  if (lastEpochEnd_) startEpoch(epoch_ + 1);
  data::Batch batch;
  if (!batches_->next(batch)) {  // an epoch of zero batches cannot happen (batch >= 1, data non-empty)
    startEpoch(epoch_ + 1);
    if (!batches_->next(batch)) throw std::runtime_error("the training set gives no batch");
  }
  std::map<std::string, tl::Tensor> parameters;
  for (auto& [name, slot] : model_->named_parameters()) parameters[name] = *slot;

  tl::train::StepResult r;
  try {
    r = runStep(batch, graph);
  } catch (const tl::Cancelled&) {
    if (before) {
      epoch_ = before->epoch, stepInEpoch_ = before->inEpoch, lastEpochEnd_ = before->epochEnd;
      batches_ = std::move(before->batches);
      remakeOptimizer();
    }
    throw;
  }
  lastParameters_ = std::move(parameters);
  ++step_;
  ++stepInEpoch_;
  lastEpochEnd_ = stepInEpoch_ >= batches_->batches_per_epoch();

  auto out = std::make_shared<TrainStep>();
  out->generation = generation_;
  out->step = step_;
  out->epoch = epoch_;
  out->epochEnd = lastEpochEnd_;
  out->loss = r.loss;
  out->accuracy = r.accuracy;
  out->seconds = r.seconds;
  out->lr = optimizer_->lr();
  out->startedUs = std::chrono::duration_cast<std::chrono::microseconds>(started).count();
  out->kernels = std::move(r.kernels);
  return out;
}

bool TrainWorker::evaluationDue() const {
  if (!ready() || step_ == 0) return false;
  return settings_.evalEvery > 0 ? step_ % settings_.evalEvery == 0 : lastEpochEnd_;
}

TrainEval TrainWorker::evaluate() {
  if (!ready()) throw std::logic_error("no model: press Reset first");
  tl::train::EvalResult r = trainer_->evaluate(data_->test);
  TrainEval e;
  e.generation = generation_;
  e.step = step_;
  e.loss = r.loss;
  e.accuracy = r.accuracy;
  e.seconds = r.seconds;
  return e;
}

HistogramsPtr TrainWorker::histograms(const QString& parameter, int bins) {
  if (!ready()) throw std::logic_error("no model: press Reset first");
  const std::string name = parameter.toStdString();
  auto out = std::make_shared<ParameterHistograms>();
  out->parameter = parameter;
  out->step = step_;
  for (auto& [key, slot] : model_->named_parameters()) {
    if (key != name) continue;
    std::vector<float> w = slot->to_vector();
    out->elements = qint64(w.size());
    out->weights = make_histogram(w, bins);
    auto it = lastParameters_.find(name);
    if (it != lastParameters_.end() && it->second.grad().defined())
      out->gradients = make_histogram(it->second.grad().to_vector(), bins);
    return out;
  }
  throw std::invalid_argument("the model has no parameter '" + name + "'");
}

void TrainWorker::save(const QString& path) {
  if (!ready()) throw std::logic_error("no model to save: press Reset first");
  model_->save(path.toStdString());
}

void TrainWorker::load(const QString& path) {
  if (!ready()) throw std::logic_error("no model to load into: press Reset first");
  model_->load(path.toStdString());
  remakeOptimizer();
  lastParameters_.clear();  // their gradients belong to the replaced weights
}

std::vector<float> TrainWorker::probe(int count) {
  if (!ready()) throw std::logic_error("no model: press Reset first");
  bool wasTraining = model_->training();
  model_->eval();
  tl::NoGrad noGrad;
  data::Batches batches(data_->test, std::max(1, count), false, 0, false, 0, settings_.device.toStdString());
  data::Batch b;
  batches.next(b);
  std::vector<float> logits = (*model_)(b.images).to_vector();
  model_->train(wasTraining);
  return logits;
}

}  // namespace tlui
