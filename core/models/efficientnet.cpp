#include "core/models/efficientnet.h"

#include <cmath>

#include "core/depthwise.h"
#include "core/error.h"

namespace tl {

namespace {

const char* kBatchNormParts[] = {"weight", "bias", "running_mean", "running_var"};

// TensorFlow "SAME": output = ceil(in / stride); the padding this needs goes
// half before, and the odd pixel after. PyTorch's symmetric padding would
// shift every stride-2 layer by one pixel against the trained weights.
std::pair<int64_t, int64_t> same_padding(int64_t size, int64_t kernel, int64_t stride) {
  int64_t out = (size + stride - 1) / stride;
  int64_t total = std::max<int64_t>((out - 1) * stride + kernel - size, 0);
  return {total / 2, total - total / 2};
}

}  // namespace

const std::vector<MBConvSpec>& EfficientNetLite0::blocks() {
  // (repeats, kernel, stride, expand, in, out) per stage, from the lite builder.
  static const std::vector<MBConvSpec> all = [] {
    const int stages[][6] = {{1, 3, 1, 1, 32, 16},   {2, 3, 2, 6, 16, 24},   {2, 5, 2, 6, 24, 40},
                             {3, 3, 2, 6, 40, 80},   {3, 5, 1, 6, 80, 112},  {4, 5, 2, 6, 112, 192},
                             {1, 3, 1, 6, 192, 320}};
    std::vector<MBConvSpec> out;
    for (auto& s : stages)
      for (int r = 0; r < s[0]; ++r) out.push_back({s[1], r == 0 ? s[2] : 1, s[3], r == 0 ? s[4] : s[5], s[5]});
    return out;
  }();
  return all;
}

std::map<std::string, Shape> EfficientNetLite0::expected_keys() {
  std::map<std::string, Shape> keys;
  auto bn = [&](const std::string& prefix, int64_t c) {
    for (auto* part : kBatchNormParts) keys[prefix + "." + part] = {c};
  };
  keys["_conv_stem.weight"] = {32, 3, 3, 3};
  bn("_bn0", 32);
  const auto& specs = blocks();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& b = specs[i];
    const std::string p = "_blocks." + std::to_string(i) + ".";
    const int64_t mid = int64_t(b.in) * b.expand;
    if (b.expand != 1) {
      keys[p + "_expand_conv.weight"] = {mid, b.in, 1, 1};
      bn(p + "_bn0", mid);
    }
    keys[p + "_depthwise_conv.weight"] = {mid, 1, b.kernel, b.kernel};
    bn(p + "_bn1", mid);
    keys[p + "_project_conv.weight"] = {b.out, mid, 1, 1};
    bn(p + "_bn2", b.out);
  }
  keys["_conv_head.weight"] = {1280, 320, 1, 1};
  bn("_bn1", 1280);
  keys["_fc.weight"] = {kClasses, 1280};
  keys["_fc.bias"] = {kClasses};
  return keys;
}

EfficientNetLite0::EfficientNetLite0(const StateDict& state) {
  // num_batches_tracked only matters for training; files exported without it
  // (safetensors, other converters) are equally valid.
  StateDict relevant;
  for (auto& [key, value] : state) {
    const std::string suffix = ".num_batches_tracked";
    if (key.size() > suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) continue;
    relevant.emplace(key, value);
  }
  check_state_dict(relevant, expected_keys());

  auto add_conv = [&](const std::string& name, const std::string& weight_key, const std::string& bn, int stride,
                      Kind kind) {
    const HostTensor& w = relevant.at(weight_key);
    const auto& gamma = relevant.at(bn + ".weight").data;
    const auto& beta = relevant.at(bn + ".bias").data;
    const auto& mean = relevant.at(bn + ".running_mean").data;
    const auto& var = relevant.at(bn + ".running_var").data;
    const int64_t out = w.shape[0], per_group = w.shape[1], k = w.shape[2];
    const size_t taps = size_t(k * k);
    std::vector<float> folded = w.data;
    HostLayer layer;
    layer.name = name;
    layer.kind = kind;
    layer.kernel = k;
    layer.out = out;
    layer.in = kind == Kind::Depthwise ? out : per_group;
    layer.stride = stride;
    layer.bias.resize(size_t(out));
    const size_t per_output = folded.size() / size_t(out);
    for (int64_t o = 0; o < out; ++o) {
      // Fold in double, so each folded value is rounded once.
      const double scale = double(gamma[o]) / std::sqrt(double(var[o]) + kBatchNormEpsilon);
      if (!std::isfinite(scale))
        throw IOError("EfficientNet-Lite0: batch norm " + bn + " channel " + std::to_string(o) +
                      " has a non-finite scale (running_var " + std::to_string(var[o]) + ")");
      for (size_t j = 0; j < per_output; ++j) {
        float& v = folded[size_t(o) * per_output + j];
        v = float(double(v) * scale);
      }
      layer.bias[size_t(o)] = float(double(beta[o]) - double(mean[o]) * scale);
    }
    // Tap-major layouts: each tap's weights are one contiguous row, so a tap
    // is a plain slice on the device.
    if (kind == Kind::Depthwise) {
      layer.weight_shape = {int64_t(taps), out};
      layer.weight.resize(folded.size());
      for (int64_t c = 0; c < out; ++c)
        for (size_t t = 0; t < taps; ++t) layer.weight[t * size_t(out) + size_t(c)] = folded[size_t(c) * taps + t];
    } else if (kind == Kind::Dense) {
      layer.weight_shape = {out, int64_t(taps) * per_group};
      layer.weight.resize(folded.size());
      for (int64_t o = 0; o < out; ++o)
        for (int64_t c = 0; c < per_group; ++c)
          for (size_t t = 0; t < taps; ++t)
            layer.weight[size_t(o) * per_output + t * size_t(per_group) + size_t(c)] =
                folded[size_t(o) * per_output + size_t(c) * taps + t];
    } else {
      layer.weight_shape = {out, per_group};
      layer.weight = std::move(folded);
    }
    parameters_ += int64_t(w.data.size() + 2 * size_t(out));  // conv weights + BN gamma, beta (as PyTorch counts)
    convs_.push_back(std::move(layer));
  };

  add_conv("stem", "_conv_stem.weight", "_bn0", 2, Kind::Dense);
  const auto& specs = blocks();
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& b = specs[i];
    const std::string p = "_blocks." + std::to_string(i) + ".";
    const std::string scope = "blocks." + std::to_string(i) + ".";
    if (b.expand != 1) add_conv(scope + "expand", p + "_expand_conv.weight", p + "_bn0", 1, Kind::Pointwise);
    add_conv(scope + "depthwise", p + "_depthwise_conv.weight", p + "_bn1", b.stride, Kind::Depthwise);
    add_conv(scope + "project", p + "_project_conv.weight", p + "_bn2", 1, Kind::Pointwise);
  }
  add_conv("head", "_conv_head.weight", "_bn1", 1, Kind::Pointwise);

  HostLayer fc;
  fc.name = "fc";
  fc.kind = Kind::Linear;
  fc.weight_shape = relevant.at("_fc.weight").shape;
  fc.in = fc.weight_shape[1];
  fc.out = fc.weight_shape[0];
  fc.weight = relevant.at("_fc.weight").data;
  fc.bias = relevant.at("_fc.bias").data;
  parameters_ += int64_t(fc.weight.size() + fc.bias.size());
  convs_.push_back(std::move(fc));
}

double EfficientNetLite0::flops(int64_t height, int64_t width) const {
  double total = 0;
  for (const auto& l : convs_) {
    if (l.kind == Kind::Linear) {
      total += 2.0 * double(l.weight.size());
      continue;
    }
    height = (height + l.stride - 1) / l.stride;
    width = (width + l.stride - 1) / l.stride;
    // one multiply-add per weight per output pixel, plus the bias add
    total += (2.0 * double(l.weight.size()) + double(l.bias.size())) * double(height * width);
  }
  return total;
}

const std::vector<EfficientNetLite0::DeviceLayer>& EfficientNetLite0::on_device(const std::string& device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = device_weights_.find(device);
  if (it != device_weights_.end()) return it->second;
  std::vector<DeviceLayer> layers;
  layers.reserve(convs_.size());
  for (const auto& l : convs_) {
    DeviceLayer d;
    d.weight = Tensor::from_data(l.weight, l.weight_shape, device);
    d.bias = Tensor::from_data(l.bias, {int64_t(l.bias.size())}, device);
    // Uploaded now, so every later forward reads device buffers instead of
    // re-sending 4.6 M floats.
    d.weight.realize();
    d.bias.realize();
    layers.push_back(std::move(d));
  }
  return device_weights_.emplace(device, std::move(layers)).first->second;
}

namespace {

Window2d same_window(const Tensor& x, int64_t kernel, int64_t stride) {
  Window2d g;
  g.kernel_h = g.kernel_w = kernel;
  g.stride_h = g.stride_w = stride;
  g.pad_h = same_padding(x.dim(2), kernel, stride);
  g.pad_w = same_padding(x.dim(3), kernel, stride);
  return g;
}

}  // namespace

Tensor EfficientNetLite0::depthwise(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t kernel,
                                    int64_t stride) {
  return depthwise_conv2d(x, weight, bias, same_window(x, kernel, stride));
}

Tensor EfficientNetLite0::conv(const Tensor& x, size_t index, const std::vector<DeviceLayer>& w) const {
  const HostLayer& l = convs_[index];
  const Tensor& weight = w[index].weight;
  const Tensor& bias = w[index].bias;
  const int64_t N = x.dim(0), H = x.dim(2), W = x.dim(3);
  if (x.dim(1) != l.in)
    throw ShapeError("EfficientNet-Lite0 " + l.name + ": input " + shape_str(x.shape()) + " has " +
                     std::to_string(x.dim(1)) + " channels, the layer expects " + std::to_string(l.in));
  switch (l.kind) {
    case Kind::Pointwise:
      // (O, C) @ (N, C, H*W): one GEMM per image, output already NCHW.
      return (weight.matmul(x.reshape({N, l.in, H * W})) + bias.reshape({1, l.out, 1})).reshape({N, l.out, H, W});
    case Kind::Depthwise:
      return depthwise(x, weight, bias, l.kernel, l.stride);
    case Kind::Dense: {
      // The stem (3 input channels): gather the K*K taps into (N, K*K*C, OH*OW)
      // columns, then one GEMM; the columns are small (27 x 12544 floats).
      auto views = window_taps(x, same_window(x, l.kernel, l.stride));  // (N, C, OH, OW) each
      const int64_t OH = views[0].dim(2), OW = views[0].dim(3);
      Tensor cols = Tensor::cat(views, 1).reshape({N, l.kernel * l.kernel * l.in, OH * OW});
      return (weight.matmul(cols) + bias.reshape({1, l.out, 1})).reshape({N, l.out, OH, OW});
    }
    case Kind::Linear:
      return x.linear(weight, bias);
  }
  throw ShapeError("EfficientNet-Lite0: unknown layer kind in " + l.name);
}

Tensor EfficientNetLite0::forward(const Tensor& input) {
  if (input.ndim() != 4 || input.dim(1) != 3)
    throw ShapeError("EfficientNet-Lite0: input " + shape_str(input.shape()) + " must be (N, 3, H, W)");
  if (input.dim(2) < 32 || input.dim(3) < 32)
    throw ShapeError("EfficientNet-Lite0: input " + shape_str(input.shape()) +
                     " is smaller than 32x32, the network's total stride");
  const auto& w = on_device(input.device());
  NoGrad no_grad;
  size_t layer = 0;
  Tensor x;
  {
    Scope s("stem");
    x = conv(input, layer++, w).relu6();
  }
  const auto& specs = blocks();
  for (size_t i = 0; i < specs.size(); ++i) {
    Scope s("blocks." + std::to_string(i));
    const auto& b = specs[i];
    Tensor y = x;
    if (b.expand != 1) {
      Scope e("expand");
      y = conv(y, layer++, w).relu6();
    }
    {
      Scope d("depthwise");
      y = conv(y, layer++, w).relu6();
    }
    {
      Scope p("project");
      y = conv(y, layer++, w);
      if (b.stride == 1 && b.in == b.out) y = y + x;
    }
    x = y;
  }
  {
    Scope s("head");
    x = conv(x, layer++, w).relu6();
    x = x.mean({2, 3});  // global average pool; dropout is the identity at inference
  }
  Scope s("fc");
  return x.linear(w[layer].weight, w[layer].bias);
}

}  // namespace tl
