// Image classifiers the explorer and the CLI run: a built-in EfficientNet-Lite0
// with its ImageNet weights, or a checkpoint / ONNX file the user opens.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/io/image.h"
#include "core/jit.h"
#include "core/profile.h"
#include "core/tensor.h"

namespace tl {

struct ModelSummary {
  std::string name;            // "EfficientNet-Lite0"
  std::string source;          // file it was loaded from
  int64_t layers = 0;          // convolutions + linear layers
  int64_t parameters = 0;
  double flops = 0;            // per image
  Shape input_shape;           // (1, 3, 224, 224)
  std::vector<std::string> notes;
};

struct Prediction {
  int index = 0;
  std::string label;
  float probability = 0;
};

struct ClassifyResult {
  std::vector<Prediction> top;          // best first
  std::vector<float> logits;
  double cold_seconds = 0;              // first run on this device, compilation included
  double warm_seconds = 0;              // median of the warm runs
  std::vector<ProfileRecord> records;   // kernels of one warm run
  std::string device;
};

class ImageClassifier {
 public:
  virtual ~ImageClassifier() = default;
  virtual ModelSummary summary() const = 0;
  // Image -> normalised (1, 3, H, W) input on `device`.
  virtual Tensor preprocess(const Image& image, const std::string& device) const = 0;
  // (N, 3, H, W) -> logits (N, classes); weights move to the input's device on demand.
  virtual Tensor forward(const Tensor& input) = 0;
  virtual const std::vector<std::string>& labels() const = 0;
  // forward(input), realized, through a Jit (core/jit.h): once an input of
  // this shape has run on this device, later ones replay its kernels without
  // building the graph again.
  Tensor infer(const Tensor& input);
  bool jit_captured() const { return jit_ && jit_->captured(); }

 private:
  std::unique_ptr<Jit> jit_;
};

// "efficientnet-lite0" (built in, weights found in the models directory) or a
// path to a .pth / .safetensors checkpoint of EfficientNet-Lite0 (or an .onnx
// file once ONNX support exists). Throws IOError naming what is wrong.
std::unique_ptr<ImageClassifier> load_classifier(const std::string& name_or_path);
// The classifier around an ONNX model already open (open_onnx), which it shares.
class OnnxModel;
std::unique_ptr<ImageClassifier> load_classifier(std::shared_ptr<const OnnxModel> onnx_model);

// Runs the classifier: one cold run, then `warm_runs` timed runs.
ClassifyResult classify(ImageClassifier& model, const Image& image, const std::string& device, int top_k = 5,
                        int warm_runs = 3);

// Where models and labels live: $TINYLENS_MODELS, else resources/models next
// to the source tree or the installed program, else $XDG_DATA_HOME/tinylens/models.
std::string models_directory();

}  // namespace tl
