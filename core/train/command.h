// `tinylens-cli train`: the whole command lives here so app/cli.cpp only
// forwards its options, and the window's training page can run the same
// configuration.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/data/dataset.h"
#include "core/nn/layers.h"
#include "core/nn/optim.h"

namespace tl::train {

struct TrainConfig {
  std::string dataset = "digits";  // "digits", "digits:PATH" or "mnist:DIR"
  std::string model = "cnn";       // "cnn" or "mlp"
  int epochs = 5;
  int64_t batch = 32;
  double lr = -1;                  // < 0: the optimizer's default (sgd 0.05, adam/adamw 0.002)
  std::string optimizer = "adam";  // "sgd" (momentum 0.9, Nesterov), "adam", "adamw"
  double weight_decay = 0;
  std::string schedule = "cosine";  // "none", "cosine", "step" (x0.1 every third of the epochs)
  int augment = 1;                 // max shift in pixels; 0 = none
  uint64_t seed = 0;
  std::string device;              // "" = the default device
  std::string out;                 // safetensors path; empty = tinylens-MODEL-DATASET.safetensors here
  bool save = true;                // --no-save: keep nothing
  bool profile = false;            // print the kernels that dominated the last epoch
};

// The model and the optimizer the command builds, shared with the window's
// Training page so both train the same thing. `model` is "cnn" or "mlp";
// `optimizer` is "sgd" (momentum 0.9, Nesterov), "adam" or "adamw"; lr < 0
// picks the default (sgd 0.05, adam/adamw 0.002). Unknown names throw
// std::invalid_argument.
std::shared_ptr<nn::Sequential> make_model(const std::string& model, const data::Dataset& data, Generator& gen,
                                           const std::string& device);
std::unique_ptr<nn::Optimizer> make_optimizer(const std::string& optimizer, std::vector<Tensor*> params, double lr,
                                              double weight_decay);

// The command's options, for its --help and for the check of unknown ones.
struct TrainOption {
  const char* name;   // without the leading dashes
  const char* value;  // what its value looks like; nullptr for a flag
  const char* help;   // what it does, with its default
};
const std::vector<TrainOption>& train_options();

// Reads the options of train_options() (a flag's value is ignored); throws
// std::invalid_argument naming an unknown option or a bad value.
TrainConfig parse_train_options(const std::map<std::string, std::string>& options);

// Trains, printing one line per epoch (and the profile summary) to `out`;
// returns the process exit status.
int run_training(const TrainConfig& config, std::FILE* out);

}  // namespace tl::train
