// The op table shared by tests/test_ops.cpp (Qt Test) and `tinylens-cli
// selftest` (no Qt): one C++ implementation per case of
// tests/data/golden/ops.bin, written by scripts/make_golden.py.
#pragma once
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "tests/golden.h"

namespace tlops {

using tl::Tensor;
using V = std::vector<Tensor>;
using OpFn = std::function<V(V& in, const std::string& device)>;


inline OpFn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](V& in, const std::string&) { return V{f(in[0])}; };
}
inline OpFn binary(std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return [f](V& in, const std::string&) { return V{f(in[0], in[1])}; };
}
inline OpFn creation(std::function<Tensor(const std::string&)> f) {
  return [f](V&, const std::string& dev) { return V{f(dev)}; };
}

// One entry per case of make_golden.py's op_cases(), same names.
inline const std::map<std::string, OpFn>& op_table() {
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
    // large enough for the grouped (work-group) form on devices with local memory
    t["sum_1000"] = unary([](auto& x) { return x.sum(); });
    t["max_3x1000_1_nan"] = unary([](auto& x) { return x.max({1}); });
    t["mean_gap_1x1280x7x7"] = unary([](auto& x) { return x.mean({2, 3}); });
    t["sum_7x7x1280_all"] = unary([](auto& x) { return x.sum(); });
    t["sum_nhw_8x16x9x9_023"] = unary([](auto& x) { return x.sum({0, 2, 3}); });
    t["max_nhw_8x16x9x9_023"] = unary([](auto& x) { return x.max({0, 2, 3}); });
    t["mean_nhw_4x24x7x7_023_keep"] = unary([](auto& x) { return x.mean({0, 2, 3}, true); });
    t["sum_3x257_1"] = unary([](auto& x) { return x.sum({1}); });
    t["sum_2x512_1"] = unary([](auto& x) { return x.sum({1}); });
    t["max_5x33_1"] = unary([](auto& x) { return x.max({1}); });
    t["min_97x4_0"] = unary([](auto& x) { return x.min({0}); });
    t["max_allneg_2x300_1"] = unary([](auto& x) { return x.max({1}); });
    t["argmax_3x1000_1"] = unary([](auto& x) { return x.argmax(1); });
    t["sum_1x1_all"] = unary([](auto& x) { return x.sum(); });
    t["sum_1x1000_0"] = unary([](auto& x) { return x.sum({0}); });

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
                   "matmul_batched_bcast", "matmul_17x33x5", "matmul_1x1x1", "matmul_128x96x80",
                   "matmul_packed_16x32x700", "matmul_packed_96x16x500", "matmul_packed_120x300x49",
                   "matmul_packed_37x600x70", "matmul_packed_5x64x33"})
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
    t["conv2d_1x1_batch3"] = conv(opts(1, 1, 0, 0, 1, 1));
    t["conv2d_3x3_pad1_batch2"] = conv(opts(1, 1, 1, 1, 1, 1));
    t["conv2d_dw3x3_s1"] = conv(opts(1, 1, 1, 1, 1, 16));
    t["conv2d_dw3x3_s2"] = conv(opts(2, 2, 1, 1, 1, 16));
    t["conv2d_dw5x5_s1"] = conv(opts(1, 1, 2, 2, 1, 24));
    t["conv2d_dw5x5_s2"] = conv(opts(2, 2, 2, 2, 1, 24));
    t["conv2d_1x1_channel_scale"] = [](V& in, const std::string&) { return V{(in[0] * in[1].sigmoid()).conv2d(in[2], in[3])}; };
    t["conv2d_1x1_channel_scale_shared"] = t["conv2d_1x1_channel_scale"];
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
inline std::string family(const std::string& name) {
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

struct Outcome {
  std::vector<tl::Shape> shapes;
  std::vector<std::vector<float>> values;
};

inline Outcome run_case(const tltest::GoldenCase& c, const std::string& device) {
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

}  // namespace tlops
