#include "core/models/onnx_classifier.h"

#include "core/error.h"

#ifdef TL_HAVE_ONNX
#include <algorithm>
#include <filesystem>

#include "core/io/limits.h"
#include "core/io/onnx.h"
#include "core/models/efficientnet.h"
#endif

namespace tl {

#ifdef TL_HAVE_ONNX
namespace {

class OnnxClassifier final : public ImageClassifier {
 public:
  // True when every dimension after the first two is 1 (or dynamic).
  static bool trailing_units(const Shape& shape) {
    for (size_t i = 2; i < shape.size(); ++i)
      if (shape[i] != 1 && shape[i] != -1) return false;
    return true;
  }

  OnnxClassifier(std::shared_ptr<const OnnxModel> model, const std::function<std::vector<std::string>()>& imagenet_labels)
      : model_(std::move(model)) {
    const std::string& path = model_->path();
    const auto& ins = model_->inputs();
    const auto& outs = model_->outputs();
    if (ins.size() != 1 || ins[0].shape.size() != 4 || ins[0].dtype != "float" || (ins[0].shape[1] != 3 && ins[0].shape[1] != -1))
      throw NotAClassifier(path + " is not an image classifier: it needs one float input (N, 3, H, W), the graph has " +
                    describe(ins));
    // (N, classes), or (N, classes, 1, 1) as convolutional heads (SqueezeNet,
    // DenseNet) leave it: trailing unit dimensions are dropped.
    if (outs.size() != 1 || outs[0].shape.size() < 2 || !trailing_units(outs[0].shape))
      throw NotAClassifier(path + " is not an image classifier: it needs one (N, classes) output, the graph has " +
                    describe(outs));
    height_ = ins[0].shape[2] > 0 ? ins[0].shape[2] : 224;
    width_ = ins[0].shape[3] > 0 ? ins[0].shape[3] : 224;
    classes_ = outs[0].shape[1];
    // Declared sizes are the file's word: what they make us build (the
    // image input, one label per class) is held to the file's load budget.
    std::error_code ec;
    const uint64_t file_bytes = std::filesystem::file_size(path, ec);
    if (height_ > kMaxSide || width_ > kMaxSide)
      throw IOError(path + " declares an input of " + std::to_string(height_) + "x" + std::to_string(width_) +
                    " pixels; at most " + std::to_string(kMaxSide) + " a side is supported");
    io::check_load_budget(uint64_t(height_) * uint64_t(width_) * 3 * sizeof(float), ec ? 0 : file_bytes,
                          "the declared input image of " + path);
    if (classes_ < 1) throw IOError(path + " declares an output of " + std::to_string(classes_) + " classes");
    io::check_load_budget(io::checked_mul(uint64_t(classes_), kLabelBytes, path), ec ? 0 : file_bytes,
                          "the labels of the " + std::to_string(classes_) + " classes " + path + " declares");
    if (classes_ == 1000) labels_ = imagenet_labels();
    else
      for (int64_t i = 0; i < std::max<int64_t>(classes_, 0); ++i) labels_.push_back("class " + std::to_string(i));
    // ONNX files do not say how their inputs were normalised; EfficientNet-Lite
    // exports use TensorFlow's (x - 127) / 128, everything else ImageNet's.
    std::string file = std::filesystem::path(path).filename().string();
    std::transform(file.begin(), file.end(), file.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    tf_norm_ = file.find("efficientnet-lite") != std::string::npos || file.find("efficientnet_lite") != std::string::npos;
  }

  ModelSummary summary() const override {
    ModelSummary s;
    s.name = std::filesystem::path(model_->path()).stem().string() + " (ONNX)";
    s.source = model_->path();
    s.layers = model_->nodes();
    s.parameters = model_->parameters();
    s.input_shape = {1, 3, height_, width_};
    s.notes = {"ONNX opset " + std::to_string(model_->opset()) + ", " + std::to_string(model_->nodes()) + " nodes",
               tf_norm_ ? "input: (pixel - 127) / 128 (EfficientNet-Lite)" : "input: ImageNet mean/std",
               "input: short side resized to " + std::to_string(resize()) + ", centre crop " + std::to_string(height_)};
    if (classes_ != 1000) s.notes.push_back(std::to_string(classes_) + " classes, named \"class N\"");
    return s;
  }

  Tensor preprocess(const Image& image, const std::string& device) const override {
    static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f}, imagenet_std[3] = {0.229f, 0.224f, 0.225f};
    const float tf_mean[3] = {EfficientNetLite0::kMean, EfficientNetLite0::kMean, EfficientNetLite0::kMean};
    const float tf_std[3] = {EfficientNetLite0::kStd, EfficientNetLite0::kStd, EfficientNetLite0::kStd};
    if (height_ != width_) throw IOError(model_->path() + ": non-square inputs are not supported by the preprocessing");
    return Tensor::from_data(preprocess_imagenet(image, resize(), int(height_), tf_norm_ ? tf_mean : imagenet_mean,
                                                 tf_norm_ ? tf_std : imagenet_std),
                             {1, 3, height_, width_}, device);
  }

  Tensor forward(const Tensor& input) override {
    // The declared output shape is the file's word; what the graph computes decides.
    Tensor y = model_->run({input}).at(0);
    if (y.ndim() > 2 && trailing_units(y.shape())) y = y.reshape({y.dim(0), y.dim(1)});
    if (y.ndim() != 2 || y.dim(0) != input.dim(0) || y.dim(1) != classes_)
      throw ShapeError(model_->path() + " declares logits (N, " + std::to_string(classes_) + ") but its graph computes " +
                       shape_str(y.shape()) + " for an input of " + shape_str(input.shape()));
    return y;
  }
  const std::vector<std::string>& labels() const override { return labels_; }

 private:
  static std::string describe(const std::vector<OnnxValueInfo>& vs) {
    std::string s;
    for (const auto& v : vs) s += (s.empty() ? "" : ", ") + v.name + " " + v.dtype + " " + shape_str(v.shape);
    return s.empty() ? "none" : s;
  }
  int resize() const { return int(double(height_) / 0.875 + 0.5); }  // the usual 0.875 centre-crop fraction

  static constexpr int64_t kMaxSide = 16384;      // pixels a side of the declared input
  static constexpr uint64_t kLabelBytes = 32;     // what one "class N" label costs, roughly

  std::shared_ptr<const OnnxModel> model_;
  int64_t height_ = 224, width_ = 224, classes_ = 0;
  bool tf_norm_ = false;
  std::vector<std::string> labels_;
};

}  // namespace

std::unique_ptr<ImageClassifier> make_onnx_classifier(
    const std::string& path, const std::function<std::vector<std::string>()>& imagenet_labels) {
  return make_onnx_classifier(std::make_shared<OnnxModel>(path), imagenet_labels);
}

std::unique_ptr<ImageClassifier> make_onnx_classifier(
    std::shared_ptr<const OnnxModel> model, const std::function<std::vector<std::string>()>& imagenet_labels) {
  return std::make_unique<OnnxClassifier>(std::move(model), imagenet_labels);
}
#else
std::unique_ptr<ImageClassifier> make_onnx_classifier(const std::string& path,
                                                      const std::function<std::vector<std::string>()>&) {
  throw IOError("cannot open " + path + ": this build has no ONNX support (libonnx-dev / protobuf were missing)");
}
#endif

}  // namespace tl
