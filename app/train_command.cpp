#include "app/train_command.h"

#include "app/cli_common.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/data/dataset.h"
#include "core/train/models.h"
#include "core/train/trainer.h"
#include "core/trace.h"

using namespace tl;
using namespace tl::train;

namespace tlcli {

const std::vector<TrainOption>& train_options() {
  static const std::vector<TrainOption> options = {
      {"dataset", "digits|digits:PNG|mnist:DIR",
       "the images to learn (default digits: the 5000 OpenCV digits, 80/20 split)"},
      {"model", "cnn|mlp", "the network (default cnn)"},
      {"epochs", "N", "passes over the training set (default 5)"},
      {"batch", "B", "images per step (default 32)"},
      {"lr", "LR", "learning rate (default 0.002 for adam and adamw, 0.05 for sgd)"},
      {"optimizer", "sgd|adam|adamw", "the update rule (default adam; sgd has Nesterov momentum 0.9)"},
      {"weight-decay", "WD", "weight decay (default 0)"},
      {"schedule", "none|cosine|step", "learning-rate schedule per epoch (default cosine; step: x0.1 every third)"},
      {"augment", "PX", "random shift of each training image, in pixels (default 1; 0: none)"},
      {"seed", "S", "seed of the weights, the split and the shuffling (default 0)"},
      {"device", "NAME", "the device to train on (default cpu)"},
      {"out", "FILE", "where to save the model (default tinylens-MODEL-DATASET.safetensors here)"},
      {"no-save", nullptr, "save nothing"},
      {"profile", nullptr, "print the kernels that took the most time in the last epoch"},
      {"trace", "FILE", "write the last epoch as a Trace Event Format JSON (ui.perfetto.dev, chrome://tracing)"},
  };
  return options;
}

namespace {
double to_double(const std::string& key, const std::string& v) {
  try {
    size_t used = 0;
    double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("train: --" + key + " expects a number, got '" + v + "'");
}
int64_t to_int(const std::string& key, const std::string& v, int64_t low) {
  double d = to_double(key, v);
  if (d != double(int64_t(d)) || d < double(low))
    throw std::invalid_argument("train: --" + key + " expects an integer >= " + std::to_string(low) + ", got '" + v +
                                "'");
  return int64_t(d);
}
}  // namespace

TrainConfig parse_train_options(const std::map<std::string, std::string>& options) {
  TrainConfig c;
  for (auto& [k, v] : options) {
    auto& known = train_options();
    const std::string& key = k;  // clang 14 cannot capture a structured binding
    if (std::none_of(known.begin(), known.end(), [&](const TrainOption& o) { return key == o.name; }))
      throw std::invalid_argument("train: unknown option --" + k);
    if (k == "dataset") c.dataset = v;
    else if (k == "model") c.model = v;
    else if (k == "epochs") c.epochs = int(to_int(k, v, 1));
    else if (k == "batch") c.batch = to_int(k, v, 1);
    else if (k == "lr") c.lr = to_double(k, v);
    else if (k == "optimizer") c.optimizer = v;
    else if (k == "weight-decay") c.weight_decay = to_double(k, v);
    else if (k == "schedule") c.schedule = v;
    else if (k == "augment") c.augment = int(to_int(k, v, 0));
    else if (k == "seed") c.seed = uint64_t(to_int(k, v, 0));
    else if (k == "device") c.device = v == "all" ? "" : v;
    else if (k == "out") c.out = v;
    else if (k == "profile") c.profile = true;
    else if (k == "trace") c.trace = v;
    else if (k == "no-save") c.save = false;
  }
  if (c.model != "cnn" && c.model != "mlp")
    throw std::invalid_argument("train: --model must be cnn or mlp, got '" + c.model + "'");
  if (c.optimizer != "sgd" && c.optimizer != "adam" && c.optimizer != "adamw")
    throw std::invalid_argument("train: --optimizer must be sgd, adam or adamw, got '" + c.optimizer + "'");
  if (c.schedule != "none" && c.schedule != "cosine" && c.schedule != "step")
    throw std::invalid_argument("train: --schedule must be none, cosine or step, got '" + c.schedule + "'");
  if (c.dataset != "digits" && c.dataset.rfind("digits:", 0) != 0 && c.dataset.rfind("mnist:", 0) != 0)
    throw std::invalid_argument("train: --dataset must be digits, digits:PNG or mnist:DIR, got '" + c.dataset + "'");
  return c;
}

int run_training(const TrainConfig& c, std::FILE* out) {
  if (!c.trace.empty()) check_writable(c.trace, "the trace");  // before the training, not after it
  data::Dataset train_set, test_set;
  if (c.dataset.rfind("mnist:", 0) == 0) {
    std::tie(train_set, test_set) = data::load_mnist_dir(c.dataset.substr(6));
  } else {
    std::string path = c.dataset == "digits" ? data::default_digits_path() : c.dataset.substr(7);
    std::tie(train_set, test_set) = data::split(data::load_digits(path), 0.2, c.seed);
  }
  Generator gen(c.seed);
  auto model = make_model(c.model, train_set, gen, c.device);
  auto opt = make_optimizer(c.optimizer, model->parameters(), c.lr, c.weight_decay);
  double base_lr = opt->lr();
  std::fprintf(out, "training %s on %s (%lld train / %lld test images of %lldx%lld) with %s, lr %g, batch %lld, "
               "device %s, seed %llu\n%s",
               c.model.c_str(), c.dataset.c_str(), (long long)train_set.size(), (long long)test_set.size(),
               (long long)train_set.height, (long long)train_set.width, opt->name().c_str(), base_lr,
               (long long)c.batch, c.device.empty() ? default_device().c_str() : c.device.c_str(),
               (unsigned long long)c.seed, nn::describe(*model).c_str());
  data::Batches batches(train_set, c.batch, true, c.seed, c.augment > 0, c.augment, c.device);
  Trainer trainer(*model, *opt);
  trainer.time_kernels(c.profile);  // timing events cost a GPU step host time
  std::fprintf(out, "%5s %10s %10s %10s %10s %9s %9s %9s\n", "epoch", "lr", "train loss", "train acc", "test acc",
               "train s", "eval s", "kernels");
  std::map<std::string, std::pair<double, int64_t>> by_kernel;  // last epoch: name -> (seconds, launches)
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    if (c.schedule == "cosine") opt->set_lr(nn::cosine_lr(base_lr, epoch, c.epochs));
    if (c.schedule == "step") opt->set_lr(nn::step_lr(base_lr, epoch, std::max(1, c.epochs / 3), 0.1));
    by_kernel.clear();
    auto on_step = [&](const StepResult& s) {
      if (!c.profile) return;
      for (auto& k : s.kernels) {
        auto& slot = by_kernel[k.kernel->name];
        slot.first += k.seconds;
        slot.second += 1;
      }
    };
    std::optional<TraceCapture> trace;
    if (!c.trace.empty() && epoch + 1 == c.epochs) trace.emplace();
    std::optional<TraceScope> span;
    if (trace) span.emplace("epoch " + std::to_string(epoch + 1));
    EpochResult e = trainer.train_epoch(batches, epoch, &test_set, on_step);
    span.reset();
    std::fprintf(out, "%5d %10.2e %10.4f %9.2f%% %9.2f%% %9.2f %9.2f %9lld\n", epoch + 1, e.lr, e.train_loss,
                 100 * e.train_accuracy, 100 * e.test_accuracy, e.seconds, e.eval_seconds,
                 (long long)e.kernel_launches);
    if (trace) {
      TraceDocument doc = trace_document(*trace);
      doc.about = {{"command", "train"}, {"model", c.model}, {"dataset", c.dataset}, {"epoch", std::to_string(epoch + 1)}};
      write_trace(c.trace, doc);
      std::fprintf(out, "wrote the trace of epoch %d (%zu kernels) to %s\n", epoch + 1, doc.kernels.size(),
                   c.trace.c_str());
    }
    std::fflush(out);
  }
  if (c.profile) {
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(by_kernel.begin(), by_kernel.end());
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (auto& r : rows) total += r.second.first;
    std::fprintf(out, "kernels of the last epoch by device time (%.3f s in all):\n", total);
    for (size_t i = 0; i < rows.size() && i < 15; ++i)
      std::fprintf(out, "  %-40s %7lld launches %9.3f s %5.1f%%\n", rows[i].first.c_str(),
                   (long long)rows[i].second.second, rows[i].second.first, 100 * rows[i].second.first / total);
  }
  if (c.save) {
    const std::string kind = c.dataset.rfind("mnist", 0) == 0 ? "mnist" : "digits";
    const std::string path = c.out.empty() ? "tinylens-" + c.model + "-" + kind + ".safetensors" : c.out;
    model->save(path);
    std::fprintf(out, "saved %s\n", path.c_str());
  }
  return 0;
}

}  // namespace tlcli
