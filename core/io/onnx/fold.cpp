// Batch norms folded into constants at load (see fold.h).
#include "core/io/onnx/fold.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "core/io/onnx/context.h"
#include "core/io/onnx_shapes_only.h"
#include "core/settings.h"

namespace tl::onnx_detail {

bool foldable_op(const std::string& op) { return op == "ConstantOfShape" || op == "Constant"; }

bool default_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

bool foldable_small_op(const std::string& op) {
  static const std::set<std::string> pure = {
      "Add",    "Sub",     "Mul",       "Div",       "Neg",       "Abs",       "Floor",     "Ceil",
      "Sqrt",   "Min",     "Max",       "Equal",     "Less",      "Greater",   "Not",       "And",
      "Or",     "Where",   "Cast",      "Concat",    "Reshape",   "Flatten",   "Squeeze",   "Unsqueeze",
      "Transpose", "Slice", "Gather",   "Expand",    "Tile",      "Range",     "Identity",  "Shape",
      "Size",   "ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin", "Mod",  "Clip",      "Sign",
      "Round",  "Reciprocal", "Pow",    "LessOrEqual", "GreaterOrEqual", "Xor", "ScatterND", "ScatterElements"};
  return pure.count(op) > 0;
}

FoldKind fold_kind(const onnx::NodeProto& n, const std::set<std::string>& constant, const std::set<std::string>& by_shape) {
  if (!default_domain(n) || n.output_size() != 1 || n.output(0).empty()) return FoldKind::None;
  const std::string& op = n.op_type();
  if (op == "Shape" || op == "Size") return n.input_size() == 1 && constant.count(n.input(0)) ? FoldKind::Constant : FoldKind::ByShape;
  if (!foldable_op(op) && !foldable_small_op(op)) return FoldKind::None;
  bool all_constant = true, all_known = true;
  for (const auto& in : n.input()) {
    all_constant = all_constant && (in.empty() || constant.count(in));
    all_known = all_known && (in.empty() || constant.count(in) || by_shape.count(in));
  }
  if (all_constant) return FoldKind::Constant;
  return all_known ? FoldKind::ByShape : FoldKind::None;
}

std::unordered_map<std::string, Value>& FoldCache::of(const std::string& key) {
  if (!values_.count(key) && key.find(' ') != std::string::npos) {
    shape_keys_.push_back(key);
    if (shape_keys_.size() > kShapeKeys) {
      values_.erase(shape_keys_.front());
      shape_keys_.erase(shape_keys_.begin());
    }
  }
  return values_[key];
}

void make_keepable(Value& v, const std::string& device) {
  // A small float constant stays a host value for shape arithmetic and is
  // uploaded once too (a layer's weights in a small model).
  if (v.host && v.elem == onnx::TensorProto::FLOAT && !v.data.empty()) device_tensor(v, device);
  if (v.tensor.defined()) v.tensor = v.tensor.realize();
  if (!v.host && v.tensor.defined() && numel(v.shape) <= kFoldSmallElements) {
    v.data = v.tensor.to_doubles();
    v.host = true;
  }
}

bool folding_disabled() {
  return setting_is_on("TINYLENS_NOFOLD");
}

namespace {

// Names whose value is the same on every run: initializers, and outputs of
// value builders whose inputs are all such names (what OnnxModel::run folds).
std::set<std::string> constant_names(const onnx::GraphProto& g, const std::set<std::string>& initializers) {
  std::set<std::string> constant = initializers;
  for (const auto& n : g.node()) {
    bool all = default_domain(n) && foldable_op(n.op_type()) && n.output_size() == 1 && !n.output(0).empty();
    for (const auto& in : n.input()) all = all && (in.empty() || constant.count(in));
    if (all) constant.insert(n.output(0));
  }
  return constant;
}

// An inference-mode normalisation over channels (axis 1) whose parameters
// are constants and whose only output is y.
bool foldable_norm(const onnx::NodeProto& n, const std::set<std::string>& constant) {
  if (!default_domain(n) || n.op_type() != "BatchNormalization" || n.input_size() != 5) return false;
  if (attr_i(n, "training_mode", 0) != 0 || attr_i(n, "spatial", 1) != 1) return false;
  for (int i = 1; i < n.output_size(); ++i)
    if (!n.output(i).empty()) return false;
  for (int i = 1; i < 5; ++i)
    if (n.input(i).empty() || !constant.count(n.input(i))) return false;
  return !n.input(0).empty() && n.output_size() >= 1 && !n.output(0).empty();
}

// A fresh value name near `base`, recorded in `taken`.
std::string fresh_name(const std::string& base, std::set<std::string>& taken) {
  std::string name = base;
  for (int k = 2; taken.count(name); ++k) name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

std::set<std::string> all_names(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto& v : g.input()) names.insert(v.name());
  for (const auto& v : g.output()) names.insert(v.name());
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node()) {
    names.insert(n.input().begin(), n.input().end());
    names.insert(n.output().begin(), n.output().end());
  }
  return names;
}

}  // namespace

GraphFolds fold_batch_norms(onnx::GraphProto& g, const std::set<std::string>& initializers) {
  GraphFolds out;
  const std::set<std::string> constant = constant_names(g, initializers);
  std::map<std::string, int> uses, producer;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const auto& in : g.node(i).input()) ++uses[in];
    for (const auto& o : g.node(i).output()) producer[o] = i;
  }
  for (const auto& o : g.output()) uses[o.name()] += 2;  // a graph output is never folded away
  std::set<std::string> taken = all_names(g);
  // norm node -> (the conv it absorbs, its fold)
  std::vector<std::pair<int, size_t>> fused_conv(size_t(g.node_size()), {-1, 0});
  std::vector<bool> dropped(size_t(g.node_size()), false);
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto& n = *g.mutable_node(i);
    if (!foldable_norm(n, constant)) continue;
    BatchNormFold f;
    f.norm = n;
    const std::string& y = n.output(0);
    auto p = producer.find(n.input(0));
    const onnx::NodeProto* conv = p == producer.end() ? nullptr : &g.node(p->second);
    const bool into_conv = conv && default_domain(*conv) && conv->op_type() == "Conv" && conv->output_size() == 1 &&
                           uses[n.input(0)] == 1 && conv->input_size() >= 2 && constant.count(conv->input(1)) &&
                           (conv->input_size() < 3 || conv->input(2).empty() || constant.count(conv->input(2)));
    if (into_conv) {
      f.weight = conv->input(1);
      f.bias = conv->input_size() >= 3 ? conv->input(2) : "";
      f.outputs = {fresh_name(y + "::folded_weight", taken), fresh_name(y + "::folded_bias", taken)};
      fused_conv[size_t(i)] = {p->second, out.folds.size()};
      dropped[size_t(p->second)] = true;
      out.same_shape.push_back({n.input(0), y});
    } else {
      f.outputs = {fresh_name(y + "::scale", taken), fresh_name(y + "::shift", taken),
                   fresh_name(y + "::zero_mean", taken), fresh_name(y + "::unit_variance", taken)};
      for (int k = 1; k < 5; ++k) n.set_input(k, f.outputs[size_t(k - 1)]);
      bool set = false;
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "epsilon") a.set_f(0.0f), set = true;
      if (!set) {
        auto* a = n.add_attribute();
        a->set_name("epsilon");
        a->set_type(onnx::AttributeProto::FLOAT);
        a->set_f(0.0f);
      }
    }
    for (const auto& o : f.outputs) out.made_by[o] = out.folds.size();
    out.folds.push_back(std::move(f));
  }
  // The convolution moves to its normalisation's place: everything either
  // reads is defined by then, and nothing else read the convolution.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g.node_size(); ++i) {
    if (dropped[size_t(i)]) continue;
    const auto [conv_at, fold_at] = fused_conv[size_t(i)];
    out.file_node.push_back(conv_at < 0 ? i : conv_at);
    if (conv_at < 0) {
      *nodes.Add() = g.node(i);
      continue;
    }
    const BatchNormFold& f = out.folds[fold_at];
    onnx::NodeProto conv = g.node(conv_at);
    const std::string& norm_name = g.node(i).name();
    conv.set_name(conv.name().empty() ? norm_name : norm_name.empty() ? conv.name() : conv.name() + "+" + norm_name);
    conv.set_input(1, f.outputs[0]);
    if (conv.input_size() < 3) conv.add_input(f.outputs[1]);
    else conv.set_input(2, f.outputs[1]);
    conv.set_output(0, g.node(i).output(0));
    *nodes.Add() = std::move(conv);
  }
  g.mutable_node()->Swap(&nodes);
  return out;
}

namespace {

// s = scale / sqrt(var + eps) and t = shift - mean * s per channel, each
// parameter holding `channels` values.
void channel_affine(const BatchNormFold& f, const std::vector<const Value*>& p, size_t channels,
                    std::vector<double>& s, std::vector<double>& t) {
  const char* what[] = {"scale", "B", "mean", "var"};
  for (size_t k = 0; k < 4; ++k)
    if (p[k]->data.size() != channels)
      bad(f.norm, std::string("the ") + what[k] + " has " + std::to_string(p[k]->data.size()) + " values (shape " +
                      shape_str(p[k]->shape) + ") for " + std::to_string(channels) + " channels");
  const double eps = attr_f(f.norm, "epsilon", 1e-5);
  s.resize(channels);
  t.resize(channels);
  for (size_t c = 0; c < channels; ++c) {
    s[c] = p[0]->data[c] / std::sqrt(p[3]->data[c] + eps);
    t[c] = p[1]->data[c] - p[2]->data[c] * s[c];
  }
}

}  // namespace

std::vector<Value> fold_values(const BatchNormFold& f, const Source& source, const std::string& device) {
  std::vector<Value> params;
  for (int k = 1; k < 5; ++k) params.push_back(source(f.norm.input(k), true));
  for (const auto& p : params)
    if (!is_float_elem(p.elem)) bad(f.norm, std::string("a parameter of element type ") + elem_name(p.elem));
  std::vector<const Value*> p = {&params[0], &params[1], &params[2], &params[3]};
  const bool shapes_only = ShapesOnly::active();
  if (!f.into_conv()) {
    const Shape& shape = params[0].shape;
    const size_t channels = size_t(numel(shape));
    std::vector<double> s(channels, 1.0), t(channels, 0.0);
    if (!shapes_only) channel_affine(f, p, channels, s, t);
    const int32_t elem = params[0].elem;
    return {from_host(shape, elem, s), from_host(shape, elem, t), from_host(shape, elem, std::vector<double>(channels, 0.0)),
            from_host(shape, elem, std::vector<double>(channels, 1.0))};
  }
  Value w = source(f.weight, false);
  if (!is_float_elem(w.elem)) bad(f.norm, std::string("the convolution before it has weights of element type ") + elem_name(w.elem));
  if (w.shape.size() < 3 || w.shape[0] < 1)
    bad(f.norm, "the convolution before it has a weight of shape " + shape_str(w.shape) +
                    " (output channels first, then input channels and at least one kernel axis)");
  const size_t channels = size_t(w.shape[0]);
  Value bias;
  if (!f.bias.empty()) {
    bias = source(f.bias, true);
    if (!shapes_only && bias.data.size() != channels)
      bad(f.norm, "the convolution before it has " + std::to_string(bias.data.size()) + " biases for " +
                      std::to_string(channels) + " output channels");
  }
  Value w2, b2 = from_host({int64_t(channels)}, w.elem, std::vector<double>(channels, 0.0));
  w2.elem = w.elem;
  w2.shape = w.shape;
  const DType dtype = tl_dtype(w.elem, "Conv");
  if (shapes_only) {
    w2.tensor = stand_in(w.shape, dtype, device);
    return {w2, b2};
  }
  std::vector<double> s, t;
  channel_affine(f, p, channels, s, t);
  for (size_t c = 0; c < channels; ++c) b2.data[c] = (bias.data.empty() ? 0.0 : bias.data[c]) * s[c] + t[c];
  // The weights stay where they are (a light model's exist only on the
  // device): one kernel scales each output channel's filter by s.
  Shape per_filter(w.shape.size(), 1);
  per_filter[0] = int64_t(channels);
  Tensor scale = dtype == DType::f64 ? Tensor::from_doubles(s, per_filter, device)
                                     : Tensor::from_data(std::vector<float>(s.begin(), s.end()), per_filter, device);
  w2.tensor = (device_tensor(w, device) * scale).realize();
  return {w2, b2};
}

void bring_fold(const GraphFolds& folds, size_t index, const std::unordered_map<std::string, Value>& initializers,
                std::unordered_map<std::string, Value>& env, std::unordered_map<std::string, Value>& cache,
                const std::string& device) {
  const BatchNormFold& f = folds.folds[index];
  const bool shapes_only = ShapesOnly::active();
  if (!shapes_only && cache.count(f.outputs[0])) {
    for (const auto& o : f.outputs) env[o] = cache.at(o);
    return;
  }
  auto source = [&](const std::string& name, bool numbers) {
    // Initializers keep all their numbers on the host; values nodes built
    // (ConstantOfShape) are read back from the device when numbers are asked for.
    if (auto it = initializers.find(name); it != initializers.end()) return it->second;
    auto it = env.find(name);
    if (it == env.end()) bad(f.norm, "reads '" + name + "', which no earlier node, input or initializer defines");
    Value v = it->second;
    if (numbers && !v.host && !shapes_only) v.data = v.tensor.to_doubles(), v.host = true;
    return v;
  };
  std::vector<Value> values = fold_values(f, source, device);
  for (size_t k = 0; k < values.size(); ++k) {
    Value& v = values[k];
    if (!shapes_only) {
      // Like an initializer: on the device once; a small one keeps its
      // numbers for host arithmetic (op_batch_normalization reads the mean
      // and variance).
      v.tensor = device_tensor(v, device).realize();
      cache[f.outputs[k]] = v;
    }
    env[f.outputs[k]] = std::move(v);
  }
}

}  // namespace tl::onnx_detail
