// Reader for the golden files written by scripts/make_golden.py (the format
// is described at the top of that script).
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tltest {

struct GoldenTensor {
  bool is_int = false;  // created with Tensor::from_ints
  tl::Shape shape;
  std::vector<float> data;
};

struct GoldenCase {
  std::string name;
  double rtol = 1e-4, atol = 1e-5;
  std::vector<GoldenTensor> inputs, outputs;
};

// A golden file read whole and taken from the front; the 8-byte magic is
// checked on opening. Throws naming the file when it is missing or short.
class GoldenBlob {
 public:
  GoldenBlob(const std::string& path, const char (&magic)[9], const std::string& hint = "") : path_(path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open golden file " + path + hint);
    blob_.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    char got[8];
    take(got, 8);
    if (std::memcmp(got, magic, 8) != 0) throw std::runtime_error("bad magic in " + path);
  }
  void take(void* dst, size_t n) {
    if (pos_ + n > blob_.size()) throw std::runtime_error("golden file " + path_ + " is truncated");
    std::memcpy(dst, blob_.data() + pos_, n);
    pos_ += n;
  }

 private:
  std::string path_, blob_;
  size_t pos_ = 0;
};

inline std::vector<GoldenCase> read_golden(const std::string& path) {
  GoldenBlob in(path, "TLGOLD1\0");
  auto take = [&](void* dst, size_t n) { in.take(dst, n); };
  uint32_t count = 0;
  take(&count, 4);
  auto read_tensor = [&]() {
    GoldenTensor t;
    uint8_t dtype = 0, ndim = 0;
    take(&dtype, 1);
    take(&ndim, 1);
    t.is_int = dtype == 1;
    t.shape.resize(ndim);
    if (ndim) take(t.shape.data(), 8 * size_t(ndim));
    t.data.resize(size_t(tl::numel(t.shape)));
    if (!t.data.empty()) take(t.data.data(), 4 * t.data.size());
    return t;
  };
  std::vector<GoldenCase> cases(count);
  for (auto& c : cases) {
    uint16_t len = 0;
    take(&len, 2);
    c.name.resize(len);
    take(c.name.data(), len);
    float rtol = 0, atol = 0;
    uint8_t nin = 0, nout = 0;
    take(&rtol, 4);
    take(&atol, 4);
    take(&nin, 1);
    take(&nout, 1);
    c.rtol = rtol;
    c.atol = atol;
    for (int i = 0; i < nin; ++i) c.inputs.push_back(read_tensor());
    for (int i = 0; i < nout; ++i) c.outputs.push_back(read_tensor());
  }
  return cases;
}

inline tl::Tensor make_tensor(const GoldenTensor& g, const std::string& device) {
  if (g.is_int) {
    std::vector<int32_t> v(g.data.begin(), g.data.end());
    return tl::Tensor::from_ints(v, g.shape, device);
  }
  return tl::Tensor::from_data(g.data, g.shape, device);
}

}  // namespace tltest
