// An ImageClassifier around an ONNX graph with one (N, 3, H, W) float input
// and one (N, classes) output.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/models/classifier.h"

namespace tl {

// A readable ONNX graph that is not shaped like an image classifier (inputs,
// outputs): the file itself is fine, it just cannot classify images.
struct NotAClassifier : IOError {
  using IOError::IOError;
};

// `imagenet_labels` is asked for the 1000 ImageNet names when the model has
// 1000 classes; other models get "class N". Throws IOError naming the file
// when the graph is not shaped like an image classifier.
std::unique_ptr<ImageClassifier> make_onnx_classifier(
    const std::string& path, const std::function<std::vector<std::string>()>& imagenet_labels);
// The same around a model already open (open_onnx), which it shares.
class OnnxModel;
std::unique_ptr<ImageClassifier> make_onnx_classifier(
    std::shared_ptr<const OnnxModel> model, const std::function<std::vector<std::string>()>& imagenet_labels);

}  // namespace tl
