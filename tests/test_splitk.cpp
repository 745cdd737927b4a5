// Split-K products (detail::split_k_parts, detail::matmul_split_k in
// core/tensor_nn.cpp): which shapes a device splits, and the split product
// and its gradients against a double-precision computation on every device,
// run as one batched GEMM over the slices of K.
#include <QtTest>

#include <cmath>
#include <random>

#include "core/profile.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"
#include "testing.h"

using namespace tl;

namespace {

DeviceInfo with_units(int units) {
  DeviceInfo info;
  info.compute_units = units;
  return info;
}

std::vector<float> values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = float(d(rng));
  return v;
}

// c[i][j] = sum_p a(i, p) b(p, j) in double; a and b read through accessors.
template <class A, class B>
std::vector<double> product(int64_t m, int64_t n, int64_t k, A a, B b) {
  std::vector<double> c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a(i, p)) * double(b(p, j));
      c[size_t(i * n + j)] = s;
    }
  return c;
}

// Worst |got - want| / (1 + |want|).
double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / (1 + std::abs(want[i])));
  return worst;
}

}  // namespace

class TestSplitK : public QObject {
  Q_OBJECT
 private slots:
  // On a 132-unit GPU a product with too few tiles to fill the units four
  // times is split into slices of K of at least 256: a weight gradient's
  // shape, ViT's second MLP product at batch 1. A CPU's cores, a batch, a
  // short K, a small product of short tiles under K = 4096, a K with no
  // divisor in range or enough tiles are not split.
  void partsFollowTheDevice() {
    const DeviceInfo gpu = with_units(132), cpu2 = with_units(2), cpu16 = with_units(16);
    QCOMPARE(detail::split_k_parts(gpu, 1, 32, 288, 12800), int64_t(50));  // 9 tiles: up to 59 parts
    QCOMPARE(detail::split_k_parts(gpu, 1, 32, 9, 12800), int64_t(50));    // slices of 256, no shorter
    QCOMPARE(detail::split_k_parts(gpu, 1, 197, 768, 3072), int64_t(4));   // 168 tiles: 4 parts fill 528
    QCOMPARE(detail::split_k_parts(gpu, 1, 197, 768, 768), int64_t(3));    // 4 wanted, slices of 256 allow 3
    QCOMPARE(detail::split_k_parts(gpu, 1, 64, 576, 384), int64_t(1));     // K too short to slice
    QCOMPARE(detail::split_k_parts(gpu, 1, 1, 1000, 1280), int64_t(1));    // a classifier: too small to pay
    QCOMPARE(detail::split_k_parts(gpu, 1, 48, 1, 1152), int64_t(1));      // a squeeze-and-excite product
    QCOMPARE(detail::split_k_parts(gpu, 1, 128, 49, 1024), int64_t(4));    // 7x7 map, 1024 channels: 8 long tiles
    QCOMPARE(detail::split_k_parts(gpu, 1, 32, 49, 1152), int64_t(4));     // 3x3 over 128 channels: 2 tiles
    QCOMPARE(detail::split_k_parts(gpu, 1, 32, 49, 576), int64_t(1));      // tiles of 32 x 32 x 576, under 2^20
    QCOMPARE(detail::split_k_parts(gpu, 2, 32, 9, 12800), int64_t(1));     // batched products keep theirs
    QCOMPARE(detail::split_k_parts(gpu, 1, 32, 9, 4099), int64_t(1));      // prime K
    QCOMPARE(detail::split_k_parts(gpu, 1, 1024, 1024, 8192), int64_t(1));  // enough tiles already
    QCOMPARE(detail::split_k_parts(gpu, 1, 256, 256, 4096), int64_t(8));   // 64 tiles: up to 9 parts
    QCOMPARE(detail::split_k_parts(cpu2, 1, 32, 9, 12800), int64_t(1));
    QCOMPARE(detail::split_k_parts(cpu2, 1, 32, 288, 12800), int64_t(1));
    QCOMPARE(detail::split_k_parts(cpu16, 1, 32, 9, 12800), int64_t(1));
    QCOMPARE(detail::split_k_parts(with_units(0), 1, 32, 9, 12800), int64_t(1));
  }

  void matchesDoublePrecision_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<int>("parts");
    QTest::addColumn<bool>("transposed");
    struct Shape5 { int m, n, k, parts; bool t; };
    for (const std::string& d : tltest::available_devices())
      for (const Shape5& s : {Shape5{32, 9, 12800, 50, true}, Shape5{32, 288, 2560, 10, true},
                              Shape5{7, 5, 600, 3, false}, Shape5{1, 13, 1024, 4, false}}) {
        const std::string name = d + " " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                                 std::to_string(s.k) + " in " + std::to_string(s.parts) + (s.t ? " (A^T)" : "");
        QTest::newRow(name.c_str()) << QString::fromStdString(d) << s.m << s.n << s.k << s.parts << s.t;
      }
  }

  // C = A B as `parts` GEMMs over slices of K: one batched GEMM kernel, the
  // values of a double-precision product, and dA = G B^T, dB = A^T G for
  // the gradient G of sum(C * G). A is read through a transpose when
  // `transposed`, as a convolution's weight gradient reads its columns.
  void matchesDoublePrecision() {
    QFETCH(QString, device);
    QFETCH(int, m);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(int, parts);
    QFETCH(bool, transposed);
    const std::string dev = device.toStdString();
    const std::vector<float> av = values(size_t(m) * k, 1), bv = values(size_t(k) * n, 2), gv = values(size_t(m) * n, 3);
    // a_at(i, p): A's element, stored (m, k) or, transposed, (k, m)
    auto a_at = [&](int64_t i, int64_t p) { return transposed ? av[size_t(p * m + i)] : av[size_t(i * k + p)]; };
    auto b_at = [&](int64_t p, int64_t j) { return bv[size_t(p * n + j)]; };
    Tensor stored = Tensor::from_data(av, transposed ? Shape{k, m} : Shape{m, k}, dev);
    Tensor b = Tensor::from_data(bv, {k, n}, dev), g = Tensor::from_data(gv, {m, n}, dev);
    stored.requires_grad(true);
    b.requires_grad(true);
    Tensor a = transposed ? stored.transpose(0, 1) : stored;
    ProfileCapture capture;
    Tensor c = detail::matmul_split_k(a, b, parts);
    QCOMPARE(c.shape(), (Shape{m, n}));
    const std::vector<float> got = c.to_vector();
    const double tol = 1e-5 * std::sqrt(double(k));
    const double err = worst_error(got, product(m, n, k, a_at, b_at));
    QVERIFY2(err < tol, qPrintable(QString("product off by %1 (tolerance %2)").arg(err).arg(tol)));
    bool batched = false;
    for (auto& r : capture.records())
      batched = batched || r.kernel->name.rfind("GEMM_" + std::to_string(parts) + "_", 0) == 0;
    QVERIFY2(batched, "no batched GEMM over the slices of K was launched");

    (c * g).sum().backward();
    // dA(i, p) = sum_j G(i, j) B(p, j); dB(p, j) = sum_i A(i, p) G(i, j)
    std::vector<double> da = product(m, k, n, [&](int64_t i, int64_t j) { return gv[size_t(i * n + j)]; },
                                     [&](int64_t j, int64_t p) { return b_at(p, j); });
    if (transposed) {  // the stored tensor is (k, m)
      std::vector<double> t(da.size());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < k; ++p) t[size_t(p * m + i)] = da[size_t(i * k + p)];
      da = t;
    }
    const std::vector<double> db = product(k, n, m, [&](int64_t p, int64_t i) { return a_at(i, p); },
                                           [&](int64_t i, int64_t j) { return gv[size_t(i * n + j)]; });
    const double ea = worst_error(stored.grad().to_vector(), da), eb = worst_error(b.grad().to_vector(), db);
    QVERIFY2(ea < tol, qPrintable(QString("dA off by %1").arg(ea)));
    QVERIFY2(eb < tol, qPrintable(QString("dB off by %1").arg(eb)));
  }
};

QTEST_GUILESS_MAIN(TestSplitK)
#include "test_splitk.moc"
