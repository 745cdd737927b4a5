#include "core/train/models.h"

#include "core/error.h"

namespace tl::train {

std::shared_ptr<nn::Sequential> make_cnn(int64_t height, int64_t width, int classes, Generator& gen,
                                         const std::string& device) {
  // spatial size after: pad-1 conv (same), pool 2, 3x3 conv (-2), pool 2
  int64_t h = (height / 2 - 2) / 2, w = (width / 2 - 2) / 2;
  if (h < 1 || w < 1)
    throw ShapeError("make_cnn: images of " + std::to_string(height) + "x" + std::to_string(width) +
                     " are too small (needs at least 6x6)");
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Conv2d>(1, 16, 3, gen, 1, 1, true, device));
  m->emplace<nn::ReLU>();
  m->emplace<nn::MaxPool2d>(2);
  m->add(std::make_shared<nn::Conv2d>(16, 32, 3, gen, 1, 0, true, device));
  m->emplace<nn::ReLU>();
  m->emplace<nn::MaxPool2d>(2);
  m->emplace<nn::Flatten>();
  m->add(std::make_shared<nn::Linear>(32 * h * w, classes, gen, true, device));
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

}  // namespace tl::train
