// Gradient checks: for every differentiable op, loss = (op(inputs) * W).sum()
// with fixed random W; backward() must agree with central finite differences
// of the same loss (evaluated in double from the float32 outputs). Inputs stay
// away from kinks (relu at 0, clip bounds, ties of max). Also: the autograd
// switches (requires_grad, NoGrad, detach, with_gradient_of), accumulation,
// nn::Conv2d against Tensor::conv2d, and golden gradients from PyTorch for
// conv2d and batch_norm (tests/data/golden/grad.bin).
#include <QtTest/QtTest>

#include <cmath>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/nn/layers.h"
#include "core/profile.h"
#include "core/depthwise.h"
#include "core/tensor.h"
#include "tests/golden.h"
#include "tests/testing.h"

using tl::Tensor;
using V = std::vector<Tensor>;

namespace {

// How an input's values are drawn.
enum class Kind {
  smooth,    // U[-2, 2]
  positive,  // U[0.5, 2]: log, sqrt, reciprocal, divisors, pow bases
  distinct,  // shuffled values 0.17 apart, none within 0.03 of a multiple of 0.5:
             // no ties for max/min/max_pool, no kinks of relu/abs/clip/relu6
  fixed,     // smooth but not differentiated (conditions, running means)
  fixed_positive,  // positive, not differentiated (running variances)
  targets,   // int32 class labels, not differentiated
};

struct GradInput {
  GradInput(tl::Shape s, Kind k = Kind::smooth, double off = 0) : shape(std::move(s)), kind(k), offset(off) {}
  tl::Shape shape;
  Kind kind;
  double offset;                // shifts `distinct` values (keeps two operands apart)
  std::vector<int32_t> labels;  // for Kind::targets
  bool differentiable() const { return kind == Kind::smooth || kind == Kind::positive || kind == Kind::distinct; }
};

struct GradCase {
  std::string name;
  std::vector<GradInput> inputs;
  std::function<Tensor(const V&)> f;
  double tol = 1.0;  // multiplies the default tolerance
};

// Small deterministic generator, independent of the core's Generator so a
// broken Generator cannot hide a broken gradient.
struct Lcg {
  uint64_t s;
  explicit Lcg(const std::string& seed) : s(std::hash<std::string>{}(seed) | 1) {}
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(s >> 11) / double(1ULL << 53);
  }
};

std::vector<float> draw(const GradInput& in, Lcg& r) {
  size_t n = size_t(tl::numel(in.shape));
  std::vector<float> v(n);
  switch (in.kind) {
    case Kind::smooth:
    case Kind::fixed:
      for (auto& x : v) x = float(r.next() * 4 - 2);
      break;
    case Kind::positive:
    case Kind::fixed_positive:
      for (auto& x : v) x = float(0.5 + r.next() * 1.5);
      break;
    case Kind::distinct: {
      for (size_t i = 0; i < n; ++i) {
        double x = (double(i) - double(n / 2)) * 0.17 + 0.05 + in.offset;
        double k = std::round(x * 2) / 2;
        if (std::fabs(x - k) < 0.03) x += 0.06;
        v[i] = float(x);
      }
      for (size_t i = n; i > 1; --i) std::swap(v[i - 1], v[size_t(r.next() * double(i))]);
      break;
    }
    case Kind::targets:
      for (size_t i = 0; i < n; ++i) v[i] = float(in.labels[i]);
      break;
  }
  return v;
}

Tensor make(const GradInput& in, const std::vector<float>& v, const std::string& dev) {
  if (in.kind == Kind::targets) return Tensor::from_ints(in.labels, in.shape, dev);
  return Tensor::from_data(v, in.shape, dev);
}

tl::Conv2dOptions conv_opts(int64_t stride, int64_t pad, int64_t dilation, int64_t groups) {
  tl::Conv2dOptions o;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = pad;
  o.dilation_h = o.dilation_w = dilation;
  o.groups = groups;
  return o;
}

Tensor bn_train(const V& in) {
  // fresh running statistics each call, so repeated evaluations agree
  Tensor rm = Tensor::zeros({in[1].dim(0)}, tl::DType::f32, in[0].device());
  Tensor rv = Tensor::ones({in[1].dim(0)}, tl::DType::f32, in[0].device());
  return in[0].batch_norm(in[1], in[2], rm, rv, true, 0.1, 1e-5);
}

const std::vector<GradCase>& grad_cases() {
  static const std::vector<GradCase> cases = [] {
    std::vector<GradCase> c;
    const auto S = Kind::smooth, P = Kind::positive, D = Kind::distinct, X = Kind::fixed;
    auto u = [&](const std::string& name, Kind k, std::function<Tensor(const Tensor&)> f) {
      c.push_back({name, {{{3, 5}, k}}, [f](const V& in) { return f(in[0]); }});
    };
    u("neg", S, [](auto& x) { return -x; });
    u("exp", S, [](auto& x) { return x.exp(); });
    u("log", P, [](auto& x) { return x.log(); });
    u("sqrt", P, [](auto& x) { return x.sqrt(); });
    u("rsqrt", P, [](auto& x) { return x.rsqrt(); });
    u("reciprocal", P, [](auto& x) { return x.reciprocal(); });
    u("sin", S, [](auto& x) { return x.sin(); });
    u("cos", S, [](auto& x) { return x.cos(); });
    u("relu", D, [](auto& x) { return x.relu(); });
    u("relu6", D, [](auto& x) { return (x * 3.0).relu6(); });
    u("leaky_relu", D, [](auto& x) { return x.leaky_relu(0.1); });
    u("sigmoid", S, [](auto& x) { return x.sigmoid(); });
    u("tanh", S, [](auto& x) { return x.tanh(); });
    u("gelu", S, [](auto& x) { return x.gelu(); });
    u("silu", S, [](auto& x) { return x.silu(); });
    u("abs", D, [](auto& x) { return x.abs(); });
    u("sign_times_x", D, [](auto& x) { return x.sign() * x; });
    u("clip", D, [](auto& x) { return x.clip(-1.0, 1.0); });
    u("pow_scalar3", S, [](auto& x) { return x.pow(3.0); });
    u("pow_scalar_half", P, [](auto& x) { return x.pow(0.5); });
    u("add_double", S, [](auto& x) { return x + 2.0; });
    u("rsub_double", S, [](auto& x) { return 2.0 - x; });
    u("rdiv_double", P, [](auto& x) { return 1.0 / x; });
    u("mul_div_double", S, [](auto& x) { return x * 3.0 / 4.0; });
    u("maximum_double", D, [](auto& x) { return x.maximum(0.5); });
    u("minimum_double", D, [](auto& x) { return x.minimum(0.5); });
    u("cast_roundtrip_mul", S, [](auto& x) { return x.cast(tl::DType::f32) * x; });

    auto b = [&](const std::string& name, GradInput a, GradInput bb, std::function<Tensor(const Tensor&, const Tensor&)> f) {
      c.push_back({name, {a, bb}, [f](const V& in) { return f(in[0], in[1]); }});
    };
    b("add_bcast", {{3, 1}}, {{1, 4}}, [](auto& a, auto& bb) { return a + bb; });
    b("sub_bcast", {{3, 1}}, {{1, 4}}, [](auto& a, auto& bb) { return a - bb; });
    b("mul_bcast", {{3, 1}}, {{1, 4}}, [](auto& a, auto& bb) { return a * bb; });
    b("div_bcast", {{3, 1}}, {{1, 4}, P}, [](auto& a, auto& bb) { return a / bb; });
    b("maximum_bcast", {{3, 1}, D}, {{1, 4}, D, 0.085}, [](auto& a, auto& bb) { return a.maximum(bb); });
    b("minimum_bcast", {{3, 1}, D}, {{1, 4}, D, 0.085}, [](auto& a, auto& bb) { return a.minimum(bb); });
    b("pow_bcast", {{2, 3}, P}, {{3}}, [](auto& a, auto& bb) { return a.pow(bb); });
    b("add_2x3x4_4", {{2, 3, 4}}, {{4}}, [](auto& a, auto& bb) { return a + bb; });
    b("mul_scalar_tensor", {{2, 3}}, {{}}, [](auto& a, auto& bb) { return a * bb; });
    c.push_back({"where", {{{3, 1}, X}, {{1, 4}}, {{3, 4}}},
                 [](const V& in) { return Tensor::where(in[0].gt(Tensor::scalar(0, tl::DType::f32, in[0].device())), in[1], in[2]); }});

    auto r = [&](const std::string& name, Kind k, std::function<Tensor(const Tensor&)> f) {
      c.push_back({name, {{{2, 3, 4}, k}}, [f](const V& in) { return f(in[0]); }});
    };
    r("sum_1", S, [](auto& x) { return x.sum({1}); });
    r("sum_all", S, [](auto& x) { return x.sum(); });
    r("sum_02_keep", S, [](auto& x) { return x.sum({0, 2}, true); });
    r("mean_02", S, [](auto& x) { return x.mean({0, 2}); });
    r("mean_all", S, [](auto& x) { return x.mean(); });
    r("max_1", D, [](auto& x) { return x.max({1}); });
    r("max_all", D, [](auto& x) { return x.max(); });
    r("max_m1_keep", D, [](auto& x) { return x.max({-1}, true); });
    r("min_2", D, [](auto& x) { return x.min({2}); });
    r("min_01", D, [](auto& x) { return x.min({0, 1}); });
    r("var_1", S, [](auto& x) { return x.var({1}); });
    r("var_all_corr0", S, [](auto& x) { return x.var({}, false, 0); });
    r("std_02", S, [](auto& x) { return x.std({0, 2}); });
    r("std_2_keep", S, [](auto& x) { return x.std({2}, true); });

    r("reshape", S, [](auto& x) { return x.reshape({4, -1}); });
    r("permute", S, [](auto& x) { return x.permute({2, 0, 1}); });
    r("transpose", S, [](auto& x) { return x.transpose(0, 2); });
    r("pad", S, [](auto& x) { return x.pad({{1, 0}, {0, 2}, {1, 1}}, 0.5); });
    r("flip", S, [](auto& x) { return x.flip({0, 2}); });
    r("flatten", S, [](auto& x) { return x.flatten(1); });
    r("unsqueeze_squeeze", S, [](auto& x) { return x.unsqueeze(1).squeeze(1).unsqueeze(-1); });
    r("chain_movement", S, [](auto& x) { return (x * x).permute({2, 0, 1}).reshape({4, 6}).slice(1, 1, 5, 2); });
    r("slice_twice_pad", S, [](auto& x) { return x.slice(2, -3, 4).slice(1, 0, 3, 2).pad({{0, 0}, {1, 1}, {0, 0}}); });
    c.push_back({"slice_step", {{{4, 9}}}, [](const V& in) { return in[0].slice(1, 1, 8, 2); }});
    c.push_back({"slice_negidx", {{{4, 9}}}, [](const V& in) { return in[0].slice(1, -5, -1).slice(0, -3, 4); }});
    c.push_back({"expand", {{{3, 1}}}, [](const V& in) { return in[0].expand({2, 3, 4}); }});
    c.push_back({"squeeze", {{{3, 1, 4}}}, [](const V& in) { return in[0].squeeze(1); }});
    c.push_back({"cat", {{{2, 1}}, {{2, 3}}, {{2, 2}}}, [](const V& in) { return Tensor::cat(in, 1); }});
    c.push_back({"stack", {{{2, 3}}, {{2, 3}}}, [](const V& in) { return Tensor::stack(in, 1); }});

    b("matmul_2d", {{3, 4}}, {{4, 5}}, [](auto& a, auto& bb) { return a.matmul(bb); });
    b("matmul_1d", {{6}}, {{6}}, [](auto& a, auto& bb) { return a.matmul(bb); });
    b("matmul_batched_bcast", {{2, 3, 4}}, {{4, 2}}, [](auto& a, auto& bb) { return a.matmul(bb); });
    b("matmul_transposed", {{4, 3}}, {{5, 4}}, [](auto& a, auto& bb) { return a.transpose().matmul(bb.transpose()); });
    c.push_back({"linear", {{{3, 4}}, {{2, 4}}, {{2}}}, [](const V& in) { return in[0].linear(in[1], in[2]); }});

    auto conv = [&](const std::string& name, tl::Shape xs, tl::Shape ws, tl::Conv2dOptions o) {
      c.push_back({name, {{xs}, {ws}, {{ws[0]}}}, [o](const V& in) { return in[0].conv2d(in[1], in[2], o); }});
    };
    conv("conv2d_basic", {1, 2, 5, 5}, {2, 2, 3, 3}, conv_opts(1, 0, 1, 1));
    conv("conv2d_stride2_pad1", {1, 2, 5, 5}, {2, 2, 3, 3}, conv_opts(2, 1, 1, 1));
    conv("conv2d_dilation2", {1, 1, 6, 6}, {2, 1, 3, 3}, conv_opts(1, 1, 2, 1));
    conv("conv2d_groups2", {1, 4, 3, 4}, {4, 2, 2, 2}, conv_opts(1, 0, 1, 2));
    // A squeeze-and-excite's scale before a 1x1 convolution becomes a scale
    // of the weights (Tensor::conv2d): the gradients reach the image, the
    // scale (per image, and shared) and the weights through it.
    auto scaled = [&](const std::string& name, tl::Shape xs, tl::Shape ss, int64_t out) {
      c.push_back({name, {{xs}, {ss}, {{out, xs[1], 1, 1}}, {{out}}}, [](const V& in) {
                     return (in[0] * in[1]).conv2d(in[2], in[3], conv_opts(1, 0, 1, 1));
                   }});
    };
    scaled("conv2d_1x1_channel_scale", {1, 3, 3, 4}, {1, 3, 1, 1}, 2);
    scaled("conv2d_1x1_channel_scale_per_image", {2, 3, 2, 3}, {2, 3, 1, 1}, 4);
    scaled("conv2d_1x1_channel_scale_shared", {2, 3, 2, 2}, {1, 3, 1, 1}, 2);
    // nn::Conv2d lowers 3x3 convolutions on its own (batch inside the
    // columns, one GEMM per pass): its gradients against finite differences.
    auto module_conv = [&](const std::string& name, tl::Shape xs, tl::Shape ws, int64_t stride, int64_t pad) {
      c.push_back({name, {{xs}, {ws}, {{ws[0]}}}, [=](const V& in) {
                     tl::Generator gen(0);
                     tl::nn::Conv2d m(ws[1], ws[0], ws[2], gen, stride, pad);
                     m.weight = in[1];
                     m.bias = in[2];
                     return m(in[0]);
                   }});
    };
    module_conv("conv2d_module_pad1", {2, 2, 5, 4}, {3, 2, 3, 3}, 1, 1);
    module_conv("conv2d_module_stride2", {2, 2, 5, 5}, {2, 2, 3, 3}, 2, 1);
    module_conv("conv2d_module_k5_stride2", {1, 2, 7, 6}, {2, 2, 5, 5}, 2, 2);
    module_conv("conv2d_module_k2_stride2", {2, 1, 6, 5}, {3, 1, 2, 2}, 2, 0);
    // Depthwise: at batch 1 the cpu device computes the value with its
    // gathering GEMM while autograd differentiates the windows' sum (core/depthwise.cpp).
    auto depthwise = [&](const std::string& name, tl::Shape xs, int64_t k, int64_t stride, int64_t pad) {
      c.push_back({name, {{xs}, {{k * k, xs[1]}}, {{xs[1]}}}, [=](const V& in) {
                     tl::Window2d g;
                     g.kernel_h = g.kernel_w = k, g.stride_h = g.stride_w = stride;
                     g.pad_h = g.pad_w = {pad, pad};
                     return tl::depthwise_conv2d(in[0], in[1], in[2], g);
                   }});
    };
    depthwise("depthwise_3x3_batch1", {1, 3, 5, 6}, 3, 1, 1);
    depthwise("depthwise_5x5_stride2_batch1", {1, 2, 7, 6}, 5, 2, 2);
    depthwise("depthwise_3x3_stride2_batch2", {2, 2, 5, 5}, 3, 2, 1);
    auto pool = [&](const std::string& name, Kind k, std::function<Tensor(const Tensor&)> f) {
      c.push_back({name, {{{1, 2, 5, 5}, k}}, [f](const V& in) { return f(in[0]); }});
    };
    pool("avg_pool_k2s2", S, [](auto& x) { return x.avg_pool2d(2, 2); });
    pool("avg_pool_k3s2p1", S, [](auto& x) { return x.avg_pool2d(3, 2, 1); });
    pool("max_pool_k2s2", D, [](auto& x) { return x.max_pool2d(2, 2); });
    pool("max_pool_k3s2p1", D, [](auto& x) { return x.max_pool2d(3, 2, 1); });
    pool("adaptive_avg_3x2", S, [](auto& x) { return x.adaptive_avg_pool2d(3, 2); });
    c.push_back({"batch_norm_train", {{{4, 3, 2, 2}}, {{3}, P}, {{3}}}, bn_train, 2.0});
    c.push_back({"batch_norm_train_odd", {{{3, 2, 3, 2}}, {{2}, P}, {{2}}}, bn_train, 2.0});
    c.push_back({"batch_norm_train_2d", {{{5, 3}}, {{3}, P}, {{3}}}, bn_train, 2.0});
    c.push_back({"batch_norm_infer",
                 {{{2, 3, 2, 2}}, {{3}, P}, {{3}}, {{3}, X}, {{3}, Kind::fixed_positive}},
                 [](const V& in) {
                   Tensor rm = in[3], rv = in[4];
                   return in[0].batch_norm(in[1], in[2], rm, rv, false);
                 }});
    c.push_back({"softmax_last", {{{3, 5}}}, [](const V& in) { return in[0].softmax(-1); }});
    c.push_back({"softmax_axis0", {{{3, 5}}}, [](const V& in) { return in[0].softmax(0); }});
    c.push_back({"log_softmax_last", {{{3, 5}}}, [](const V& in) { return in[0].log_softmax(-1); }});
    c.push_back({"log_softmax_axis1_3d", {{{2, 3, 4}}}, [](const V& in) { return in[0].log_softmax(1); }});
    GradInput targets{{4}, Kind::targets};
    targets.labels = {2, 0, 4, 2};
    c.push_back({"cross_entropy", {{{4, 5}}, targets}, [](const V& in) { return in[0].cross_entropy(in[1]); }});
    return c;
  }();
  return cases;
}

// Cases also run on non-cpu devices (each device compiles its own kernels;
// the full list there would dominate the run time).
const std::set<std::string> device_subset = {"exp",     "mul_bcast",        "sum_1",          "max_1",
                                             "var_1",   "chain_movement",   "pad",            "cat",
                                             "matmul_batched_bcast", "conv2d_stride2_pad1", "max_pool_k3s2p1",
                                             "softmax_last", "cross_entropy", "batch_norm_train"};

// Finite-difference step and tolerance (float32 outputs, losses of ~60 terms).
constexpr double kEps = 1e-2, kAtol = 1e-3, kRtol = 5e-3;

double weighted_sum(const std::vector<float>& out, const std::vector<float>& w) {
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += double(out[i]) * double(w[i]);
  return s;
}

// The first disagreement between backward() and central finite differences of
// loss = (gc.f(inputs) * W).sum() on device `dev`; empty when they agree.
std::string gradient_problem(const GradCase& gc, const std::string& dev) {
  Lcg rng(gc.name);
  std::vector<std::vector<float>> values;
  for (auto& in : gc.inputs) values.push_back(draw(in, rng));

  auto evaluate = [&](const std::vector<std::vector<float>>& vals) {
    tl::NoGrad no_grad;
    V ts;
    for (size_t i = 0; i < gc.inputs.size(); ++i) ts.push_back(make(gc.inputs[i], vals[i], dev));
    return gc.f(ts).to_vector();
  };

  // analytic
  V ts;
  for (size_t i = 0; i < gc.inputs.size(); ++i) {
    ts.push_back(make(gc.inputs[i], values[i], dev));
    if (gc.inputs[i].differentiable()) ts.back().requires_grad();
  }
  Tensor out;
  try {
    out = gc.f(ts);
  } catch (const std::exception& e) {
    return std::string("forward threw: ") + e.what();
  }
  std::vector<float> w(size_t(out.numel()));
  for (auto& x : w) x = float(rng.next() * 2 - 1);
  Tensor weights = Tensor::from_data(w, out.shape(), dev);
  try {
    (out * weights).sum().backward();
  } catch (const std::exception& e) {
    return std::string("backward threw: ") + e.what();
  }

  const double eps = kEps, atol = kAtol * gc.tol, rtol = kRtol * gc.tol;
  for (size_t i = 0; i < gc.inputs.size(); ++i) {
    if (!gc.inputs[i].differentiable()) continue;
    Tensor g = ts[i].grad();
    if (!g.defined()) return "no gradient for input " + std::to_string(i);
    if (g.shape() != gc.inputs[i].shape)
      return "gradient of input " + std::to_string(i) + " has shape " + tl::shape_str(g.shape()) + ", expected " +
             tl::shape_str(gc.inputs[i].shape);
    auto analytic = g.to_vector();
    for (size_t j = 0; j < values[i].size(); ++j) {
      auto plus = values, minus = values;
      plus[i][j] = float(double(values[i][j]) + eps);
      minus[i][j] = float(double(values[i][j]) - eps);
      double step = double(plus[i][j]) - double(minus[i][j]);
      double numeric = (weighted_sum(evaluate(plus), w) - weighted_sum(evaluate(minus), w)) / step;
      double err = std::fabs(numeric - double(analytic[j]));
      if (err > atol + rtol * std::fabs(numeric))
        return QString("input %1 element %2: backward %3, finite difference %4")
            .arg(i)
            .arg(j)
            .arg(double(analytic[j]), 0, 'g', 7)
            .arg(numeric, 0, 'g', 7)
            .toStdString();
    }
  }
  return "";
}

}  // namespace

class TestGrad : public QObject {
  Q_OBJECT

 private slots:
  void finite_differences_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    auto& cases = grad_cases();
    for (auto& d : tltest::available_devices())
      for (size_t i = 0; i < cases.size(); ++i)
        if (d == "cpu" || device_subset.count(cases[i].name))
          QTest::newRow((cases[i].name + "@" + d).c_str()) << QString::fromStdString(d) << int(i);
  }

  void finite_differences() {
    QFETCH(QString, device);
    QFETCH(int, index);
    const std::string problem = gradient_problem(grad_cases()[size_t(index)], device.toStdString());
    QVERIFY2(problem.empty(), problem.c_str());
  }

  // The checker must be able to fail. x.detach() * x computes x^2 but its
  // backward gives x (the detached factor is a constant to autograd), half the
  // derivative 2x that the finite differences see: the checker must reject
  // it, naming the input. The honest x * x passes the same checker.
  void check_rejects_wrong_gradient() {
    GradCase wrong{"detached_square", {{{3, 5}}}, [](const V& in) { return in[0].detach() * in[0]; }};
    const std::string problem = gradient_problem(wrong, "cpu");
    QVERIFY2(problem.find("input 0 element") != std::string::npos, problem.c_str());
    QVERIFY2(problem.find("finite difference") != std::string::npos, problem.c_str());
    GradCase right{"square", {{{3, 5}}}, [](const V& in) { return in[0] * in[0]; }};
    const std::string none = gradient_problem(right, "cpu");
    QVERIFY2(none.empty(), none.c_str());
    // and an input the loss does not reach, which gets no gradient at all
    GradCase unused{"unused_input", {{{3}}, {{2}}}, [](const V& in) { return in[0] * 2.0; }};
    QCOMPARE(gradient_problem(unused, "cpu"), std::string("no gradient for input 1"));
  }

  void golden_gradients_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("index");
    static const auto cases = tltest::read_golden(tltest::source_dir() + "/tests/data/golden/grad.bin");
    for (auto& d : tltest::available_devices())
      for (size_t i = 0; i < cases.size(); ++i)
        QTest::newRow((cases[i].name + "@" + d).c_str()) << QString::fromStdString(d) << int(i);
  }

  // conv2d and batch_norm against PyTorch's own gradients.
  void golden_gradients() {
    QFETCH(QString, device);
    QFETCH(int, index);
    static const auto cases = tltest::read_golden(tltest::source_dir() + "/tests/data/golden/grad.bin");
    const auto& c = cases[size_t(index)];
    const std::string dev = device.toStdString();
    V in;
    for (auto& g : c.inputs) in.push_back(tltest::make_tensor(g, dev));
    for (int i = 0; i < 3; ++i) in[size_t(i)].requires_grad();
    Tensor out;
    if (c.name == "grad_batch_norm_train") {
      out = bn_train(in);
    } else {
      static const std::map<std::string, tl::Conv2dOptions> opts = {
          {"grad_conv2d_basic", conv_opts(1, 0, 1, 1)},
          {"grad_conv2d_stride_pad", conv_opts(2, 1, 1, 1)},
          {"grad_conv2d_dilation", conv_opts(1, 2, 2, 1)},
          {"grad_conv2d_groups", conv_opts(1, 1, 1, 2)},
      };
      QVERIFY2(opts.count(c.name), ("no C++ twin for golden case " + c.name).c_str());
      out = in[0].conv2d(in[1], in[2], opts.at(c.name));
    }
    (out * in[3]).sum().backward();
    for (int i = 0; i < 3; ++i) {
      std::string why;
      QVERIFY2(in[size_t(i)].grad().shape() == c.outputs[size_t(i)].shape, "gradient shape");
      QVERIFY2(tltest::all_close(in[size_t(i)].grad().to_vector(), c.outputs[size_t(i)].data, c.rtol, c.atol, &why),
               ("gradient of input " + std::to_string(i) + ": " + why).c_str());
    }
  }

  // ---- the autograd switches ----
  void requires_grad_flags() {
    Tensor x = Tensor::from_data({1, 2, 3}, {3});
    QVERIFY(!x.requires_grad_enabled());
    QVERIFY(!x.grad().defined());
    x.requires_grad();
    QVERIFY(x.requires_grad_enabled());
    Tensor y = x * 2.0;
    QVERIFY(y.requires_grad_enabled());
    QVERIFY(!x.detach().requires_grad_enabled());
    Tensor c = Tensor::from_data({1, 1, 1}, {3});
    QVERIFY(!(c * 2.0).requires_grad_enabled());
    x.requires_grad(false);
    QVERIFY(!x.requires_grad_enabled());
  }

  void no_grad_records_nothing() {
    Tensor x = Tensor::from_data({1, -2, 3}, {3});
    x.requires_grad();
    QVERIFY(tl::grad_enabled());
    Tensor y;
    {
      tl::NoGrad ng;
      QVERIFY(!tl::grad_enabled());
      {
        tl::NoGrad nested;
        QVERIFY(!tl::grad_enabled());
      }
      QVERIFY(!tl::grad_enabled());
      y = x * x * 5.0;
      QVERIFY(!y.requires_grad_enabled());
    }
    QVERIFY(tl::grad_enabled());
    // y was built without a graph: it contributes a constant, no gradient
    (x * 3.0 + y).sum().backward();
    auto g = x.grad().to_vector();
    QVERIFY((g == std::vector<float>{3, 3, 3}));
  }

  // A reduction over an empty axis is a constant, yet stays in the graph:
  // backward reaches the empty input (an empty gradient) and what multiplies it.
  void reduction_over_nothing_keeps_the_graph() {
    Tensor x = Tensor::zeros({2, 0, 3});
    x.requires_grad();
    Tensor w = Tensor::from_data({1, 2, 3}, {3});
    w.requires_grad();
    Tensor s = x.sum({0, 1});
    QCOMPARE(s.to_vector(), (std::vector<float>{0, 0, 0}));
    Tensor m = x.max({1});
    QCOMPARE(m.shape(), (tl::Shape{2, 3}));
    QCOMPARE(m.to_vector(), (std::vector<float>(6, -INFINITY)));
    ((s + 2.0) * w).sum().backward();
    QCOMPARE(x.grad().shape(), (tl::Shape{2, 0, 3}));
    QCOMPARE(w.grad().to_vector(), (std::vector<float>{2, 2, 2}));
  }

  void detach_stops_gradient() {
    Tensor x = Tensor::from_data({1, -2, 3}, {3});
    x.requires_grad();
    (x.detach() * x).sum().backward();  // d/dx of c*x with c = x held constant
    auto g = x.grad().to_vector();
    QVERIFY((g == std::vector<float>{1, -2, 3}));
  }

  void gradients_accumulate_and_reset() {
    Tensor x = Tensor::from_data({0.5f, 1.5f}, {2});
    x.requires_grad();
    (x * x).sum().backward();
    QVERIFY((x.grad().to_vector() == std::vector<float>{1, 3}));
    (x * x).sum().backward();
    QVERIFY((x.grad().to_vector() == std::vector<float>{2, 6}));
    x.zero_grad();  // drops the gradient: undefined until the next backward()
    QVERIFY(!x.grad().defined());
    (x * 4.0).sum().backward();
    QVERIFY((x.grad().to_vector() == std::vector<float>{4, 4}));
  }

  // ---- with_gradient_of: the value of one expression, the gradient of another ----
  // The two sides break the contract on purpose (values 3x and x*x) so that
  // each can be told apart: the value must be 3x, the gradient 2x.
  void with_gradient_of_value_and_gradient() {
    Tensor x = Tensor::from_data({0.5f, -1, 2}, {3});
    x.requires_grad();
    Tensor y = (x * 3.0).with_gradient_of(x * x);
    QVERIFY(y.requires_grad_enabled());
    QCOMPARE(y.to_vector(), (std::vector<float>{1.5f, -3, 6}));
    (y * Tensor::from_data({1, 2, 3}, {3})).sum().backward();
    QCOMPARE(x.grad().to_vector(), (std::vector<float>{1, -4, 12}));
  }

  // The forward pass computes the value alone: no kernel evaluates the twin
  // (its EXP), while one does evaluate the value (its MUL).
  void with_gradient_of_never_computes_the_twin() {
    Tensor x = Tensor::from_data({0.5f, -1, 2}, {3});
    x.requires_grad();
    Tensor value = x * 3.0, twin = (x * 5.0).exp().log() * 0.6;
    tl::ProfileCapture capture;
    Tensor y = value.with_gradient_of(twin).contiguous();
    y.realize();
    std::set<std::string> ops;
    for (auto& r : capture.records()) ops.insert(r.kernel->ops.begin(), r.kernel->ops.end());
    QVERIFY2(ops.count("MUL") && !ops.count("EXP") && !ops.count("LOG"),
             qPrintable(QString::fromStdString([&] {
               std::string all;
               for (auto& o : ops) all += o + " ";
               return all;
             }())));
    QVERIFY(!twin.node()->realized());
    y.sum().backward();  // through the twin: d/dx of 0.6 * log(exp(5x)) = 3
    QCOMPARE(x.grad().to_vector(), (std::vector<float>{3, 3, 3}));
  }

  void with_gradient_of_checks_its_twin() {
    Tensor x = Tensor::from_data({1, 2, 3, 4}, {2, 2});
    x.requires_grad();
    auto message = [](const std::function<void()>& f) -> std::string {
      try {
        f();
      } catch (const tl::ShapeError& e) {
        return e.what();
      }
      return "no ShapeError";
    };
    const std::string shape = message([&] { x.with_gradient_of(x.reshape({4})); });
    QVERIFY2(shape.find("with_gradient_of") != std::string::npos && shape.find("(4,)") != std::string::npos,
             shape.c_str());
    const std::string dtype = message([&] { x.with_gradient_of(x.cast(tl::DType::i32)); });
    QVERIFY2(dtype.find("int32") != std::string::npos, dtype.c_str());
    // no gradient flows where none is recorded or the twin needs none
    Tensor c = Tensor::from_data({5, 6, 7, 8}, {2, 2});
    QVERIFY(!(x * 2.0).with_gradient_of(c).requires_grad_enabled());
    tl::NoGrad no_grad;
    Tensor y = (x * 2.0).with_gradient_of(x + x);
    QVERIFY(!y.requires_grad_enabled());
    QCOMPARE(y.to_vector(), (std::vector<float>{2, 4, 6, 8}));
  }

  // The finite-difference checker sees the contract: a twin with the value's
  // values passes, one with other values is rejected.
  void with_gradient_of_finite_differences() {
    GradCase honest{"twin_honest", {{{3, 4}}}, [](const V& in) { return (in[0] * in[0]).with_gradient_of(in[0].pow(2.0)); }};
    const std::string none = gradient_problem(honest, "cpu");
    QVERIFY2(none.empty(), none.c_str());
    GradCase broken{"twin_broken", {{{3, 4}}}, [](const V& in) { return (in[0] * 3.0).with_gradient_of(in[0] * 2.0); }};
    const std::string problem = gradient_problem(broken, "cpu");
    QVERIFY2(problem.find("finite difference") != std::string::npos, problem.c_str());
  }

  // nn::Conv2d (window-view columns, stack-of-slices gradient) against
  // Tensor::conv2d (window view both ways, golden-tested against PyTorch):
  // values and all three gradients, on shapes larger than finite
  // differences can afford.
  void conv_module_matches_conv2d() {
    struct Config { int64_t k, stride, pad; };
    for (Config cfg : {Config{3, 1, 1}, Config{3, 2, 1}, Config{5, 1, 2}, Config{2, 2, 0}}) {
      const std::string name = "k" + std::to_string(cfg.k) + " s" + std::to_string(cfg.stride) + " p" +
                               std::to_string(cfg.pad);
      Lcg rng("conv_module_" + name);
      auto random = [&](tl::Shape s) {
        std::vector<float> v(size_t(tl::numel(s)));
        for (auto& e : v) e = float(rng.next() * 2 - 1);
        return std::pair{v, s};
      };
      auto [xv, xs] = random({3, 5, 11, 9});
      auto [wv, ws] = random({4, 5, cfg.k, cfg.k});
      auto [bv, bs] = random({4});
      std::vector<std::vector<float>> results[2];
      for (int path = 0; path < 2; ++path) {
        Tensor x = Tensor::from_data(xv, xs), w = Tensor::from_data(wv, ws), b = Tensor::from_data(bv, bs);
        for (Tensor* t : {&x, &w, &b}) t->requires_grad();
        Tensor out;
        if (path == 0) {
          tl::Generator gen(0);
          tl::nn::Conv2d m(5, 4, cfg.k, gen, cfg.stride, cfg.pad);
          m.weight = w;
          m.bias = b;
          out = m(x);
        } else {
          out = x.conv2d(w, b, conv_opts(cfg.stride, cfg.pad, 1, 1));
        }
        Lcg up("upstream");
        std::vector<float> g(size_t(out.numel()));
        for (auto& e : g) e = float(up.next() * 2 - 1);
        // The output is read after backward(), when the GEMM's columns have
        // been realized for the weight gradient: the replay key must still
        // reach the image a gathered convolution reads (it once threw here).
        (out * Tensor::from_data(g, out.shape())).sum().backward();
        results[path] = {out.to_vector(), x.grad().to_vector(), w.grad().to_vector(), b.grad().to_vector()};
      }
      const char* what[] = {"output", "input gradient", "weight gradient", "bias gradient"};
      for (int i = 0; i < 4; ++i) {
        std::string why;
        QVERIFY2(tltest::all_close(results[0][size_t(i)], results[1][size_t(i)], 1e-4, 1e-4, &why),
                 (name + " " + what[i] + ": " + why).c_str());
      }
    }
  }

  void shared_subexpression_sums_paths() {
    // x feeds the output through two paths; both must be counted
    Tensor x = Tensor::from_data({1, 2}, {2});
    x.requires_grad();
    Tensor e = x.exp();
    (e * e + e).sum().backward();
    auto g = x.grad().to_vector();
    for (int i = 0; i < 2; ++i) {
      double xi = i + 1;
      double want = 2 * std::exp(2 * xi) + std::exp(xi);
      QVERIFY2(std::fabs(g[size_t(i)] - want) < 1e-4 * want, qPrintable(QString("%1 vs %2").arg(g[size_t(i)]).arg(want)));
    }
  }
};

QTEST_GUILESS_MAIN(TestGrad)
#include "test_grad.moc"
