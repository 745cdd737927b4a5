#include "core/models/classifier.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "core/models/efficientnet.h"
#include "core/models/onnx_classifier.h"
#include "core/runtime/registry.h"
#include "core/settings.h"
#include "core/trace.h"
#ifdef TL_HAVE_PTH
#include "core/io/pth.h"
#endif
#ifdef TL_HAVE_SAFETENSORS
#include "core/io/safetensors.h"
#endif

namespace tl {

namespace fs = std::filesystem;

namespace {

const char* kBuiltinName = "efficientnet-lite0";
const char* kBuiltinFile = "efficientnet-lite0-57934424.pth";
const char* kLabelsFile = "imagenet_classes.txt";
const char* kSetupHint = "run scripts/setup to download it, or point $TINYLENS_MODELS at a folder that has it";

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

std::vector<std::string> read_labels(const std::string& path, size_t expected) {
  std::ifstream in(path);
  if (!in) throw IOError("ImageNet labels not found at " + path + ": " + kSetupHint);
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) labels.push_back(line);
  }
  if (labels.size() != expected)
    throw IOError("labels file " + path + " has " + std::to_string(labels.size()) + " names, the model has " +
                  std::to_string(expected) + " classes");
  return labels;
}

StateDict load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw IOError("checkpoint " + path + " does not exist or is not a file");
  const std::string ext = lower_extension(path);
  if (ext == ".safetensors") {
#ifdef TL_HAVE_SAFETENSORS
    return load_safetensors(path);
#else
    throw IOError("cannot open " + path + ": this build has no safetensors support (nlohmann-json was missing)");
#endif
  }
  if (ext == ".pth" || ext == ".pt" || ext == ".bin" || ext == ".ckpt") {
#ifdef TL_HAVE_PTH
    return load_pth(path);
#else
    throw IOError("cannot open " + path + ": this build has no .pth support (libzip was missing)");
#endif
  }
  throw IOError("cannot open " + path + ": unknown model format '" + ext +
                "' (expected .pth, .safetensors, .onnx or the name efficientnet-lite0)");
}

class EfficientNetClassifier final : public ImageClassifier {
 public:
  EfficientNetClassifier(const StateDict& state, std::string source) : net_(state), source_(std::move(source)) {}
  void set_labels(std::vector<std::string> labels) { labels_ = std::move(labels); }

  ModelSummary summary() const override {
    ModelSummary s;
    s.name = "EfficientNet-Lite0";
    s.source = source_;
    s.layers = net_.layers();
    s.parameters = net_.parameters();
    s.flops = net_.flops();
    s.input_shape = {1, 3, EfficientNetLite0::kCrop, EfficientNetLite0::kCrop};
    s.notes = {"batch norms folded into the convolutions at load time",
               "TensorFlow SAME padding (asymmetric on stride-2 convolutions)",
               "input: short side resized to 256, centre crop 224, (pixel - 127) / 128"};
    return s;
  }

  Tensor preprocess(const Image& image, const std::string& device) const override {
    const float mean[3] = {EfficientNetLite0::kMean, EfficientNetLite0::kMean, EfficientNetLite0::kMean};
    const float std[3] = {EfficientNetLite0::kStd, EfficientNetLite0::kStd, EfficientNetLite0::kStd};
    const int crop = EfficientNetLite0::kCrop;
    return Tensor::from_data(preprocess_imagenet(image, EfficientNetLite0::kResize, crop, mean, std),
                             {1, 3, crop, crop}, device);
  }

  Tensor forward(const Tensor& input) override { return net_.forward(input); }
  const std::vector<std::string>& labels() const override { return labels_; }

 private:
  EfficientNetLite0 net_;
  std::string source_;
  std::vector<std::string> labels_;
};

std::vector<std::string> imagenet_labels() {
  return read_labels((fs::path(models_directory()) / kLabelsFile).string(), EfficientNetLite0::kClasses);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string models_directory() {
  std::vector<fs::path> candidates;
  if (const char* env = setting_value("TINYLENS_MODELS"); env && *env) candidates.emplace_back(env);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // Build folders live inside the source tree (build-x/ or build-x/tests/);
    // an installed program has share/tinylens/models beside bin/.
    const fs::path dir = exe.parent_path();
    candidates.push_back(dir / ".." / "resources" / "models");
    candidates.push_back(dir / ".." / ".." / "resources" / "models");
    candidates.push_back(dir / ".." / "share" / "tinylens" / "models");
  }
  fs::path user;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) user = fs::path(xdg) / "tinylens" / "models";
  else if (const char* home = std::getenv("HOME"); home && *home) user = fs::path(home) / ".local" / "share" / "tinylens" / "models";
  if (!user.empty()) candidates.push_back(user);
  for (const auto& c : candidates)
    if (fs::is_directory(c, ec)) return fs::weakly_canonical(c, ec).string();
  // Nothing exists yet: name the place a user would put the files.
  return user.empty() ? std::string("resources/models") : user.string();
}

std::unique_ptr<ImageClassifier> load_classifier(std::shared_ptr<const OnnxModel> onnx_model) {
  return make_onnx_classifier(std::move(onnx_model), imagenet_labels);
}

std::unique_ptr<ImageClassifier> load_classifier(const std::string& name_or_path) {
  std::string path = name_or_path;
  const bool builtin = name_or_path == kBuiltinName;
  if (builtin) {
    path = (fs::path(models_directory()) / kBuiltinFile).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw IOError("EfficientNet-Lite0 weights not found at " + path + ": " + kSetupHint);
  }
  if (!builtin && lower_extension(path) == ".onnx") {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw IOError("ONNX model " + path + " does not exist or is not a file");
    return make_onnx_classifier(path, imagenet_labels);
  }
  StateDict state = load_checkpoint(path);
  // The network first: a wrong checkpoint is the likelier error, and its
  // message lists every bad key.
  std::unique_ptr<EfficientNetClassifier> model;
  try {
    model = std::make_unique<EfficientNetClassifier>(state, path);
  } catch (const IOError& e) {
    throw IOError(path + " is not an EfficientNet-Lite0 checkpoint: " + e.what());
  }
  model->set_labels(read_labels((fs::path(models_directory()) / kLabelsFile).string(), EfficientNetLite0::kClasses));
  return model;
}

Tensor ImageClassifier::infer(const Tensor& input) {
  if (!jit_) jit_ = std::make_unique<Jit>([this](const Tensor& x) { return forward(x); });
  return (*jit_)(input);
}

ClassifyResult classify(ImageClassifier& model, const Image& image, const std::string& device, int top_k,
                        int warm_runs) {
  const std::string dev = device.empty() ? default_device() : device;
  Registry::instance().get_available(dev);  // unknown or unusable devices fail before any work
  ClassifyResult result;
  result.device = dev;

  Tensor input = model.preprocess(image, dev);
  input.realize();

  std::vector<float> logits;
  std::vector<ProfileRecord> cold_records;
  {
    ProfileCapture capture;
    TraceScope span("cold run");
    auto t0 = std::chrono::steady_clock::now();
    logits = model.infer(input).to_vector();
    result.cold_seconds = seconds_since(t0);
    cold_records = capture.records();
  }
  std::vector<double> warm;
  for (int r = 0; r < warm_runs; ++r) {
    ProfileCapture capture;
    TraceScope span("warm run");
    auto t0 = std::chrono::steady_clock::now();
    logits = model.infer(input).to_vector();
    warm.push_back(seconds_since(t0));
    result.records = capture.records();
  }
  if (warm.empty()) {
    result.warm_seconds = result.cold_seconds;
    result.records = std::move(cold_records);
  } else {
    std::sort(warm.begin(), warm.end());
    const size_t n = warm.size();
    result.warm_seconds = n % 2 ? warm[n / 2] : 0.5 * (warm[n / 2 - 1] + warm[n / 2]);
  }

  // A logit of NaN or infinity (weights of 1e300 or NaN, an input scaled to
  // nothing) gives no ranking and "nan%" probabilities: say so instead.
  if (auto bad = std::find_if(logits.begin(), logits.end(), [](float v) { return !std::isfinite(v); });
      bad != logits.end())
    throw IOError(model.summary().name + " computed " +
                  std::to_string(std::count_if(logits.begin(), logits.end(), [](float v) { return !std::isfinite(v); })) +
                  " non-finite logits of " + std::to_string(logits.size()) + " (class " +
                  std::to_string(bad - logits.begin()) + " is " + std::to_string(*bad) +
                  "): its weights or its arithmetic overflow float32, so it predicts nothing");
  // Softmax of the first image, in double so that tiny probabilities survive.
  const auto& labels = model.labels();
  const size_t classes = labels.empty() ? logits.size() : std::min(logits.size(), labels.size());
  result.logits.assign(logits.begin(), logits.begin() + std::ptrdiff_t(classes));
  double peak = -INFINITY;
  for (float v : result.logits) peak = std::max(peak, double(v));
  double total = 0;
  for (float v : result.logits) total += std::exp(double(v) - peak);
  std::vector<int> order(classes);
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min(classes, size_t(std::max(top_k, 0)));
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                    [&](int a, int b) { return result.logits[a] > result.logits[b]; });
  for (size_t i = 0; i < k; ++i) {
    Prediction p;
    p.index = order[i];
    p.label = labels.empty() ? "class " + std::to_string(p.index) : labels[size_t(p.index)];
    p.probability = float(std::exp(double(result.logits[size_t(p.index)]) - peak) / total);
    result.top.push_back(std::move(p));
  }
  return result;
}

}  // namespace tl
