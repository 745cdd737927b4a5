// `tinylens-cli train`: its options, their parsing, and the loop that prints
// one line per epoch. What a program embedding tinylens would call (the
// models, the optimizers by name, the Trainer) lives in core/train; the
// window's Training page builds the same configuration from there.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace tlcli {

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
  std::string trace;               // write the last epoch's trace (core/trace.h) here; empty = none
};

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

}  // namespace tlcli
