// The op-by-op suite: every case of tests/data/golden/ops.bin (written by
// scripts/make_golden.py from PyTorch/NumPy) runs on every available device and
// is compared with the reference; non-cpu devices are also compared with cpu.
// Further tests look at what the scheduler did (kernel counts, caching) and at
// the statistical creation ops.
#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/profile.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "golden.h"
#include "testing.h"

using tl::Tensor;
using V = std::vector<Tensor>;
using OpFn = std::function<V(V& in, const std::string& device)>;

namespace {

OpFn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](V& in, const std::string&) { return V{f(in[0])}; };
}
OpFn binary(std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return [f](V& in, const std::string&) { return V{f(in[0], in[1])}; };
}
OpFn creation(std::function<Tensor(const std::string&)> f) {
  return [f](V&, const std::string& dev) { return V{f(dev)}; };
}

// One entry per case of make_golden.py's op_cases(), same names.
const std::map<std::string, OpFn>& op_table() {
  static const std::map<std::string, OpFn> table = [] {
    std::map<std::string, OpFn> t;
    using tl::DType;
    // creation
    t["zeros_2x3"] = creation([](auto& d) { return Tensor::zeros({2, 3}, DType::f32, d); });
    t["zeros_0x3"] = creation([](auto& d) { return Tensor::zeros({0, 3}, DType::f32, d); });
    t["ones_7"] = creation([](auto& d) { return Tensor::ones({7}, DType::f32, d); });
    t["full_3x1"] = creation([](auto& d) { return Tensor::full({3, 1}, 2.5, DType::f32, d); });
    t["full_scalar"] = creation([](auto& d) { return Tensor::scalar(-4.0, DType::f32, d); });
    t["arange_10"] = creation([](auto& d) { return Tensor::arange(10, d); });
    t["arange_neg_half"] = creation([](auto& d) { return Tensor::arange(-3, 3, 0.5, DType::f32, d); });
    t["arange_frac_step"] = creation([](auto& d) { return Tensor::arange(1, 2, 0.3, DType::f32, d); });
    t["arange_down"] = creation([](auto& d) { return Tensor::arange(5, 0, -1.5, DType::f32, d); });
    t["eye_4"] = creation([](auto& d) { return Tensor::eye(4, d); });
    t["eye_1"] = creation([](auto& d) { return Tensor::eye(1, d); });

    // unary
    std::map<std::string, std::function<Tensor(const Tensor&)>> un = {
        {"neg", [](const Tensor& x) { return x.neg(); }},
        {"exp", [](const Tensor& x) { return x.exp(); }},
        {"log", [](const Tensor& x) { return x.log(); }},
        {"sqrt", [](const Tensor& x) { return x.sqrt(); }},
        {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }},
        {"reciprocal", [](const Tensor& x) { return x.reciprocal(); }},
        {"sin", [](const Tensor& x) { return x.sin(); }},
        {"cos", [](const Tensor& x) { return x.cos(); }},
        {"relu", [](const Tensor& x) { return x.relu(); }},
        {"relu6", [](const Tensor& x) { return x.relu6(); }},
        {"leaky_relu", [](const Tensor& x) { return x.leaky_relu(0.1); }},
        {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }},
        {"tanh", [](const Tensor& x) { return x.tanh(); }},
        {"gelu", [](const Tensor& x) { return x.gelu(); }},
        {"silu", [](const Tensor& x) { return x.silu(); }},
        {"abs", [](const Tensor& x) { return x.abs(); }},
        {"sign", [](const Tensor& x) { return x.sign(); }},
        {"clip", [](const Tensor& x) { return x.clip(-1.0, 2.0); }},
    };
    for (auto& [name, f] : un) {
      t[name + "_edge"] = unary(f);
      t[name + "_rand"] = unary(f);
    }
    t["neg_1x1"] = unary([](auto& x) { return -x; });
    t["exp_empty"] = unary([](auto& x) { return x.exp(); });
    t["cast_i32"] = unary([](auto& x) { return x.cast(DType::i32); });
    t["cast_bool"] = unary([](auto& x) { return x.cast(DType::boolean); });
    t["from_ints_cast"] = unary([](auto& x) { return x.cast(DType::f32); });

    // binary
    auto add = [](auto& a, auto& b) { return a + b; };
    auto sub = [](auto& a, auto& b) { return a - b; };
    auto mul = [](auto& a, auto& b) { return a * b; };
    auto div = [](auto& a, auto& b) { return a / b; };
    t["add_3x1_1x4"] = binary(add);
    t["sub_3x1_1x4"] = binary(sub);
    t["mul_3x1_1x4"] = binary(mul);
    t["div_3x1_1x4"] = binary(div);
    t["maximum_3x1_1x4"] = binary([](auto& a, auto& b) { return a.maximum(b); });
    t["minimum_3x1_1x4"] = binary([](auto& a, auto& b) { return a.minimum(b); });
    t["add_2x3x4_4"] = binary([](auto& a, auto& b) { return a.add(b); });
    t["sub_4_2x3x4"] = binary([](auto& a, auto& b) { return a.sub(b); });
    t["mul_2x3x4_scalar"] = binary([](auto& a, auto& b) { return a.mul(b); });
    t["div_scalar_2x3x4"] = binary([](auto& a, auto& b) { return a.div(b); });
    t["add_7"] = binary(add);
    t["mul_13"] = binary(mul);
    t["add_1x1"] = binary(add);
    t["add_empty_0x3"] = binary(add);
    t["add_empty_0x3_3"] = binary(add);
    t["div_edge"] = binary(div);
    t["pow_tensor"] = binary([](auto& a, auto& b) { return a.pow(b); });
    t["pow_tensor_bcast"] = binary([](auto& a, auto& b) { return a.pow(b); });
    t["pow_scalar2_neg_base"] = unary([](auto& x) { return x.pow(2.0); });
    t["pow_scalar3_neg_base"] = unary([](auto& x) { return x.pow(3.0); });
    t["pow_scalar_half"] = unary([](auto& x) { return x.pow(0.5); });
    t["add_double"] = unary([](auto& x) { return x + 2.5; });
    t["sub_double"] = unary([](auto& x) { return x.sub(1.0); });
    t["mul_double"] = unary([](auto& x) { return x * -3.0; });
    t["div_double"] = unary([](auto& x) { return x / 4.0; });
    t["maximum_double"] = unary([](auto& x) { return x.maximum(0.5); });
    t["minimum_double"] = unary([](auto& x) { return x.minimum(0.5); });
    t["rsub_double"] = unary([](auto& x) { return 2.0 - x; });
    t["rdiv_double"] = unary([](auto& x) { return 1.0 / x; });
    t["radd_rmul_double"] = unary([](auto& x) { return 3.0 * x + 1.0; });

    // comparisons and where (bool results read back as 0/1)
    t["eq_3x1_1x4"] = binary([](auto& a, auto& b) { return a.eq(b); });
    t["ne_3x1_1x4"] = binary([](auto& a, auto& b) { return a.ne(b); });
    t["lt_3x1_1x4"] = binary([](auto& a, auto& b) { return a.lt(b); });
    t["le_3x1_1x4"] = binary([](auto& a, auto& b) { return a.le(b); });
    t["gt_3x1_1x4"] = binary([](auto& a, auto& b) { return a.gt(b); });
    t["ge_3x1_1x4"] = binary([](auto& a, auto& b) { return a.ge(b); });
    t["eq_2x3x4_4"] = binary([](auto& a, auto& b) { return a.eq(b); });
    t["where_bcast"] = [](V& in, const std::string&) {
      return V{Tensor::where(in[0].gt(Tensor::zeros({1}, DType::f32, in[0].device())), in[1], in[2])};
    };
    t["where_same"] = [](V& in, const std::string&) {
      return V{Tensor::where(in[0].lt(in[1]), in[1] * 2.0, in[2] - 1.0)};
    };

    // reductions
    const std::vector<std::pair<std::string, std::vector<int>>> axis_sets = {
        {"0", {0}}, {"1", {1}}, {"2", {2}}, {"m1", {-1}}, {"02", {0, 2}}, {"12", {1, 2}}, {"all", {}}};
    const std::vector<std::pair<std::string, std::vector<int>>> keep_sets = {{"1", {1}}, {"02", {0, 2}}, {"all", {}}};
    using RedFn = std::function<Tensor(const Tensor&, const std::vector<int>&, bool)>;
    std::map<std::string, RedFn> reds = {
        {"sum", [](const Tensor& x, const std::vector<int>& a, bool k) { return x.sum(a, k); }},
        {"mean", [](const Tensor& x, const std::vector<int>& a, bool k) { return x.mean(a, k); }},
        {"max", [](const Tensor& x, const std::vector<int>& a, bool k) { return x.max(a, k); }},
        {"min", [](const Tensor& x, const std::vector<int>& a, bool k) { return x.min(a, k); }},
        {"var", [](const Tensor& x, const std::vector<int>& a, bool k) { return x.var(a, k); }},
        {"std", [](const Tensor& x, const std::vector<int>& a, bool k) { return x.std(a, k); }},
    };
    for (auto& [rn, rf] : reds) {
      for (auto& [an, axes] : axis_sets)
        t[rn + "_" + an] = unary([rf, axes](auto& x) { return rf(x, axes, false); });
      for (auto& [an, axes] : keep_sets)
        t[rn + "_" + an + "_keep"] = unary([rf, axes](auto& x) { return rf(x, axes, true); });
    }
    t["max_allneg_1"] = unary([](auto& x) { return x.max({1}); });
    t["min_allpos_0"] = unary([](auto& x) { return x.min({0}); });
    t["sum_odd_5x7_1"] = unary([](auto& x) { return x.sum({1}); });
    t["var_corr0_1"] = unary([](auto& x) { return x.var({1}, false, 0); });
    t["std_corr0_all"] = unary([](auto& x) { return x.std({}, false, 0); });
    t["var_single_corr1"] = unary([](auto& x) { return x.var({1}, false, 1); });
    t["sum_big_100000"] = unary([](auto& x) { return x.sum(); });
    t["mean_32x1000_1"] = unary([](auto& x) { return x.mean({1}); });
    t["max_32x1000_0"] = unary([](auto& x) { return x.max({0}); });
    t["sum_empty_0x3_0"] = unary([](auto& x) { return x.sum({0}); });
    t["argmax_0"] = unary([](auto& x) { return x.argmax(0); });
    t["argmax_1"] = unary([](auto& x) { return x.argmax(1); });
    t["argmax_2"] = unary([](auto& x) { return x.argmax(2); });
    t["argmax_m1"] = unary([](auto& x) { return x.argmax(-1); });
    t["argmax_1_keep"] = unary([](auto& x) { return x.argmax(1, true); });
    t["argmax_rand_7x13_1"] = unary([](auto& x) { return x.argmax(1); });

    // movement
    t["reshape_4_m1"] = unary([](auto& x) { return x.reshape({4, -1}); });
    t["reshape_flat"] = unary([](auto& x) { return x.reshape({24}); });
    t["reshape_m1_2"] = unary([](auto& x) { return x.reshape({-1, 2}); });
    t["reshape_of_transpose"] = unary([](auto& x) { return x.transpose(0, 1).reshape({-1}); });
    t["permute_201"] = unary([](auto& x) { return x.permute({2, 0, 1}); });
    t["permute_021"] = unary([](auto& x) { return x.permute({0, 2, 1}); });
    t["transpose_default"] = unary([](auto& x) { return x.transpose(); });
    t["transpose_02"] = unary([](auto& x) { return x.transpose(0, 2); });
    t["expand_3x1_3x4"] = unary([](auto& x) { return x.expand({3, 4}); });
    t["expand_4_2x3x4"] = unary([](auto& x) { return x.expand({2, 3, 4}); });
    t["expand_keep_m1"] = unary([](auto& x) { return x.expand({-1, 5}); });
    t["pad_2d"] = unary([](auto& x) { return x.pad({{1, 2}, {0, 1}}); });
    t["pad_3d_value"] = unary([](auto& x) { return x.pad({{0, 0}, {2, 1}, {1, 3}}, -1.5); });
    t["slice_step2"] = unary([](auto& x) { return x.slice(1, 1, 7, 2); });
    t["slice_step3"] = unary([](auto& x) { return x.slice(1, 0, 9, 3); });
    t["slice_negidx"] = unary([](auto& x) { return x.slice(1, -5, -1); });
    t["slice_clamp"] = unary([](auto& x) { return x.slice(1, 1, 100); });
    t["slice_axis0_neg"] = unary([](auto& x) { return x.slice(-2, -3, 4); });
    t["slice_negstep"] = unary([](auto& x) { return x.slice(1, 7, -10, -2); });
    t["slice_1d_2_7_2"] = unary([](auto& x) { return x.slice(0, 2, 7, 2); });
    t["slice_1d_2_8_2"] = unary([](auto& x) { return x.slice(0, 2, 8, 2); });
    t["slice_1d_1_8_3"] = unary([](auto& x) { return x.slice(0, 1, 8, 3); });
    t["flip_0"] = unary([](auto& x) { return x.flip({0}); });
    t["flip_02"] = unary([](auto& x) { return x.flip({0, 2}); });
    t["flip_m1"] = unary([](auto& x) { return x.flip({-1}); });
    t["cat_0"] = [](V& in, const std::string&) { return V{Tensor::cat(in, 0)}; };
    t["cat_1"] = [](V& in, const std::string&) { return V{Tensor::cat(in, 1)}; };
    t["cat_m1_3d"] = [](V& in, const std::string&) { return V{Tensor::cat(in, -1)}; };
    t["cat_single"] = [](V& in, const std::string&) { return V{Tensor::cat(in, 0)}; };
    t["stack_0"] = [](V& in, const std::string&) { return V{Tensor::stack(in, 0)}; };
    t["stack_1"] = [](V& in, const std::string&) { return V{Tensor::stack(in, 1)}; };
    t["stack_m1"] = [](V& in, const std::string&) { return V{Tensor::stack(in, -1)}; };
    t["squeeze_1"] = unary([](auto& x) { return x.squeeze(1); });
    t["squeeze_m2"] = unary([](auto& x) { return x.squeeze(-2); });
    t["unsqueeze_0"] = unary([](auto& x) { return x.unsqueeze(0); });
    t["unsqueeze_m1"] = unary([](auto& x) { return x.unsqueeze(-1); });
    t["flatten_all"] = unary([](auto& x) { return x.flatten(); });
    t["flatten_1"] = unary([](auto& x) { return x.flatten(1); });
    t["flatten_0_1"] = unary([](auto& x) { return x.flatten(0, 1); });
    t["chain_add_permute_reshape_slice"] =
        binary([](auto& a, auto& b) { return (a + b).permute({2, 0, 1}).reshape({4, 6}).slice(1, 1, 5, 2); });
    t["chain_transpose_pad_flip_exp"] =
        unary([](auto& x) { return x.transpose(0, 1).pad({{1, 0}, {0, 2}}, 0.5).flip({0}).exp(); });
    t["chain_expand_permute_add"] =
        binary([](auto& a, auto& b) { return a.expand({3, 4}).permute({1, 0}) + b; });
    t["chain_slice_slice_permute"] =
        unary([](auto& x) { return x.permute({1, 0}).slice(0, 1, 8, 2).slice(1, -4, 6); });
    t["chain_reduce_expand_mul"] =
        unary([](auto& x) { return x.sum({1}, true).expand({3, 4}).transpose(0, 1) * x.transpose(0, 1); });
    t["chain_pad_reshape_sum"] =
        unary([](auto& x) { return x.pad({{1, 1}, {0, 1}}, 1.0).reshape({2, 8}).sum({0}); });
    t["chain_flip_cat_slice"] =
        binary([](auto& a, auto& b) { return Tensor::cat({a.flip({1}), b * 2.0}, 1).slice(1, 2, 7, 2); });
    t["chain_stack_permute_flatten_relu"] =
        binary([](auto& a, auto& b) { return Tensor::stack({a, b}, 0).permute({2, 1, 0}).flatten(0, 1).relu(); });

    // matmul, linear
    auto mm = [](auto& a, auto& b) { return a.matmul(b); };
    for (auto n : {"matmul_1d_1d", "matmul_2d", "matmul_1d_2d", "matmul_2d_1d", "matmul_batched_2d",
                   "matmul_batched_bcast", "matmul_17x33x5", "matmul_1x1x1", "matmul_128x96x80"})
      t[n] = binary(mm);
    t["matmul_transposed_a"] = binary([](auto& a, auto& b) { return a.transpose(0, 1).matmul(b); });
    t["matmul_transposed_b"] = binary([](auto& a, auto& b) { return a.matmul(b.transpose(0, 1)); });
    t["matmul_computed_inputs"] = binary([](auto& a, auto& b) {
      return (a * 2.0).relu().matmul((b + 1.0).transpose(0, 1).transpose(0, 1));
    });
    t["linear_bias"] = [](V& in, const std::string&) { return V{in[0].linear(in[1], in[2])}; };
    t["linear_nobias"] = [](V& in, const std::string&) { return V{in[0].linear(in[1])}; };
    t["linear_3d"] = [](V& in, const std::string&) { return V{in[0].linear(in[1], in[2])}; };

    // convolution
    auto conv = [](tl::Conv2dOptions o) {
      return OpFn([o](V& in, const std::string&) { return V{in[0].conv2d(in[1], in.size() > 2 ? in[2] : Tensor(), o)}; });
    };
    auto opts = [](int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t g) {
      tl::Conv2dOptions o;
      o.stride_h = sh, o.stride_w = sw, o.pad_h = ph, o.pad_w = pw, o.dilation_h = d, o.dilation_w = d, o.groups = g;
      return o;
    };
    t["conv2d_basic"] = conv(opts(1, 1, 0, 0, 1, 1));
    t["conv2d_stride2_pad1"] = conv(opts(2, 2, 1, 1, 1, 1));
    t["conv2d_dilation2"] = conv(opts(1, 1, 2, 2, 2, 1));
    t["conv2d_groups2"] = conv(opts(1, 1, 0, 0, 1, 2));
    t["conv2d_depthwise"] = conv(opts(1, 1, 1, 1, 1, 4));
    t["conv2d_1x1"] = conv(opts(1, 1, 0, 0, 1, 1));
    t["conv2d_asym"] = conv(opts(2, 1, 1, 0, 1, 1));
    t["conv2d_5x5_odd"] = conv(opts(3, 3, 2, 2, 1, 1));
    t["avg_pool_k2s2"] = unary([](auto& x) { return x.avg_pool2d(2, 2); });
    t["avg_pool_k3s2p1"] = unary([](auto& x) { return x.avg_pool2d(3, 2, 1); });
    t["avg_pool_k3_default_stride"] = unary([](auto& x) { return x.avg_pool2d(3); });
    t["avg_pool_k2_odd"] = unary([](auto& x) { return x.avg_pool2d(2, 2); });
    t["max_pool_k2s2"] = unary([](auto& x) { return x.max_pool2d(2, 2); });
    t["max_pool_k3s2p1_neg"] = unary([](auto& x) { return x.max_pool2d(3, 2, 1); });
    t["max_pool_k3s1"] = unary([](auto& x) { return x.max_pool2d(3, 1); });
    t["max_pool_k2_odd"] = unary([](auto& x) { return x.max_pool2d(2); });
    t["adaptive_avg_8_to_4"] = unary([](auto& x) { return x.adaptive_avg_pool2d(4, 4); });
    t["adaptive_avg_7_to_3"] = unary([](auto& x) { return x.adaptive_avg_pool2d(3, 3); });
    t["adaptive_avg_global"] = unary([](auto& x) { return x.adaptive_avg_pool2d(1, 1); });
    t["adaptive_avg_10x7_to_4x3"] = unary([](auto& x) { return x.adaptive_avg_pool2d(4, 3); });

    // normalisation, softmax, losses
    auto bn = [](bool training) {
      return OpFn([training](V& in, const std::string&) {
        Tensor rm = in[3], rv = in[4];
        Tensor y = in[0].batch_norm(in[1], in[2], rm, rv, training, 0.1, 1e-5);
        return V{y, rm, rv};
      });
    };
    t["batch_norm_infer"] = bn(false);
    t["batch_norm_train"] = bn(true);
    t["softmax_last"] = unary([](auto& x) { return x.softmax(-1); });
    t["softmax_axis0"] = unary([](auto& x) { return x.softmax(0); });
    t["softmax_axis1_3d"] = unary([](auto& x) { return x.softmax(1); });
    t["softmax_large"] = unary([](auto& x) { return x.softmax(-1); });
    t["softmax_1000"] = unary([](auto& x) { return x.softmax(-1); });
    t["log_softmax_last"] = unary([](auto& x) { return x.log_softmax(-1); });
    t["log_softmax_axis0"] = unary([](auto& x) { return x.log_softmax(0); });
    t["log_softmax_axis1_3d"] = unary([](auto& x) { return x.log_softmax(1); });
    t["log_softmax_large"] = unary([](auto& x) { return x.log_softmax(-1); });
    t["log_softmax_1000"] = unary([](auto& x) { return x.log_softmax(-1); });
    t["cross_entropy"] = binary([](auto& a, auto& b) { return a.cross_entropy(b); });
    t["cross_entropy_large"] = binary([](auto& a, auto& b) { return a.cross_entropy(b); });
    return t;
  }();
  return table;
}

// The family a case belongs to, from its name (order matters: max_pool
// before max, log_softmax before the rest).
std::string family(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  for (auto p : {"conv2d_", "avg_pool_", "max_pool_", "adaptive_"})
    if (starts(p)) return "conv_pool";
  for (auto p : {"batch_norm_", "softmax_", "log_softmax_", "cross_entropy"})
    if (starts(p)) return "norm_softmax";
  for (auto p : {"matmul_", "linear_"})
    if (starts(p)) return "matmul";
  for (auto p : {"zeros_", "ones_", "full_", "arange_", "eye_"})
    if (starts(p)) return "creation";
  for (auto p : {"sum_", "mean_", "max_", "min_", "var_", "std_", "argmax_"})
    if (starts(p)) return "reduce";
  for (auto p : {"reshape_", "permute_", "transpose_", "expand_", "pad_", "slice_", "flip_", "cat_", "stack_",
                 "squeeze_", "unsqueeze_", "flatten_", "chain_"})
    if (starts(p)) return "movement";
  if (name.size() > 5 && (name.ends_with("_edge") || name.ends_with("_rand"))) return "unary";
  for (auto p : {"neg_", "exp_", "cast_", "from_ints_"})
    if (starts(p)) return "unary";
  for (auto p : {"add_", "sub_", "mul_", "div_", "maximum_", "minimum_", "pow_", "rsub_", "rdiv_", "radd_", "eq_",
                 "ne_", "lt_", "le_", "gt_", "ge_", "where_"})
    if (starts(p)) return "binary";
  return "";
}

const std::vector<tltest::GoldenCase>& golden_cases() {
  static const auto cases = tltest::read_golden(tltest::source_dir() + "/tests/data/golden/ops.bin");
  return cases;
}

struct Outcome {
  std::vector<tl::Shape> shapes;
  std::vector<std::vector<float>> values;
};

Outcome run_case(const tltest::GoldenCase& c, const std::string& device) {
  V inputs;
  for (auto& g : c.inputs) inputs.push_back(tltest::make_tensor(g, device));
  V outs = op_table().at(c.name)(inputs, device);
  Outcome o;
  for (auto& t : outs) {
    o.shapes.push_back(t.shape());
    o.values.push_back(t.to_vector());
  }
  return o;
}

// Kernel launches made while `f` runs.
std::vector<tl::ProfileRecord> launches(const std::function<void()>& f) {
  tl::ProfileCapture cap;
  f();
  return cap.records();
}

std::string kernel_names(const std::vector<tl::ProfileRecord>& recs) {
  std::string s;
  for (auto& r : recs) s += (s.empty() ? "" : ", ") + r.kernel->name;
  return s;
}

std::vector<float> ramp(size_t n, float scale = 0.37f, float offset = -1.1f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * float((i * 7919) % 29) / 29.0f;
  return v;
}

}  // namespace

class TestOps : public QObject {
  Q_OBJECT

 private:
  std::map<std::string, Outcome> cpu_results_;

  static void add_device_rows() {
    QTest::addColumn<QString>("device");
    for (auto& d : tltest::available_devices()) QTest::newRow(d.c_str()) << QString::fromStdString(d);
  }

 private slots:
  void initTestCase() {
    auto devs = tltest::available_devices();
    QVERIFY2(!devs.empty(), "no device available");
    QCOMPARE(devs.front(), std::string("cpu"));
    std::string list;
    for (auto& d : devs) list += d + " ";
    qInfo("devices: %s; golden cases: %zu", list.c_str(), golden_cases().size());
  }

  // The golden file and the C++ table describe the same cases.
  void table_matches_golden_file() {
    std::set<std::string> in_file;
    for (auto& c : golden_cases()) {
      in_file.insert(c.name);
      QVERIFY2(op_table().count(c.name), ("golden case without a C++ implementation: " + c.name).c_str());
    }
    for (auto& [name, fn] : op_table())
      QVERIFY2(in_file.count(name), ("C++ case missing from ops.bin (rerun make_golden.py): " + name).c_str());
  }

  // The comparator must be able to fail, or every green row below means nothing.
  void comparator_rejects_wrong_values() {
    std::vector<float> ref = {1.0f, -2.0f, 0.0f, NAN, INFINITY};
    QVERIFY(tltest::all_close(ref, ref, 1e-4, 1e-5));
    auto off = ref;
    off[1] = -2.001f;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    off = ref;
    off[3] = 0.0f;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    off = ref;
    off[4] = -INFINITY;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    off = ref;
    off[2] = NAN;
    QVERIFY(!tltest::all_close(off, ref, 1e-4, 1e-5));
    QVERIFY(!tltest::all_close({1.0f}, ref, 1e-4, 1e-5));
    // and a real computation compared with a corrupted reference
    for (auto& gc : golden_cases()) {
      if (gc.name != "exp_rand") continue;
      Outcome o = run_case(gc, "cpu");
      auto bad = gc.outputs[0].data;
      bad[5] *= 1.001f;
      QVERIFY(tltest::all_close(o.values[0], gc.outputs[0].data, gc.rtol, gc.atol));
      QVERIFY(!tltest::all_close(o.values[0], bad, gc.rtol, gc.atol));
    }
  }

  // One test function per family: Qt's watchdog limits each function (all its
  // rows) to 5 minutes, and a failure in one family does not hide the others.
  void golden_creation_data() { golden_rows("creation"); }
  void golden_creation() { golden(); }
  void golden_unary_data() { golden_rows("unary"); }
  void golden_unary() { golden(); }
  void golden_binary_data() { golden_rows("binary"); }
  void golden_binary() { golden(); }
  void golden_reduce_data() { golden_rows("reduce"); }
  void golden_reduce() { golden(); }
  void golden_movement_data() { golden_rows("movement"); }
  void golden_movement() { golden(); }
  void golden_matmul_data() { golden_rows("matmul"); }
  void golden_matmul() { golden(); }
  void golden_conv_pool_data() { golden_rows("conv_pool"); }
  void golden_conv_pool() { golden(); }
  void golden_norm_softmax_data() { golden_rows("norm_softmax"); }
  void golden_norm_softmax() { golden(); }

  void every_case_has_a_family() {
    for (auto& c : golden_cases()) QVERIFY2(!family(c.name).empty(), c.name.c_str());
  }

 private:
  static void golden_rows(const std::string& fam) {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    auto& cases = golden_cases();
    for (auto& d : tltest::available_devices())
      for (size_t i = 0; i < cases.size(); ++i)
        if (family(cases[i].name) == fam)
          QTest::newRow((cases[i].name + "@" + d).c_str()) << QString::fromStdString(d) << int(i);
  }

  void golden() {
    QFETCH(QString, device);
    QFETCH(int, index);
    const std::string dev = device.toStdString();
    const auto& c = golden_cases()[size_t(index)];
    QVERIFY2(op_table().count(c.name), "no C++ implementation for this case");
    Outcome o;
    try {
      o = run_case(c, dev);
    } catch (const std::exception& e) {
      QFAIL((std::string("threw: ") + e.what()).c_str());
    }
    QCOMPARE(o.values.size(), c.outputs.size());
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const auto& ref = c.outputs[k];
      QVERIFY2(o.shapes[k] == ref.shape, ("output " + std::to_string(k) + " shape " + tl::shape_str(o.shapes[k]) +
                                          ", expected " + tl::shape_str(ref.shape))
                                             .c_str());
      std::string why;
      QVERIFY2(tltest::all_close(o.values[k], ref.data, c.rtol, c.atol, &why),
               ("output " + std::to_string(k) + " vs reference: " + why).c_str());
    }
    if (dev == "cpu") {
      cpu_results_[c.name] = o;
      return;
    }
    // Same case on cpu, compared by the same rule (cpu ran first unless narrowed).
    auto it = cpu_results_.find(c.name);
    Outcome cpu = it != cpu_results_.end() ? it->second : run_case(c, "cpu");
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      std::string why;
      QVERIFY2(tltest::all_close(o.values[k], cpu.values[k], c.rtol, c.atol, &why),
               ("output " + std::to_string(k) + " vs cpu: " + why).c_str());
    }
  }

  // ---- statistical creation ops and dropout ----
 private slots:
  void random_creation_data() { add_device_rows(); }
  void random_creation() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t n = 100000;
    tl::Generator g1(1234), g2(1234), g3(99);
    auto u = Tensor::rand({n}, g1, dev).to_vector();
    auto u_again = Tensor::rand({n}, g2, dev).to_vector();
    auto u_other = Tensor::rand({n}, g3, dev).to_vector();
    QCOMPARE(int64_t(u.size()), n);
    QVERIFY(u == u_again);
    QVERIFY(u != u_other);
    double mean = 0, sq = 0;
    float lo = 1, hi = 0;
    for (float v : u) mean += v, sq += double(v) * v, lo = std::min(lo, v), hi = std::max(hi, v);
    mean /= n;
    double var = sq / n - mean * mean;
    QVERIFY2(lo >= 0.0f && hi < 1.0f, "rand outside [0, 1)");
    QVERIFY2(std::fabs(mean - 0.5) < 0.01, qPrintable(QString("rand mean %1").arg(mean)));
    QVERIFY2(std::fabs(var - 1.0 / 12) < 0.005, qPrintable(QString("rand var %1").arg(var)));

    tl::Generator g4(7), g5(7);
    auto z = Tensor::randn({n}, g4, dev).to_vector();
    QVERIFY(z == Tensor::randn({n}, g5, dev).to_vector());
    mean = 0, sq = 0;
    for (float v : z) mean += v, sq += double(v) * v;
    mean /= n;
    var = sq / n - mean * mean;
    QVERIFY2(std::fabs(mean) < 0.02, qPrintable(QString("randn mean %1").arg(mean)));
    QVERIFY2(std::fabs(std::sqrt(var) - 1.0) < 0.02, qPrintable(QString("randn std %1").arg(std::sqrt(var))));

    tl::Generator g6(5);
    auto w = Tensor::uniform({n}, -3.0, 5.0, g6, dev).to_vector();
    mean = std::accumulate(w.begin(), w.end(), 0.0) / n;
    QVERIFY(*std::min_element(w.begin(), w.end()) >= -3.0f && *std::max_element(w.begin(), w.end()) < 5.0f);
    QVERIFY2(std::fabs(mean - 1.0) < 0.05, qPrintable(QString("uniform mean %1").arg(mean)));
  }

  void same_seed_same_values_across_devices() {
    auto devs = tltest::available_devices();
    tl::Generator ref_gen(42);
    auto ref = Tensor::randn({257}, ref_gen, "cpu").to_vector();
    for (auto& d : devs) {
      tl::Generator g(42);
      QVERIFY2(Tensor::randn({257}, g, d).to_vector() == ref, d.c_str());
    }
  }

  void dropout_data() { add_device_rows(); }
  void dropout() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    const int64_t n = 20000;
    auto data = ramp(size_t(n), 2.0f, 0.5f);  // all positive, so a zero means dropped
    Tensor x = Tensor::from_data(data, {n}, dev);
    tl::Generator g(3);
    QVERIFY(x.dropout(0.0, true, g).to_vector() == data);
    QVERIFY(x.dropout(0.5, false, g).to_vector() == data);
    auto y = x.dropout(0.5, true, g).to_vector();
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y[size_t(i)] == 0.0f) {
        ++dropped;
        continue;
      }
      QVERIFY2(std::fabs(y[size_t(i)] - 2.0f * data[size_t(i)]) <= 1e-6f * std::fabs(data[size_t(i)]) + 1e-6f,
               qPrintable(QString("kept value %1 not scaled by 2 (was %2)").arg(y[size_t(i)]).arg(data[size_t(i)])));
    }
    double frac = double(dropped) / double(n);
    QVERIFY2(std::fabs(frac - 0.5) < 0.02, qPrintable(QString("dropped fraction %1").arg(frac)));
    tl::Generator a(11), b(11);
    QVERIFY(x.dropout(0.3, true, a).to_vector() == x.dropout(0.3, true, b).to_vector());
  }

  // ---- laziness, fusion, caching ----
  void elementwise_chain_is_one_kernel_data() { add_device_rows(); }
  void elementwise_chain_is_one_kernel() {
    QFETCH(QString, device);
    auto data = ramp(64, 3.0f, 0.1f);
    Tensor x = Tensor::from_data(data, {8, 8}, device.toStdString());
    x.realize();
    Tensor y;
    auto recs = launches([&] { (y = ((x * 2.0 + 1.0).exp().sqrt() - 3.0)).realize(); });
    QVERIFY2(recs.size() == 1, ("kernels: " + kernel_names(recs)).c_str());
    auto v = y.to_vector();
    for (size_t i = 0; i < v.size(); ++i)
      QVERIFY(std::fabs(v[i] - (std::sqrt(std::exp(2.0 * data[i] + 1.0)) - 3.0)) < 1e-4 * std::exp(data[i] + 0.5));
  }

  void softmax_is_at_most_three_kernels_data() { add_device_rows(); }
  void softmax_is_at_most_three_kernels() {
    QFETCH(QString, device);
    Tensor x = Tensor::from_data(ramp(4 * 33), {4, 33}, device.toStdString());
    x.realize();
    Tensor y;
    auto recs = launches([&] { (y = x.softmax(-1)).realize(); });
    QVERIFY2(!recs.empty() && recs.size() <= 3, ("kernels: " + kernel_names(recs)).c_str());
    auto v = y.to_vector();
    for (int r = 0; r < 4; ++r)
      QVERIFY(std::fabs(std::accumulate(v.begin() + r * 33, v.begin() + (r + 1) * 33, 0.0) - 1.0) < 1e-5);
  }

  void nothing_runs_until_read_data() { add_device_rows(); }
  void nothing_runs_until_read() {
    QFETCH(QString, device);
    Tensor x = Tensor::from_data(ramp(24), {2, 3, 4}, device.toStdString());
    x.realize();
    Tensor y;
    auto recs = launches([&] { y = (x * x).sum({1}).exp().permute({1, 0}) + 1.0; });
    QVERIFY2(recs.empty(), ("ran before any read: " + kernel_names(recs)).c_str());
    std::vector<float> v;
    recs = launches([&] { v = y.to_vector(); });
    QVERIFY(!recs.empty());
    QCOMPARE(v.size(), size_t(8));
    // a second read of a realized tensor runs nothing
    recs = launches([&] { v = y.to_vector(); });
    QVERIFY2(recs.empty(), ("re-ran on second read: " + kernel_names(recs)).c_str());
  }

  void second_run_compiles_nothing_data() { add_device_rows(); }
  void second_run_compiles_nothing() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    auto compute = [&] {
      Tensor a = Tensor::from_data(ramp(6 * 5), {6, 5}, dev);
      Tensor b = Tensor::from_data(ramp(5 * 3, 0.5f), {5, 3}, dev);
      return (a.matmul(b).relu() + 0.25).log_softmax(-1).sum({0});
    };
    std::vector<float> first, second;
    auto recs1 = launches([&] { first = compute().to_vector(); });
    auto recs2 = launches([&] { second = compute().to_vector(); });
    QVERIFY(!recs1.empty());
    QCOMPARE(recs2.size(), recs1.size());
    QVERIFY(first == second);
    for (size_t i = 0; i < recs2.size(); ++i) {
      QVERIFY2(recs2[i].kernel->cache_hit || recs2[i].kernel == recs1[i].kernel,
               ("recompiled on the second run: " + recs2[i].kernel->name).c_str());
      QCOMPARE(recs2[i].kernel->source, recs1[i].kernel->source);
    }
  }

  // A compile error names the problem, carries the compiler's log, and the
  // session keeps working afterwards.
  void compile_error_is_reported_data() { add_device_rows(); }
  void compile_error_is_reported() {
    QFETCH(QString, device);
    const std::string dev = device.toStdString();
    auto& d = tl::Registry::instance().get(dev);
    bool threw = false;
    try {
      d.compile("tl_broken_kernel", "this is not C at all { int x = ; }\n");
    } catch (const tl::CompileError& e) {
      threw = true;
      QVERIFY2(!e.log.empty(), "CompileError without a build log");
      QVERIFY(e.source.find("not C at all") != std::string::npos);
      QVERIFY(std::string(e.what()).size() > 0);
    }
    QVERIFY2(threw, "bad source compiled without a CompileError");
    Tensor x = Tensor::from_data({1, 2, 3}, {3}, dev);
    auto v = (x * 3.0 + 1.0).to_vector();
    QVERIFY((v == std::vector<float>{4, 7, 10}));
  }
};

QTEST_GUILESS_MAIN(TestOps)
#include "test_ops.moc"
