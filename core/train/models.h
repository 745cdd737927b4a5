// The two models `tinylens-cli train` offers, as torch.nn.Sequential-shaped
// stacks so their state dicts load into the same PyTorch definitions
// (scripts/reference_training.py builds them with identical keys).
#pragma once
#include <memory>

#include "core/nn/layers.h"

namespace tl::train {

// conv 1->16 3x3 pad 1, relu, maxpool 2, conv 16->32 3x3, relu, maxpool 2,
// flatten, linear -> classes. For 20x20 input the linear layer sees 32*4*4.
std::shared_ptr<nn::Sequential> make_cnn(int64_t height, int64_t width, int classes, Generator& gen,
                                         const std::string& device = "");
// flatten, linear H*W -> hidden, relu, linear -> classes.
std::shared_ptr<nn::Sequential> make_mlp(int64_t height, int64_t width, int classes, Generator& gen,
                                         int64_t hidden = 128, const std::string& device = "");

}  // namespace tl::train
