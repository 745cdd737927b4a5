// Small image-classification data sets held in host memory: OpenCV's
// digits.png and MNIST's IDX files, a seeded train/test split, and batches
// (shuffled per epoch, optionally shifted by a few pixels) as tensors.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tl::data {

// Single-channel images, row-major N x H x W floats in [0, 1].
struct Dataset {
  int64_t height = 0, width = 0;
  int classes = 10;
  std::vector<float> pixels;
  std::vector<int32_t> labels;
  int64_t size() const { return int64_t(labels.size()); }
  // One image as H x W floats.
  const float* image(int64_t i) const { return pixels.data() + i * height * width; }
};

// The sample image of OpenCV (samples/data/digits.png): 2000 x 1000 pixels,
// 50 rows of 100 digits of 20 x 20, 500 per class, class c in rows 5c..5c+4.
// Throws tl::IOError when the file is missing, not an image or not 2000x1000.
Dataset load_digits(const std::string& path);
// Where Debian's opencv-doc installs it.
std::string default_digits_path();

// MNIST's IDX format: big-endian int32 magic (2051 images, 2049 labels),
// counts and sizes, then unsigned bytes. Throws tl::IOError naming the file
// for a wrong magic, a truncated file, absurd sizes, a count mismatch between
// the two files, or labels outside 0..9.
Dataset load_idx(const std::string& images_path, const std::string& labels_path);
// A folder holding train-images-idx3-ubyte / train-labels-idx1-ubyte and
// t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte (plain, as after gunzip).
// Returns {train, test}.
std::pair<Dataset, Dataset> load_mnist_dir(const std::string& dir);

// A shuffled split, stratified: every class gives the same share of its
// samples to the test set, so a 20% split of digits has 100 of each class.
std::pair<Dataset, Dataset> split(const Dataset& all, double test_fraction, uint64_t seed);

struct Batch {
  Tensor images;  // (B, 1, H, W) float32
  Tensor labels;  // (B) int32
  std::vector<int32_t> label_values;
};

// Walks a data set in batches. With shuffle, each epoch uses a permutation
// drawn from (seed, epoch), so epoch k is the same in every run. With
// augment, each image is shifted by a random offset in [-max_shift,
// max_shift] on both axes, filling with zeros.
class Batches {
 public:
  Batches(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed = 0, bool augment = false,
          int max_shift = 2, std::string device = "");
  void start_epoch(int epoch);
  bool next(Batch& out);  // false at the end of the epoch
  int64_t batches_per_epoch() const;

 private:
  const Dataset& data_;
  int64_t batch_size_;
  bool shuffle_, augment_;
  uint64_t seed_;
  int max_shift_;
  std::string device_;
  std::vector<int64_t> order_;
  size_t pos_ = 0;
  Generator shift_gen_;
};

}  // namespace tl::data
