// `tinylens-cli train`: the whole command lives here so app/cli.cpp only
// forwards its options, and the window's training page can run the same
// configuration.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

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

// Reads --dataset --model --epochs --batch --lr --optimizer --weight-decay
// --schedule --augment --seed --device --out --no-save --profile; throws
// std::invalid_argument naming an unknown option or a bad value.
TrainConfig parse_train_options(const std::map<std::string, std::string>& options);

// Trains, printing one line per epoch (and the profile summary) to `out`;
// returns the process exit status.
int run_training(const TrainConfig& config, std::FILE* out);

extern const char* kTrainUsage;

}  // namespace tl::train
