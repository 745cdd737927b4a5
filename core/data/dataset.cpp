#include "core/data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/io/image.h"

namespace tl::data {

std::string default_digits_path() { return "/usr/share/doc/opencv-doc/examples/data/digits.png"; }

Dataset load_digits(const std::string& path) {
  Image img = load_image(path);
  constexpr int kSide = 20, kCols = 100, kRows = 50, kRowsPerClass = 5;
  if (img.width != kSide * kCols || img.height != kSide * kRows)
    throw IOError(path + ": expected OpenCV's digits image of 2000x1000 pixels, got " + std::to_string(img.width) +
                  "x" + std::to_string(img.height));
  Dataset d;
  d.height = d.width = kSide;
  d.pixels.resize(size_t(kRows * kCols * kSide * kSide));
  d.labels.resize(size_t(kRows * kCols));
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      int64_t i = int64_t(r) * kCols + c;
      d.labels[size_t(i)] = r / kRowsPerClass;
      float* dst = d.pixels.data() + i * kSide * kSide;
      for (int y = 0; y < kSide; ++y)
        for (int x = 0; x < kSide; ++x) {
          size_t src = (size_t(r * kSide + y) * size_t(img.width) + size_t(c * kSide + x)) * 3;
          dst[y * kSide + x] = img.rgb[src];  // grey: every channel holds the same value
        }
    }
  return d;
}

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IOError(path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return bytes;
}

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | uint32_t(b[at + 3]);
}

// Checks magic and size; returns the header's dimensions.
std::vector<uint32_t> idx_header(const std::vector<uint8_t>& b, const std::string& path, uint32_t magic, int dims,
                                 const char* what) {
  size_t header = 4 + 4 * size_t(dims);
  if (b.size() < 4) throw IOError(path + ": truncated IDX file (" + std::to_string(b.size()) + " bytes, no magic)");
  uint32_t m = be32(b, 0);
  if (m != magic)
    throw IOError(path + ": wrong IDX magic " + std::to_string(m) + " (expected " + std::to_string(magic) + " for " +
                  what + ")");
  if (b.size() < header)
    throw IOError(path + ": truncated IDX header (" + std::to_string(b.size()) + " bytes, needs " +
                  std::to_string(header) + ")");
  std::vector<uint32_t> d;
  uint64_t total = 1;
  for (int i = 0; i < dims; ++i) {
    d.push_back(be32(b, 4 + 4 * size_t(i)));
    total *= d.back();
    if (total > (uint64_t(1) << 34)) throw IOError(path + ": IDX sizes are absurd (more than 2^34 bytes)");
  }
  if (b.size() - header < total)
    throw IOError(path + ": truncated IDX data: header promises " + std::to_string(total) + " bytes, file has " +
                  std::to_string(b.size() - header));
  if (b.size() - header > total)
    throw IOError(path + ": IDX file has " + std::to_string(b.size() - header - total) +
                  " bytes after the data its header describes");
  return d;
}

}  // namespace

Dataset load_idx(const std::string& images_path, const std::string& labels_path) {
  auto ib = read_file(images_path);
  auto lb = read_file(labels_path);
  auto id = idx_header(ib, images_path, 2051, 3, "images, idx3-ubyte");
  auto ld = idx_header(lb, labels_path, 2049, 1, "labels, idx1-ubyte");
  if (id[0] != ld[0])
    throw IOError(images_path + " holds " + std::to_string(id[0]) + " images but " + labels_path + " holds " +
                  std::to_string(ld[0]) + " labels");
  if (id[1] == 0 || id[2] == 0)
    throw IOError(images_path + ": images of " + std::to_string(id[1]) + "x" + std::to_string(id[2]) + " pixels");
  Dataset d;
  d.height = id[1];
  d.width = id[2];
  d.pixels.resize(ib.size() - 16);
  for (size_t i = 0; i < d.pixels.size(); ++i) d.pixels[i] = float(ib[16 + i]) / 255.f;
  d.labels.resize(ld[0]);
  for (size_t i = 0; i < d.labels.size(); ++i) {
    uint8_t v = lb[8 + i];
    if (v > 9) throw IOError(labels_path + ": label " + std::to_string(v) + " at index " + std::to_string(i) +
                             " is outside 0..9");
    d.labels[i] = v;
  }
  return d;
}

std::pair<Dataset, Dataset> load_mnist_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw IOError(dir + ": not a folder (expected MNIST's IDX files in it)");
  auto path = [&](const char* name) {
    fs::path p = fs::path(dir) / name;
    if (!fs::exists(p))
      throw IOError(dir + ": missing " + name + " (MNIST files must be unpacked: gunzip *.gz)");
    return p.string();
  };
  // one at a time, so the first missing file is the one reported
  std::string train_images = path("train-images-idx3-ubyte"), train_labels = path("train-labels-idx1-ubyte");
  std::string test_images = path("t10k-images-idx3-ubyte"), test_labels = path("t10k-labels-idx1-ubyte");
  return {load_idx(train_images, train_labels), load_idx(test_images, test_labels)};
}

std::pair<Dataset, Dataset> split(const Dataset& all, double test_fraction, uint64_t seed) {
  if (!(test_fraction > 0 && test_fraction < 1))
    throw std::invalid_argument("split: test fraction must be in (0, 1), got " + std::to_string(test_fraction));
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < all.size(); ++i) {
    size_t c = size_t(all.labels[size_t(i)]);
    if (c >= by_class.size()) by_class.resize(c + 1);
    by_class[c].push_back(i);
  }
  std::vector<int64_t> train_idx, test_idx;
  for (auto& members : by_class) {
    std::shuffle(members.begin(), members.end(), rng);
    size_t n_test = size_t(double(members.size()) * test_fraction + 0.5);
    test_idx.insert(test_idx.end(), members.begin(), members.begin() + long(n_test));
    train_idx.insert(train_idx.end(), members.begin() + long(n_test), members.end());
  }
  // mixed classes inside each split, so an unshuffled walk is not class by class
  std::shuffle(train_idx.begin(), train_idx.end(), rng);
  std::shuffle(test_idx.begin(), test_idx.end(), rng);
  auto take = [&](const std::vector<int64_t>& idx) {
    Dataset d;
    d.height = all.height, d.width = all.width, d.classes = all.classes;
    int64_t hw = all.height * all.width;
    d.pixels.resize(size_t(hw) * idx.size());
    for (size_t j = 0; j < idx.size(); ++j) {
      std::copy_n(all.image(idx[j]), hw, d.pixels.data() + int64_t(j) * hw);
      d.labels.push_back(all.labels[size_t(idx[j])]);
    }
    return d;
  };
  return {take(train_idx), take(test_idx)};
}

Batches::Batches(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed, bool augment, int max_shift,
                 std::string device)
    : data_(data), batch_size_(batch_size), shuffle_(shuffle), augment_(augment), seed_(seed),
      max_shift_(max_shift), device_(std::move(device)) {
  if (batch_size < 1) throw std::invalid_argument("batches: batch size must be >= 1, got " + std::to_string(batch_size));
  if (data.size() == 0) throw std::invalid_argument("batches: the data set is empty");
  start_epoch(0);
}

int64_t Batches::batches_per_epoch() const { return (data_.size() + batch_size_ - 1) / batch_size_; }

void Batches::start_epoch(int epoch) {
  order_.resize(size_t(data_.size()));
  std::iota(order_.begin(), order_.end(), 0);
  uint64_t s = seed_ * 1000003u + uint64_t(epoch);
  if (shuffle_) {
    std::mt19937_64 rng(s);
    std::shuffle(order_.begin(), order_.end(), rng);
  }
  shift_gen_.seed(s ^ 0x9e3779b97f4a7c15ull);
  pos_ = 0;
}

bool Batches::next(Batch& out) {
  if (pos_ >= order_.size()) return false;
  size_t n = std::min(order_.size() - pos_, size_t(batch_size_));
  int64_t H = data_.height, W = data_.width, hw = H * W;
  std::vector<float> px(n * size_t(hw), 0.f);
  out.label_values.assign(n, 0);
  std::uniform_int_distribution<int> shift(-max_shift_, max_shift_);
  for (size_t j = 0; j < n; ++j) {
    int64_t i = order_[pos_ + j];
    out.label_values[j] = data_.labels[size_t(i)];
    const float* src = data_.image(i);
    float* dst = px.data() + int64_t(j) * hw;
    if (!augment_) {
      std::copy_n(src, hw, dst);
      continue;
    }
    int dy = shift(shift_gen_.engine()), dx = shift(shift_gen_.engine());
    for (int64_t y = 0; y < H; ++y) {
      int64_t sy = y - dy;
      if (sy < 0 || sy >= H) continue;
      for (int64_t x = 0; x < W; ++x) {
        int64_t sx = x - dx;
        if (sx >= 0 && sx < W) dst[y * W + x] = src[sy * W + sx];
      }
    }
  }
  pos_ += n;
  out.images = Tensor::from_data(px, {int64_t(n), 1, H, W}, device_);
  out.labels = Tensor::from_ints(out.label_values, {int64_t(n)}, device_);
  return true;
}

}  // namespace tl::data
