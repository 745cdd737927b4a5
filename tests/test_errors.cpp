// Bad input raises the core's exception types with messages that name the
// offending shapes / axes / devices, and the tensors involved stay usable.
#include <QtTest/QtTest>

#include <functional>

#include "core/error.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#include "tests/testing.h"

using tl::Tensor;

namespace {

// Runs `f` (building and reading the result, so lazy and eager checks both
// count) and expects E whose message contains every string of `names`.
template <class E>
std::string expect_error(const std::function<void()>& f, const std::vector<std::string>& names) {
  try {
    f();
  } catch (const E& e) {
    std::string msg = e.what();
    for (auto& n : names)
      if (msg.find(n) == std::string::npos) return "message \"" + msg + "\" does not name " + n;
    return "";
  } catch (const std::exception& e) {
    return std::string("wrong exception type, message: ") + e.what();
  }
  return "no exception";
}

std::vector<float> seq(int n, float start = 1) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = start + float(i);
  return v;
}

}  // namespace

class TestErrors : public QObject {
  Q_OBJECT

  std::string dev_;
  Tensor a23_, b45_;

  // The tensors that took part in a failed call still compute correctly.
  void still_usable() {
    auto v = (a23_ * 2.0 + a23_).sum({1}).to_vector();
    QVERIFY((v == std::vector<float>{18, 45}));  // 3 * (1+2+3), 3 * (4+5+6)
    auto w = b45_.sum().item();
    QCOMPARE(w, 210.0f);  // 1 + ... + 20
  }

 private slots:
  void shape_errors_data() {
    QTest::addColumn<QString>("device");
    for (auto& d : tltest::available_devices()) QTest::newRow(d.c_str()) << QString::fromStdString(d);
  }

  void shape_errors() {
    QFETCH(QString, device);
    dev_ = device.toStdString();
    a23_ = Tensor::from_data(seq(6), {2, 3}, dev_);
    b45_ = Tensor::from_data(seq(20), {4, 5}, dev_);
    auto& a = a23_;
    auto& b = b45_;
    using tl::ShapeError;
    struct Row {
      const char* what;
      std::function<void()> f;
      std::vector<std::string> names;
    };
    const std::vector<Row> rows = {
        {"add", [&] { (a + b).to_vector(); }, {"(2, 3)", "(4, 5)"}},
        {"mul", [&] { (a * b).to_vector(); }, {"(2, 3)", "(4, 5)"}},
        {"where", [&] { Tensor::where(a.gt(a), a, b).to_vector(); }, {"(2, 3)", "(4, 5)"}},
        {"matmul", [&] { a.matmul(b).to_vector(); }, {"(2, 3)", "(4, 5)"}},
        {"matmul 1-D", [&] { a.reshape({6}).matmul(b.reshape({20})).to_vector(); }, {"(6", "(20"}},
        {"linear", [&] { a.linear(b).to_vector(); }, {"(2, 3)", "(4, 5)"}},
        {"reshape", [&] { a.reshape({4, 2}).to_vector(); }, {"(2, 3)", "(4, 2)"}},
        {"reshape two -1", [&] { b.reshape({-1, -1}).to_vector(); }, {"(-1, -1)"}},
        {"sum axis 5", [&] { a.sum({5}).to_vector(); }, {"5", "(2, 3)"}},
        {"max axis -3", [&] { a.max({-3}).to_vector(); }, {"-3", "(2, 3)"}},
        {"argmax axis 2", [&] { a.argmax(2).to_vector(); }, {"2", "(2, 3)"}},
        {"transpose axis 4", [&] { a.transpose(0, 4).to_vector(); }, {"4", "(2, 3)"}},
        {"slice axis 2", [&] { a.slice(2, 0, 1).to_vector(); }, {"2", "(2, 3)"}},
        {"slice step 0", [&] { a.slice(1, 0, 2, 0).to_vector(); }, {"step"}},
        {"permute repeated axis", [&] { a.permute({0, 0}).to_vector(); }, {"(2, 3)"}},
        {"permute wrong length", [&] { a.permute({1, 0, 2}).to_vector(); }, {"(2, 3)"}},
        {"expand", [&] { a.expand({2, 4}).to_vector(); }, {"(2, 3)", "(2, 4)"}},
        {"pad pairs", [&] { a.pad({{1, 1}}).to_vector(); }, {"(2, 3)"}},
        {"cat", [&] { Tensor::cat({a, b}, 0).to_vector(); }, {"(2, 3)", "(4, 5)"}},
        {"cat axis", [&] { Tensor::cat({a, a}, 3).to_vector(); }, {"3"}},
        {"stack", [&] { Tensor::stack({a, a.reshape({3, 2})}, 0).to_vector(); }, {"(2, 3)", "(3, 2)"}},
        {"squeeze axis 7", [&] { a.squeeze(7).to_vector(); }, {"7"}},
        {"item of (2, 3)", [&] { (void)a.item(); }, {"(2, 3)"}},
        {"conv2d channels",
         [&] {
           Tensor x = Tensor::from_data(seq(75), {1, 3, 5, 5}, dev_);
           Tensor w = Tensor::from_data(seq(72), {2, 4, 3, 3}, dev_);
           x.conv2d(w).to_vector();
         },
         {"(1, 3, 5, 5)", "(2, 4, 3, 3)"}},
        {"conv2d 3-D input", [&] { a.reshape({1, 2, 3}).conv2d(b.reshape({1, 1, 4, 5})).to_vector(); }, {"(1, 2, 3)"}},
        {"max_pool kernel larger than input",
         [&] { a.reshape({1, 1, 2, 3}).max_pool2d(3).to_vector(); },
         {"(1, 1, 2, 3)"}},
        {"cross_entropy targets",
         [&] { a.cross_entropy(Tensor::from_ints({0, 1, 2}, {3}, dev_)).to_vector(); },
         {"(2, 3)", "(3"}},
        {"from_data size", [&] { Tensor::from_data({1, 2, 3}, {2, 2}, dev_).to_vector(); }, {"(2, 2)", "3"}},
        {"backward of non-scalar",
         [&] {
           Tensor x = Tensor::from_data(seq(6), {2, 3}, dev_);
           x.requires_grad();
           (x * 2.0).backward();
         },
         {"(2, 3)"}},
    };
    // Every row runs, so one report lists all the problems.
    std::string problems;
    for (auto& r : rows) {
      std::string problem = expect_error<ShapeError>(r.f, r.names);
      if (!problem.empty()) problems += std::string("\n  ") + r.what + ": " + problem;
      still_usable();
    }
    QVERIFY2(problems.empty(), problems.c_str());
  }

  void unknown_device() {
    const std::string bad = "nonexistent:7";
    Tensor a = Tensor::from_data(seq(6), {2, 3}, "cpu");
    auto p = expect_error<tl::DeviceError>([&] { Tensor::zeros({2}, tl::DType::f32, bad).to_vector(); }, {bad});
    QVERIFY2(p.empty(), p.c_str());
    p = expect_error<tl::DeviceError>([&] { a.to(bad).to_vector(); }, {bad});
    QVERIFY2(p.empty(), p.c_str());
    p = expect_error<tl::DeviceError>([&] { tl::Registry::instance().get(bad); }, {bad, "cpu"});
    QVERIFY2(p.empty(), p.c_str());
    p = expect_error<tl::DeviceError>([&] { Tensor::from_data({1}, {1}, bad).to_vector(); }, {bad});
    QVERIFY2(p.empty(), p.c_str());
    QVERIFY((a.sum({0}).to_vector() == std::vector<float>{5, 7, 9}));
  }

  // Two devices in one op is an error, raised when the op is built (before
  // anything runs), naming both devices and the way out; realize_nodes()
  // refuses a kernel reading another device's buffer the same way. Moving one
  // operand with .to() then works.
  void mixing_devices_is_an_error() {
    auto devs = tltest::available_devices();
    TL_REQUIRE(devs.size() >= 2, "a second device (PoCL)");
    Tensor a = Tensor::from_data({1, 2}, {2}, devs[0]);
    Tensor b = Tensor::from_data({3, 4}, {2}, devs[1]);
    auto p = expect_error<tl::DeviceError>([&] { (void)(a + b); }, {devs[0], devs[1], "different devices", ".to()"});
    QVERIFY2(p.empty(), p.c_str());
    p = expect_error<tl::DeviceError>([&] { (void)Tensor::cat({a, b}, 0); }, {devs[0], devs[1]});
    QVERIFY2(p.empty(), p.c_str());
    QVERIFY((a.to(devs[1]).add(b).to_vector() == std::vector<float>{4, 6}));
    QVERIFY((a.add(b.to(devs[0])).to_vector() == std::vector<float>{4, 6}));
  }

  // The helper itself must be able to fail.
  void helper_rejects() {
    QVERIFY(expect_error<tl::ShapeError>([] {}, {}) == "no exception");
    QVERIFY(!expect_error<tl::ShapeError>([] { throw tl::ShapeError("shape (2, 3)"); }, {"(4, 5)"}).empty());
    QVERIFY(!expect_error<tl::ShapeError>([] { throw std::runtime_error("(4, 5)"); }, {"(4, 5)"}).empty());
    QVERIFY(expect_error<tl::ShapeError>([] { throw tl::ShapeError("(2, 3) vs (4, 5)"); }, {"(4, 5)", "(2, 3)"}).empty());
  }
};

QTEST_GUILESS_MAIN(TestErrors)
#include "test_errors.moc"
