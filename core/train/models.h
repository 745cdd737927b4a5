// The two models `tinylens-cli train` offers, as torch.nn.Sequential-shaped
// stacks so their state dicts load into the same PyTorch definitions
// (scripts/reference_training.py builds them with identical keys).
#pragma once
#include <memory>

#include "core/nn/layers.h"

namespace tl::train {

// Four blocks of (3x3 conv pad 1, batch norm, relu) with 32, 32, 64, 64
// channels, a 2x2 max-pool after the second and the fourth, flatten, linear
// -> classes. For 20x20 input the linear layer sees 64*5*5.
std::shared_ptr<nn::Sequential> make_cnn(int64_t height, int64_t width, int classes, Generator& gen,
                                         const std::string& device = "");
// flatten, linear H*W -> hidden, relu, linear -> classes.
std::shared_ptr<nn::Sequential> make_mlp(int64_t height, int64_t width, int classes, Generator& gen,
                                         int64_t hidden = 128, const std::string& device = "");

}  // namespace tl::train
