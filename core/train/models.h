// The two models `tinylens-cli train` and the window's Training page offer,
// as torch.nn.Sequential-shaped stacks so their state dicts load into the
// same PyTorch definitions (scripts/reference_training.py builds them with
// identical keys), and the optimizers they train with, chosen by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/nn/layers.h"
#include "core/nn/optim.h"

namespace tl::train {

// Four blocks of (3x3 conv pad 1, batch norm, relu) with 32, 32, 64, 64
// channels, a 2x2 max-pool after the second and the fourth, flatten, linear
// -> classes. For 20x20 input the linear layer sees 64*5*5.
std::shared_ptr<nn::Sequential> make_cnn(int64_t height, int64_t width, int classes, Generator& gen,
                                         const std::string& device = "");
// flatten, linear H*W -> hidden, relu, linear -> classes.
std::shared_ptr<nn::Sequential> make_mlp(int64_t height, int64_t width, int classes, Generator& gen,
                                         int64_t hidden = 128, const std::string& device = "");

// `model` is "cnn" or "mlp", sized for `data`'s images and classes. Unknown
// names throw std::invalid_argument.
std::shared_ptr<nn::Sequential> make_model(const std::string& model, const data::Dataset& data, Generator& gen,
                                           const std::string& device);
// `optimizer` is "sgd" (momentum 0.9, Nesterov), "adam" or "adamw"; lr < 0
// picks the default (sgd 0.05, adam/adamw 0.002). Unknown names throw
// std::invalid_argument.
std::unique_ptr<nn::Optimizer> make_optimizer(const std::string& optimizer, std::vector<Tensor*> params, double lr,
                                              double weight_decay);

}  // namespace tl::train
