// Layers, optimizers and state dicts. Optimizer steps and LR schedules are
// compared with PyTorch's (tests/data/train/optim.safetensors from
// scripts/reference_training.py); the whole CNN's parameter gradients with
// central finite differences; layers with closed forms or with the core's
// own conv2d / max_pool2d.
#include <QtTest/QtTest>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/io/safetensors.h"
#include "core/nn/layers.h"
#include "core/nn/optim.h"
#include "core/train/models.h"
#include "tests/testing.h"

using tl::Tensor;
namespace nn = tl::nn;

namespace {

const tl::StateDict& goldens() {
  static tl::StateDict g = tl::load_safetensors(tltest::source_dir() + "/tests/data/train/optim.safetensors");
  return g;
}
std::vector<float> golden(const std::string& key) {
  auto it = goldens().find(key);
  if (it == goldens().end()) throw std::runtime_error("golden key missing: " + key);
  return it->second.data;
}
Tensor golden_tensor(const std::string& key) {
  auto& h = goldens().at(key);
  return Tensor::from_data(h.data, h.shape);
}

std::vector<float> uniform_values(size_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(rng));
  return v;
}

// Runs three steps of `make(param)` with the golden gradients; the gradient
// reaches the parameter through backward() of sum(p * g).
template <class Make>
void check_optimizer(const std::string& name, Make make) {
  Tensor p = golden_tensor("p0");
  p.realize();
  p.requires_grad(true);
  auto opt = make(std::vector<Tensor*>{&p});
  for (int k = 1; k <= 3; ++k) {
    opt->zero_grad();
    (p * golden_tensor("g" + std::to_string(k))).sum().backward();
    opt->step();
    std::string why;
    QVERIFY2(tltest::all_close(p.to_vector(), golden(name + "." + std::to_string(k)), 1e-5, 1e-6, &why),
             (name + " step " + std::to_string(k) + ": " + why).c_str());
    QVERIFY(p.requires_grad_enabled());
  }
}

// loss of a model on fixed data, read back as double
double loss_of(nn::Module& m, const Tensor& x, const Tensor& y) {
  tl::NoGrad ng;
  return double(m(x).cross_entropy(y).item());
}

}  // namespace

class TestNN : public QObject {
  Q_OBJECT

 private slots:
  void sgdNesterovWeightDecayMatchesTorch() {
    check_optimizer("sgd", [](std::vector<Tensor*> ps) {
      return std::make_unique<nn::SGD>(ps, 0.1, nn::SGDOptions{0.9, 0, 0.01, true});
    });
  }
  void sgdPlainAndDampenedMatchTorch() {
    check_optimizer("sgd_plain", [](std::vector<Tensor*> ps) { return std::make_unique<nn::SGD>(ps, 0.1); });
    check_optimizer("sgd_momentum", [](std::vector<Tensor*> ps) {
      return std::make_unique<nn::SGD>(ps, 0.1, nn::SGDOptions{0.8, 0.1, 0, false});
    });
  }
  void adamMatchesTorch() {
    check_optimizer("adam", [](std::vector<Tensor*> ps) {
      return std::make_unique<nn::Adam>(ps, 0.01, nn::AdamOptions{0.8, 0.95, 1e-6, 0.1});
    });
  }
  void adamwMatchesTorch() {
    check_optimizer("adamw", [](std::vector<Tensor*> ps) {
      return std::make_unique<nn::AdamW>(ps, 0.01, nn::AdamOptions{0.8, 0.95, 1e-6, 0.1});
    });
  }
  void schedulesMatchTorch() {
    auto step = golden("lr.step"), cosine = golden("lr.cosine");
    for (int e = 0; e < 10; ++e) {
      QVERIFY(std::fabs(nn::step_lr(0.1, e, 3, 0.5) - step[size_t(e)]) < 1e-7);
      QVERIFY(std::fabs(nn::cosine_lr(0.1, e, 10, 0.001) - cosine[size_t(e)]) < 1e-7);
    }
  }

  void optimizerStepKeepsTheGraphSmall() {
    // after a step the parameter is a fresh realized leaf: no history
    tl::Generator gen(3);
    nn::Linear lin(4, 2, gen);
    nn::SGD opt(lin.parameters(), 0.1, {0.9, 0, 0, false});
    Tensor x = Tensor::ones({3, 4});
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      lin(x).sum().backward();
      opt.step();
      QVERIFY(lin.weight.node()->src.empty());
      QVERIFY(lin.weight.node()->realized());
      QVERIFY(lin.weight.requires_grad_enabled());
    }
    QCOMPARE(opt.steps(), int64_t(3));
  }

  void nesterovWithoutMomentumIsRefused() {
    Tensor p = Tensor::ones({2});
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, nn::SGD({&p}, 0.1, {0, 0, 0, true}));
  }

  void linearIsXWtPlusB() {
    tl::Generator gen(1);
    nn::Linear lin(3, 2, gen);
    auto w = lin.weight.to_vector(), b = lin.bias.to_vector();
    // PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both
    for (float v : w) QVERIFY(std::fabs(v) <= 1 / std::sqrt(3.f));
    std::vector<float> x = {1, 2, 3, -1, 0, 0.5};
    auto y = lin(Tensor::from_data(x, {2, 3})).to_vector();
    for (int n = 0; n < 2; ++n)
      for (int o = 0; o < 2; ++o) {
        double ref = b[size_t(o)];
        for (int i = 0; i < 3; ++i) ref += double(x[size_t(n * 3 + i)]) * w[size_t(o * 3 + i)];
        QVERIFY(std::fabs(y[size_t(n * 2 + o)] - ref) < 1e-5);
      }
  }

  void initIsKaimingUniform() {
    tl::Generator gen(7);
    nn::Conv2d conv(16, 32, 3, gen);
    auto w = conv.weight.to_vector();
    double bound = 1 / std::sqrt(16.0 * 9), sum2 = 0;
    for (float v : w) {
      QVERIFY(std::fabs(v) <= bound);
      sum2 += double(v) * v;
    }
    double sd = std::sqrt(sum2 / double(w.size()));
    QVERIFY2(std::fabs(sd - bound / std::sqrt(3.0)) < 0.05 * bound, std::to_string(sd).c_str());
    // the same seed gives the same model
    tl::Generator g1(5), g2(5);
    QCOMPARE(nn::Conv2d(2, 3, 3, g1).weight.to_vector(), nn::Conv2d(2, 3, 3, g2).weight.to_vector());
  }

  void conv2dMatchesDirectLoops() {
    // the layer's im2col path against the definition, with stride and padding
    for (auto [stride, pad] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 0}, std::pair{2, 0}}) {
      tl::Generator gen(11);
      nn::Conv2d conv(3, 4, 3, gen, stride, pad);
      const int N = 2, C = 3, O = 4, H = 7, W = 9, K = 3;
      auto xs = uniform_values(N * C * H * W, -1, 1, 2);
      auto w = conv.weight.to_vector(), b = conv.bias.to_vector();
      Tensor got = conv(Tensor::from_data(xs, {N, C, H, W}));
      int OH = (H + 2 * pad - K) / stride + 1, OW = (W + 2 * pad - K) / stride + 1;
      QCOMPARE(got.shape(), (tl::Shape{N, O, OH, OW}));
      std::vector<float> ref;
      for (int n = 0; n < N; ++n)
        for (int o = 0; o < O; ++o)
          for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox) {
              double acc = b[size_t(o)];
              for (int c = 0; c < C; ++c)
                for (int i = 0; i < K; ++i)
                  for (int j = 0; j < K; ++j) {
                    int y = oy * stride + i - pad, x = ox * stride + j - pad;
                    if (y < 0 || y >= H || x < 0 || x >= W) continue;
                    acc += double(xs[size_t(((n * C + c) * H + y) * W + x)]) * w[size_t(((o * C + c) * K + i) * K + j)];
                  }
              ref.push_back(float(acc));
            }
      std::string why;
      QVERIFY2(tltest::all_close(got.to_vector(), ref, 1e-5, 1e-5, &why), why.c_str());
    }
  }

  void maxPoolMatchesDirectLoops() {
    // odd sizes: floor mode drops the last row and column
    const int H = 7, W = 9;
    auto xs = uniform_values(2 * 3 * H * W, -1, 1, 4);
    Tensor x = Tensor::from_data(xs, {2, 3, H, W});
    nn::MaxPool2d pool(2);
    Tensor got = pool(x);
    QCOMPARE(got.shape(), (tl::Shape{2, 3, 3, 4}));
    std::vector<float> ref;
    for (int p = 0; p < 6; ++p)
      for (int oy = 0; oy < 3; ++oy)
        for (int ox = 0; ox < 4; ++ox) {
          float m = -INFINITY;
          for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) m = std::max(m, xs[size_t((p * H + oy * 2 + i) * W + ox * 2 + j)]);
          ref.push_back(m);
        }
    QCOMPARE(got.to_vector(), ref);
  }

  void dropoutScalesInTrainingOnly() {
    nn::Dropout drop(0.5, 9);
    Tensor x = Tensor::ones({1000});
    auto y = drop(x).to_vector();
    int kept = 0;
    for (float v : y) {
      QVERIFY(v == 0.f || std::fabs(v - 2.f) < 1e-6);
      kept += v != 0;
    }
    QVERIFY(kept > 430 && kept < 570);
    drop.eval();
    QCOMPARE(drop(x).to_vector(), x.to_vector());
  }

  void batchNormTracksRunningStatistics() {
    nn::BatchNorm2d bn(2);
    std::vector<float> xs = uniform_values(4 * 2 * 3 * 3, 0, 4, 8);
    Tensor x = Tensor::from_data(xs, {4, 2, 3, 3});
    auto y = bn(x).to_vector();
    // channel 0: mean 0, biased variance 1 in training mode
    double mean = 0, var = 0, xm = 0, xv = 0;
    std::vector<double> c0, y0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 9; ++i) {
        c0.push_back(xs[size_t(n * 18 + i)]);
        y0.push_back(y[size_t(n * 18 + i)]);
      }
    for (size_t i = 0; i < 36; ++i) mean += y0[i] / 36, xm += c0[i] / 36;
    for (size_t i = 0; i < 36; ++i) var += (y0[i] - mean) * (y0[i] - mean) / 36, xv += (c0[i] - xm) * (c0[i] - xm) / 35;
    QVERIFY(std::fabs(mean) < 1e-5);
    QVERIFY(std::fabs(var - 1) < 1e-3);
    QVERIFY(std::fabs(bn.running_mean.to_vector()[0] - 0.1 * xm) < 1e-5);
    QVERIFY(std::fabs(bn.running_var.to_vector()[0] - (0.9 + 0.1 * xv)) < 1e-4);
    QCOMPARE(bn.num_batches_tracked.item(), 1.f);
    bn.eval();
    auto e = bn(x).to_vector();
    double rm = bn.running_mean.to_vector()[0], rv = bn.running_var.to_vector()[0];
    QVERIFY(std::fabs(e[0] - (xs[0] - rm) / std::sqrt(rv + 1e-5)) < 1e-5);
    QCOMPARE(bn.num_batches_tracked.item(), 1.f);
  }

  void cnnGradientsMatchFiniteDifferences() {
    // a tiny CNN of every layer kind on 2 images of 8x8; inputs and weights
    // are seeded so no relu input or pooling window sits at a tie
    tl::Generator gen(21);
    nn::Sequential m;
    m.add(std::make_shared<nn::Conv2d>(1, 3, 3, gen, 1, 1));
    m.add(std::make_shared<nn::BatchNorm2d>(3));
    m.emplace<nn::ReLU>();
    m.emplace<nn::MaxPool2d>(2);
    m.add(std::make_shared<nn::Conv2d>(3, 4, 3, gen));
    m.emplace<nn::ReLU>();
    m.emplace<nn::MaxPool2d>(2);
    m.emplace<nn::Flatten>();
    m.add(std::make_shared<nn::Linear>(4, 3, gen));
    Tensor x = Tensor::from_data(uniform_values(2 * 64, 0, 1, 5), {2, 1, 8, 8});
    Tensor y = Tensor::from_ints({2, 0}, {2});
    m(x).cross_entropy(y).backward();
    std::mt19937_64 pick(1);
    int checked = 0;
    for (auto& [name, p] : m.named_parameters()) {
      auto g = p->grad().to_vector();
      auto base = p->to_vector();
      QVERIFY2(g.size() == base.size(), name.c_str());
      for (int s = 0; s < 6; ++s) {
        size_t i = size_t(pick() % base.size());
        const double eps = 1e-3;  // small enough that no relu or pooling window changes side
        auto at = [&](double delta) {
          auto v = base;
          v[i] = float(double(v[i]) + delta);
          Tensor keep = *p;
          *p = Tensor::from_data(v, p->shape());
          double l = loss_of(m, x, y);
          *p = keep;
          return l;
        };
        double fd = (at(eps) - at(-eps)) / (2 * eps);
        double err = std::fabs(fd - g[i]);
        QVERIFY2(err <= 2e-3 + 2e-2 * std::fabs(fd),
                 (name + "[" + std::to_string(i) + "]: backward " + std::to_string(g[i]) + ", finite difference " +
                  std::to_string(fd)).c_str());
        ++checked;
      }
    }
    QCOMPARE(checked, 6 * 8);  // 2 convs, batch norm, linear: weight and bias each
  }

  void stateDictRoundTripGivesIdenticalOutputs() {
    tl::Generator g1(1), g2(2);
    auto a = tl::train::make_cnn(20, 20, 10, g1);
    auto b = tl::train::make_cnn(20, 20, 10, g2);
    Tensor x = Tensor::from_data(uniform_values(3 * 400, 0, 1, 3), {3, 1, 20, 20});
    auto ya = (*a)(x).to_vector();
    QVERIFY(ya != (*b)(x).to_vector());
    std::string path = (std::filesystem::temp_directory_path() / "tinylens_test_nn_cnn.safetensors").string();
    a->save(path);
    b->load(path);
    std::filesystem::remove(path);
    QCOMPARE((*b)(x).to_vector(), ya);
    auto keys = a->state_dict();
    QVERIFY(keys.count("0.weight") && keys.count("1.running_var") && keys.count("10.bias") && keys.count("15.weight"));
    QCOMPARE(keys.at("7.weight").shape, (tl::Shape{64, 32, 3, 3}));
    QCOMPARE(keys.at("15.weight").shape, (tl::Shape{10, 64 * 5 * 5}));
    for (auto* p : b->parameters()) QVERIFY(p->requires_grad_enabled());
  }

  void stateDictKeepsBatchNormBuffers() {
    nn::Sequential m;
    m.add(std::make_shared<nn::BatchNorm2d>(2));
    m(Tensor::from_data(uniform_values(16, 0, 1, 1), {2, 2, 2, 2})).realize();
    auto sd = m.state_dict();
    QVERIFY(sd.count("0.running_mean") && sd.count("0.running_var") && sd.count("0.num_batches_tracked"));
    nn::Sequential fresh;
    fresh.add(std::make_shared<nn::BatchNorm2d>(2));
    fresh.load_state_dict(sd);
    QCOMPARE(static_cast<nn::BatchNorm2d&>(*fresh.children()[0].second).running_mean.to_vector(),
             sd.at("0.running_mean").data);
  }

  void loadingAMismatchedStateDictNamesEveryProblem() {
    tl::Generator gen(1);
    auto cnn = tl::train::make_cnn(20, 20, 10, gen);
    auto sd = cnn->state_dict();
    sd.erase("0.bias");
    sd["3.weight"].shape = {32, 16, 9};
    sd["extra"] = sd["7.bias"];
    try {
      cnn->load_state_dict(sd);
      QFAIL("no exception");
    } catch (const tl::IOError& e) {
      std::string what = e.what();
      QVERIFY2(what.find("0.bias") != std::string::npos, what.c_str());
      QVERIFY2(what.find("3.weight") != std::string::npos, what.c_str());
      QVERIFY2(what.find("extra") != std::string::npos, what.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(TestNN)
#include "test_nn.moc"
