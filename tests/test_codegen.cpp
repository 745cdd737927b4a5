// The index simplifier: every rewrite must keep the value of the expression for
// every value its variables can take. Each case builds an index, lets the
// builders simplify it, and compares it with plain integer arithmetic over the
// variables' whole ranges.
#include <QtTest/QtTest>

#include <functional>
#include <map>
#include <string>

#include "core/codegen/expr.h"

using namespace tl;

namespace {

int64_t eval(const E& e, const std::map<std::string, int64_t>& vars) {
  switch (e->op) {
    case ExprOp::Const: return int64_t(e->value);
    case ExprOp::Var: return vars.at(e->name);
    case ExprOp::Add: return eval(e->src[0], vars) + eval(e->src[1], vars);
    case ExprOp::Mul: return eval(e->src[0], vars) * eval(e->src[1], vars);
    case ExprOp::Div: return eval(e->src[0], vars) / eval(e->src[1], vars);
    case ExprOp::Mod: return eval(e->src[0], vars) % eval(e->src[1], vars);
    default: throw std::runtime_error("unexpected op in an index");
  }
}

bool has_op(const E& e, ExprOp op) {
  if (e->op == op) return true;
  for (auto& s : e->src)
    if (has_op(s, op)) return true;
  return false;
}

// True when no Div or Mod in `e` reads variable `name`.
bool divides_var(const E& e, const std::string& name) {
  if ((e->op == ExprOp::Div || e->op == ExprOp::Mod)) {
    std::function<bool(const E&)> reads = [&](const E& x) {
      if (x->op == ExprOp::Var && x->name == name) return true;
      for (auto& s : x->src)
        if (reads(s)) return true;
      return false;
    };
    if (reads(e->src[0])) return true;
  }
  for (auto& s : e->src)
    if (divides_var(s, name)) return true;
  return false;
}

}  // namespace

class TestCodegen : public QObject {
  Q_OBJECT
 private slots:
  // The row index of a stride-2 depthwise window: (gid*W + x) / (H*W) is
  // gid / H because x < W; the inner loop variable leaves the division.
  void commonFactorLeavesTheDivision() {
    const int64_t H = 56, W = 56;
    E gid = var("gid", 0, 96 * H - 1), x = var("x", 0, W - 1);
    E row = (gid * idx(W) + x) / idx(H * W);
    E col = (gid * idx(W) + x) % idx(H * W);
    QVERIFY(!divides_var(row, "x"));
    QVERIFY(!divides_var(col, "x"));
    for (int64_t g = 0; g < 96 * H; ++g)
      for (int64_t i = 0; i < W; ++i) {
        std::map<std::string, int64_t> v{{"gid", g}, {"x", i}};
        QCOMPARE(eval(row, v), (g * W + i) / (H * W));
        QCOMPARE(eval(col, v), (g * W + i) % (H * W));
      }
  }

  // Every factor c of d, rests that fit below c and rests that do not:
  // simplified and plain arithmetic agree everywhere.
  void commonFactorKeepsValues_data() {
    QTest::addColumn<int>("c");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("rest");     // x ranges over [0, rest]
    QTest::addColumn<int>("offset");   // a constant term
    QTest::addColumn<bool>("removed");  // the division no longer reads x
    QTest::newRow("rest fits") << 7 << 3 << 6 << 0 << true;
    QTest::newRow("rest fits, constant multiple of c") << 8 << 4 << 7 << 16 << true;
    QTest::newRow("rest too large") << 7 << 3 << 7 << 0 << false;
    QTest::newRow("constant not a multiple") << 6 << 5 << 2 << 3 << false;
    QTest::newRow("c equals d") << 12 << 1 << 30 << 0 << false;
  }
  void commonFactorKeepsValues() {
    QFETCH(int, c);
    QFETCH(int, m);
    QFETCH(int, rest);
    QFETCH(int, offset);
    QFETCH(bool, removed);
    const int64_t d = int64_t(c) * m;
    E a = var("a", 0, 40), x = var("x", 0, rest);
    E sum = a * idx(c) + x + idx(offset);
    E q = sum / idx(d), r = sum % idx(d);
    if (removed) {
      QVERIFY(!divides_var(q, "x"));
      QVERIFY(!divides_var(r, "x"));
    }
    for (int64_t i = 0; i <= 40; ++i)
      for (int64_t j = 0; j <= rest; ++j) {
        std::map<std::string, int64_t> v{{"a", i}, {"x", j}};
        const int64_t s = i * c + j + offset;
        QCOMPARE(eval(q, v), s / d);
        QCOMPARE(eval(r, v), s % d);
      }
  }

  // The older rule, terms that are whole multiples of d, still applies.
  void wholeMultiplesLeaveTheDivision() {
    E a = var("a", 0, 9), x = var("x", 0, 100);
    E q = (a * idx(12) + x) / idx(12);
    QVERIFY(has_op(q, ExprOp::Div));  // x / 12 stays
    for (int64_t i = 0; i <= 9; ++i)
      for (int64_t j = 0; j <= 100; ++j) QCOMPARE(eval(q, {{"a", i}, {"x", j}}), (i * 12 + j) / 12);
  }
};

QTEST_GUILESS_MAIN(TestCodegen)
#include "test_codegen.moc"
