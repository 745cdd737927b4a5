// EfficientNet-Lite0 (Tan & Le 2019, the "lite" variant for mobile: ReLU6, no
// squeeze-excite, stem and head not scaled) for inference, on tl::Tensor ops.
// Weights come from a state dict in the naming of the efficientnet_lite_pytorch
// port of the TensorFlow checkpoint (_conv_stem, _blocks.N._expand_conv, ...).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/io/host_tensor.h"
#include "core/tensor.h"

namespace tl {

// One MBConv block: 1x1 expand (absent when expand == 1), k x k depthwise
// with `stride`, 1x1 project, identity skip when stride 1 and in == out.
struct MBConvSpec {
  int kernel, stride, expand, in, out;
};

class EfficientNetLite0 {
 public:
  // What the port expects, read from its package code (see
  // scripts/reference_efficientnet.py): batch-norm epsilon 1e-3 and inputs
  // normalised the TensorFlow way, (pixel * 255 - 127) / 128.
  static constexpr double kBatchNormEpsilon = 1e-3;
  static constexpr float kMean = 127.0f / 255.0f, kStd = 128.0f / 255.0f;
  static constexpr int kResize = 256, kCrop = 224, kClasses = 1000;

  static const std::vector<MBConvSpec>& blocks();
  // Every key (and shape) a checkpoint must hold; BN's num_batches_tracked is
  // optional and not listed.
  static std::map<std::string, Shape> expected_keys();

  // Checks the state dict (one IOError listing every missing, unexpected or
  // mis-shaped key) and folds each batch norm into the preceding conv:
  // w' = w * gamma / sqrt(var + eps), b' = beta - mean * gamma / sqrt(var + eps).
  explicit EfficientNetLite0(const StateDict& state);

  // (N, 3, H, W) -> logits (N, 1000) on the input's device. Weights are copied
  // to a device on its first use and kept there.
  Tensor forward(const Tensor& input);

  int64_t parameters() const { return parameters_; }
  int64_t layers() const { return int64_t(convs_.size()); }  // convolutions + fc
  double flops(int64_t height = kCrop, int64_t width = kCrop) const;  // multiply-adds count 2

  // The depthwise convolution of the forward pass, TensorFlow "SAME" padding:
  // x (N, C, H, W), weight (K*K, C) tap-major, bias (C) -> (N, C, OH, OW).
  // Public so tests can check each of its renderings against a reference.
  static Tensor depthwise(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t kernel, int64_t stride);

 private:
  // A convolution with its batch norm folded in (or the fc layer). Weights
  // are stored in the layout the forward pass reads them in:
  //   Pointwise (1x1): (O, C)          Depthwise: (K*K, C), tap-major
  //   Dense (the stem): (O, K*K*C), tap-major columns     Linear: (O, C)
  enum class Kind { Dense, Depthwise, Pointwise, Linear };
  struct HostLayer {
    std::string name;
    Kind kind = Kind::Pointwise;
    Shape weight_shape;  // as stored, see above
    int64_t kernel = 1, in = 0, out = 0;
    std::vector<float> weight, bias;
    int stride = 1;
  };
  struct DeviceLayer {
    Tensor weight, bias;
  };

  const std::vector<DeviceLayer>& on_device(const std::string& device);
  Tensor conv(const Tensor& x, size_t layer, const std::vector<DeviceLayer>& w) const;

  std::vector<HostLayer> convs_;  // stem, per block (expand?, depthwise, project), head; then fc last
  int64_t parameters_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::vector<DeviceLayer>> device_weights_;
};

}  // namespace tl
