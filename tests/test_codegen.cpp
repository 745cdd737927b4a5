// The index simplifier: every rewrite must keep the value of the expression for
// every value its variables can take. Each rule of expr.cpp has a case that
// shows what it rewrites to (printed as a string) and that the value stays;
// random expressions built through the builders are compared with the same
// expressions in plain integer arithmetic over the variables' whole ranges,
// and every sub-expression must lie in the range the range pass gave it.
#include <QtTest/QtTest>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <functional>
#include <map>
#include <regex>
#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "core/codegen/expr.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "tests/testing.h"

using namespace tl;

namespace {

using Vars = std::map<std::string, int64_t>;

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

// The value of an integer expression, with C's truncating division. With
// `check_ranges`, fails (throws) when a sub-expression leaves its [lo, hi].
int64_t eval(const E& e, const Vars& vars, bool check_ranges = false) {
  auto at = [&](size_t i) { return eval(e->src[i], vars, check_ranges); };
  int64_t v = 0;
  switch (e->op) {
    case ExprOp::Const: v = int64_t(e->value); break;
    case ExprOp::Var: v = vars.at(e->name); break;
    case ExprOp::Neg: v = -at(0); break;
    case ExprOp::Cast: v = e->dtype == DType::boolean ? at(0) != 0 : at(0); break;
    case ExprOp::Add: v = at(0) + at(1); break;
    case ExprOp::Mul: v = at(0) * at(1); break;
    case ExprOp::Div: v = at(0) / at(1); break;
    case ExprOp::Mod: v = at(0) % at(1); break;
    case ExprOp::Max: v = std::max(at(0), at(1)); break;
    case ExprOp::CmpLt: v = at(0) < at(1); break;
    case ExprOp::CmpEq: v = at(0) == at(1); break;
    case ExprOp::And: v = at(0) && at(1); break;
    case ExprOp::Where: v = at(0) ? at(1) : at(2); break;
    default: throw std::runtime_error("unexpected op in an index");
  }
  if (check_ranges && (v < e->lo || v > e->hi))
    throw std::runtime_error("value " + std::to_string(v) + " outside the range [" + std::to_string(e->lo) + ", " +
                             std::to_string(e->hi) + "]");
  return v;
}

// A readable form: infix with parentheses around every binary op.
std::string str(const E& e) {
  auto s = [&](size_t i) { return str(e->src[i]); };
  auto infix = [&](const char* op) { return "(" + s(0) + " " + op + " " + s(1) + ")"; };
  switch (e->op) {
    case ExprOp::Const: {
      if (e->dtype == DType::boolean) return e->value != 0 ? "true" : "false";
      QString v = QString::number(e->value, 'g', 9);
      return v.toStdString() + (e->dtype == DType::f32 ? "f" : "");
    }
    case ExprOp::Var: return e->name;
    case ExprOp::Load: return "b" + std::to_string(e->buffer) + "[" + s(0) + "]";
    case ExprOp::Neg: return "-" + s(0);
    case ExprOp::Exp: return "exp(" + s(0) + ")";
    case ExprOp::Cast: return std::string(dtype_name(e->dtype)) + "(" + s(0) + ")";
    case ExprOp::Add: return infix("+");
    case ExprOp::Mul: return infix("*");
    case ExprOp::Div: return infix("/");
    case ExprOp::Mod: return infix("%");
    case ExprOp::CmpLt: return infix("<");
    case ExprOp::CmpEq: return infix("==");
    case ExprOp::And: return infix("&&");
    case ExprOp::Max: return "max(" + s(0) + ", " + s(1) + ")";
    case ExprOp::Where: return "(" + s(0) + " ? " + s(1) + " : " + s(2) + ")";
    default: return "?";
  }
}

// An expression kept as written, evaluated without any simplification: the
// reference the builders' output is compared with.
struct Plain {
  ExprOp op;
  int64_t value = 0;  // Const
  std::string name;   // Var
  std::vector<Plain> src;
  int64_t eval(const Vars& v) const {
    auto at = [&](size_t i) { return src[i].eval(v); };
    switch (op) {
      case ExprOp::Const: return value;
      case ExprOp::Var: return v.at(name);
      case ExprOp::Neg: return -at(0);
      case ExprOp::Add: return at(0) + at(1);
      case ExprOp::Mul: return at(0) * at(1);
      case ExprOp::Div: return at(0) / at(1);
      case ExprOp::Mod: return at(0) % at(1);
      case ExprOp::Max: return std::max(at(0), at(1));
      case ExprOp::CmpLt: return at(0) < at(1);
      case ExprOp::And: return at(0) && at(1);
      case ExprOp::Where: return at(0) ? at(1) : at(2);
      default: throw std::runtime_error("unexpected op");
    }
  }
};

// The loop variables of the random expressions: two that start at 0 as
// kernel loops do, and one that goes negative (an index before padding).
struct VarSpec {
  const char* name;
  int64_t lo, hi;
};
const VarSpec kVars[] = {{"i", 0, 11}, {"j", 0, 5}, {"k", -3, 3}};

// A random integer expression of at most `depth` levels, built twice: through
// the simplifying builders (returned) and as written (`plain`). Divisors are
// positive constants, as in every index the renderer writes.
E random_index(std::mt19937& rng, int depth, Plain& plain) {
  auto pick = [&](uint32_t n) { return rng() % n; };
  static const int64_t kConstants[] = {0, 1, 2, 3, 4, 6, 8, 12, -1, -4};
  static const int64_t kDivisors[] = {1, 2, 3, 4, 6, 8, 12, 24};
  if (depth == 0 || pick(5) == 0) {
    if (pick(3) == 0) {
      plain = {ExprOp::Const, kConstants[pick(10)], "", {}};
      return idx(plain.value);
    }
    const VarSpec& v = kVars[pick(3)];
    plain = {ExprOp::Var, 0, v.name, {}};
    return var(v.name, v.lo, v.hi);
  }
  Plain a, b, c;
  switch (pick(9)) {
    case 0:
    case 1: {
      E x = random_index(rng, depth - 1, a), y = random_index(rng, depth - 1, b);
      plain = {ExprOp::Add, 0, "", {a, b}};
      return x + y;
    }
    case 2: {
      E x = random_index(rng, depth - 1, a);
      const int64_t k = kConstants[pick(10)];
      plain = {ExprOp::Mul, 0, "", {a, {ExprOp::Const, k, "", {}}}};
      return pick(2) ? x * idx(k) : idx(k) * x;
    }
    case 3:
    case 4: {
      E x = random_index(rng, depth - 1, a);
      const int64_t d = kDivisors[pick(8)];
      const ExprOp op = pick(2) ? ExprOp::Div : ExprOp::Mod;
      plain = {op, 0, "", {a, {ExprOp::Const, d, "", {}}}};
      return binary(op, x, idx(d));
    }
    case 5: {
      E x = random_index(rng, depth - 1, a);
      plain = {ExprOp::Neg, 0, "", {a}};
      return unary(ExprOp::Neg, x);
    }
    case 6: {
      E x = random_index(rng, depth - 1, a), y = random_index(rng, depth - 1, b);
      plain = {ExprOp::Max, 0, "", {a, b}};
      return binary(ExprOp::Max, x, y);
    }
    default: {
      // where(x < y && z < w, p, q): the shape of a padding mask
      E x = random_index(rng, depth - 1, a), y = random_index(rng, depth - 1, b);
      E p = random_index(rng, depth - 1, c);
      Plain d, q;
      E r = random_index(rng, depth - 1, d);
      E w = random_index(rng, depth - 1, q);
      Plain lt1{ExprOp::CmpLt, 0, "", {a, b}}, lt2{ExprOp::CmpLt, 0, "", {c, d}};
      plain = {ExprOp::Where, 0, "", {{ExprOp::And, 0, "", {lt1, lt2}}, q, a}};
      return where(binary(ExprOp::And, binary(ExprOp::CmpLt, x, y), binary(ExprOp::CmpLt, p, r)), w, x);
    }
  }
}

size_t size(const E& e) {
  size_t n = 1;
  for (auto& s : e->src) n += size(s);
  return n;
}
size_t size(const Plain& p) {
  size_t n = 1;
  for (auto& s : p.src) n += size(s);
  return n;
}

// Every assignment of the three variables.
template <typename F>
void for_all_vars(F f) {
  for (int64_t i = kVars[0].lo; i <= kVars[0].hi; ++i)
    for (int64_t j = kVars[1].lo; j <= kVars[1].hi; ++j)
      for (int64_t k = kVars[2].lo; k <= kVars[2].hi; ++k) f(Vars{{"i", i}, {"j", j}, {"k", k}});
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

// Empty when `got` equals `reference` for every value of `vars` (each over
// its whole range); otherwise the first difference.
std::string differs(const E& got, const std::function<int64_t(const Vars&)>& reference,
                    const std::vector<VarSpec>& vars) {
  Vars v;
  std::function<std::string(size_t)> walk = [&](size_t n) -> std::string {
    if (n == vars.size()) {
      const int64_t want = reference(v), have = eval(got, v, true);
      if (want == have) return "";
      std::string at;
      for (auto& [name, value] : v) at += " " + name + "=" + std::to_string(value);
      return str(got) + " is " + std::to_string(have) + " instead of " + std::to_string(want) + " at" + at;
    }
    for (int64_t x = vars[n].lo; x <= vars[n].hi; ++x) {
      v[vars[n].name] = x;
      if (std::string p = walk(n + 1); !p.empty()) return p;
    }
    return "";
  };
  try {
    return walk(0);
  } catch (const std::exception& e) {
    return str(got) + ": " + e.what();
  }
}

const VarSpec I = kVars[0], J = kVars[1], K = kVars[2];
E v(const VarSpec& s) { return var(s.name, s.lo, s.hi); }
E f32(double x) { return constant(x, DType::f32); }
E boolean(bool x) { return constant(x, DType::boolean); }

}  // namespace

// A rewrite: `got` prints as `expected`, and keeps the value of `reference`.
#define EXPECT_REWRITE(got, expected, reference, ...)                            \
  do {                                                                          \
    const E got_ = (got);                                                       \
    QCOMPARE(str(got_), std::string(expected));                                 \
    const std::string problem_ = differs(got_, reference, {__VA_ARGS__});       \
    QVERIFY2(problem_.empty(), problem_.c_str());                               \
  } while (0)

// A depthwise convolution as a sum of its taps, each a view of the padded
// input: for stride s the padded rows are viewed as (P, s), and tap k reads
// row k / s of phase k % s (the rows of window_taps() in core/depthwise.cpp).
Tensor tap_depthwise(const Tensor& x, const Tensor& w, int64_t k, int64_t s, int64_t pad, int64_t out) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), P = out + (k - 1) / s;
  const std::pair<int64_t, int64_t> p{pad, s * P - H - pad};
  Tensor phases = x.pad({{0, 0}, {0, 0}, p, p}).reshape({N, C, P, s, P, s});
  Tensor acc;
  for (int64_t kh = 0; kh < k; ++kh)
    for (int64_t kw = 0; kw < k; ++kw) {
      Tensor tap = phases.slice(2, kh / s, kh / s + out)
                       .slice(3, kh % s, kh % s + 1)
                       .slice(4, kw / s, kw / s + out)
                       .slice(5, kw % s, kw % s + 1)
                       .reshape({N, C, out, out});
      Tensor term = tap * w.reshape({C, k * k}).slice(1, kh * k + kw, kh * k + kw + 1).reshape({1, C, 1, 1});
      acc = kh + kw == 0 ? term : acc + term;
    }
  return acc;
}

class TestCodegen : public QObject {
  Q_OBJECT
 private slots:
  // Each rule of expr.cpp's list has a slot rule_NAME below.
  void everyRuleHasATest() {
    const std::vector<std::string> names = binary_rule_names();
    QVERIFY(names.size() >= 10);
    for (const std::string& name : names) {
      const QByteArray slot = QByteArray("rule_") + name.c_str() + "()";
      QVERIFY2(metaObject()->indexOfSlot(slot.constData()) >= 0, ("no test for the rule " + name).c_str());
    }
  }

  void rule_fold_constants() {
    QCOMPARE(str(idx(7) / idx(2)), std::string("3"));
    QCOMPARE(str(idx(-7) / idx(2)), std::string("-3"));  // C truncates toward zero
    QCOMPARE(str(idx(-7) % idx(3)), std::string("-1"));
    QCOMPARE(str(idx(6) * idx(-4) + idx(1)), std::string("-23"));
    QCOMPARE(str(binary(ExprOp::Max, idx(2), idx(-5))), std::string("2"));
    QCOMPARE(str(binary(ExprOp::CmpLt, idx(3), idx(5))), std::string("true"));
    QCOMPARE(str(binary(ExprOp::CmpEq, idx(3), idx(5))), std::string("false"));
    // floats fold in float32, as the kernel would compute them
    E third = f32(1) / f32(3);
    QVERIFY(third->op == ExprOp::Const && third->dtype == DType::f32);
    QCOMPARE(third->value, double(1.0f / 3.0f));
    QCOMPARE(binary(ExprOp::Pow, f32(2), f32(0.5))->value, double(std::pow(2.0f, 0.5f)));
  }

  void rule_constant_to_the_right() {
    EXPECT_REWRITE(idx(3) + v(I), "(i + 3)", [](const Vars& x) { return 3 + x.at("i"); }, I);
    EXPECT_REWRITE(idx(3) * v(K), "(k * 3)", [](const Vars& x) { return 3 * x.at("k"); }, K);
    // Not for the others: 3 / i is not i / 3.
    QCOMPARE(str(idx(3) / var("n", 1, 9)), std::string("(3 / n)"));
  }

  void rule_add_zero() {
    EXPECT_REWRITE(v(K) + idx(0), "k", [](const Vars& x) { return x.at("k"); }, K);
    QCOMPARE(str(load(0, DType::f32, v(I)) + f32(0)), std::string("b0[i]"));
  }

  void rule_merge_constant_offsets() {
    EXPECT_REWRITE((v(K) + idx(2)) + idx(5), "(k + 7)", [](const Vars& x) { return x.at("k") + 7; }, K);
    EXPECT_REWRITE((v(I) + idx(-2)) + idx(2), "i", [](const Vars& x) { return x.at("i"); }, I);
    // float addition is not associative: kept as written
    QCOMPARE(str((load(0, DType::f32, v(I)) + f32(2)) + f32(5)), std::string("((b0[i] + 2f) + 5f)"));
  }

  void rule_multiply_by_one() {
    EXPECT_REWRITE(v(K) * idx(1), "k", [](const Vars& x) { return x.at("k"); }, K);
    QCOMPARE(str(load(0, DType::f32, v(I)) * f32(1)), std::string("b0[i]"));
  }

  void rule_multiply_by_zero() {
    EXPECT_REWRITE(v(K) * idx(0), "0", [](const Vars&) { return 0; }, K);
    // inf * 0 is NaN: a float product by zero stays
    QCOMPARE(str(load(0, DType::f32, v(I)) * f32(0)), std::string("(b0[i] * 0f)"));
  }

  void rule_divide_by_one() {
    // whatever the sign of k
    EXPECT_REWRITE(v(K) / idx(1), "k", [](const Vars& x) { return x.at("k"); }, K);
    EXPECT_REWRITE(v(K) % idx(1), "0", [](const Vars&) { return 0; }, K);
  }

  void rule_divide_nested() {
    const VarSpec R{"r", 0, 500};
    EXPECT_REWRITE(v(R) / idx(20) / idx(20), "(r / 400)", [](const Vars& x) { return x.at("r") / 20 / 20; }, R);
    // k can be negative: left as written
    EXPECT_REWRITE(v(K) / idx(2) / idx(2), "((k / 2) / 2)", [](const Vars& x) { return x.at("k") / 2 / 2; }, K);
  }

  // (x % a) + ((x / a) % b)*a + (x / (a*b))*(a*b) is x, whatever a and b.
  void rule_recombine_split_index() {
    const VarSpec R{"r", 0, 12799}, G{"g", 0, 31};
    auto split3 = [](int64_t a, int64_t b) {
      return [a, b](const Vars& x) {
        const int64_t r = x.at("r");
        return r % a + (r / a) % b * a + r / (a * b) * (a * b);
      };
    };
    EXPECT_REWRITE(v(R) % idx(20) + (v(R) / idx(20)) % idx(20) * idx(20) + v(R) / idx(400) * idx(400), "r",
                   split3(20, 20), R);
    // any order of the terms, other sizes, the outer part written with nested divisions
    EXPECT_REWRITE(v(R) / idx(7) / idx(5) * idx(35) + (v(R) / idx(7)) % idx(5) * idx(7) + v(R) % idx(7), "r",
                   split3(7, 5), R);
    // beside other terms, with a common factor (a flat index of a 4-D tensor)
    EXPECT_REWRITE(v(G) * idx(12800) + v(R) / idx(400) * idx(1200) + (v(R) / idx(20)) % idx(20) * idx(60) +
                       v(R) % idx(20) * idx(3),
                   "((g * 12800) + (r * 3))",
                   [](const Vars& x) {
                     const int64_t r = x.at("r");
                     return x.at("g") * 12800 + r / 400 * 1200 + (r / 20) % 20 * 60 + r % 20 * 3;
                   },
                   G, R);
    // two parts of three: the low parts join into one modulo
    EXPECT_REWRITE(v(R) % idx(20) + (v(R) / idx(20)) % idx(20) * idx(20), "(r % 400)",
                   [](const Vars& x) { return x.at("r") % 20 + (x.at("r") / 20) % 20 * 20; }, R);
    // Must not apply: a different divisor in the high part,
    EXPECT_REWRITE(v(R) % idx(20) + v(R) / idx(21) * idx(20), "((r % 20) + ((r / 21) * 20))",
                   [](const Vars& x) { return x.at("r") % 20 + x.at("r") / 21 * 20; }, R);
    // a scale that does not match the divisor,
    EXPECT_REWRITE(v(R) % idx(20) + v(R) / idx(20) * idx(21), "((r % 20) + ((r / 20) * 21))",
                   [](const Vars& x) { return x.at("r") % 20 + x.at("r") / 20 * 21; }, R);
    // a missing middle term (r % 20 + (r / 400)*400 is not r),
    EXPECT_REWRITE(v(R) % idx(20) + v(R) / idx(400) * idx(400), "((r % 20) + ((r / 400) * 400))",
                   [](const Vars& x) { return x.at("r") % 20 + x.at("r") / 400 * 400; }, R);
    // different variables in the two parts,
    EXPECT_REWRITE(v(I) % idx(4) + v(J) / idx(4) * idx(4), "((i % 4) + ((j / 4) * 4))",
                   [](const Vars& x) { return x.at("i") % 4 + x.at("j") / 4 * 4; }, I, J);
    // and a value that may be negative.
    EXPECT_REWRITE(v(K) % idx(2) + (v(K) / idx(2)) % idx(2) * idx(2), "((k % 2) + (((k / 2) % 2) * 2))",
                   [](const Vars& x) { return x.at("k") % 2 + (x.at("k") / 2) % 2 * 2; }, K);
  }

  void rule_divide_smaller_value() {
    EXPECT_REWRITE(v(J) / idx(6), "0", [](const Vars&) { return 0; }, J);
    EXPECT_REWRITE(v(J) % idx(6), "j", [](const Vars& x) { return x.at("j"); }, J);
    // j can reach 5: not below 5
    EXPECT_REWRITE(v(J) % idx(5), "(j % 5)", [](const Vars& x) { return x.at("j") % 5; }, J);
    // k can be negative
    EXPECT_REWRITE(v(K) / idx(4), "(k / 4)", [](const Vars& x) { return x.at("k") / 4; }, K);
  }

  void rule_divide_exact_multiple() {
    EXPECT_REWRITE(v(I) * idx(6) / idx(6), "i", [](const Vars& x) { return x.at("i"); }, I);
    EXPECT_REWRITE(v(I) * idx(6) % idx(6), "0", [](const Vars&) { return 0; }, I);
    // needs i >= 0: k * 6 / 6 is left alone
    EXPECT_REWRITE(v(K) * idx(6) / idx(6), "((k * 6) / 6)", [](const Vars& x) { return x.at("k"); }, K);
  }

  void rule_divide_whole_terms() {
    const VarSpec A{"a", 0, 9}, X{"x", 0, 100};
    E sum = v(A) * idx(24) + v(X) + idx(48);
    EXPECT_REWRITE(sum / idx(12), "(((a * 2) + 4) + (x / 12))",
                   [](const Vars& x) { return (x.at("a") * 24 + x.at("x") + 48) / 12; }, A, X);
    EXPECT_REWRITE(sum % idx(12), "(x % 12)", [](const Vars& x) { return (x.at("a") * 24 + x.at("x") + 48) % 12; },
                   A, X);
    // a rest that can be negative (k) leaves the division whole
    EXPECT_REWRITE((v(A) * idx(12) + idx(12) + v(K)) / idx(12), "((((a * 12) + 12) + k) / 12)",
                   [](const Vars& x) { return (x.at("a") * 12 + 12 + x.at("k")) / 12; }, A, K);
    // ... unless its range is non-negative: k + 3 lies in [0, 6]
    EXPECT_REWRITE((v(A) * idx(12) + v(K) + idx(3)) / idx(12), "a",
                   [](const Vars& x) { return (x.at("a") * 12 + x.at("k") + 3) / 12; }, A, K);
    // a whole part that can be negative is fine while the sum is not
    EXPECT_REWRITE((v(K) * idx(12) + idx(36) + v(J)) / idx(12), "(k + 3)",
                   [](const Vars& x) { return (x.at("k") * 12 + 36 + x.at("j")) / 12; }, K, J);
  }

  // A coefficient larger than the divisor keeps only its remainder: the
  // window of a padded axis, (x + k*59) % 58 with x < 56 and k < 3, is x + k.
  void largeCoefficientsReduce() {
    const VarSpec X{"x", 0, 55}, Kw{"kw", 0, 2};
    E sum = v(X) + v(Kw) * idx(59);
    EXPECT_REWRITE(sum % idx(58), "(x + kw)", [](const Vars& x) { return (x.at("x") + x.at("kw") * 59) % 58; }, X,
                   Kw);
    EXPECT_REWRITE(sum / idx(58), "kw", [](const Vars& x) { return (x.at("x") + x.at("kw") * 59) / 58; }, X, Kw);
    // the window one step wider reaches 58: the modulo stays, on the smaller sum
    const VarSpec Kw4{"kw", 0, 3};
    EXPECT_REWRITE((v(X) + v(Kw4) * idx(59)) % idx(58), "((x + kw) % 58)",
                   [](const Vars& x) { return (x.at("x") + x.at("kw") * 59) % 58; }, X, Kw4);
    // a constant larger than the divisor, beside a variable
    EXPECT_REWRITE((v(X) + idx(130)) / idx(58), "(((x + 14) / 58) + 2)",
                   [](const Vars& x) { return (x.at("x") + 130) / 58; }, X);
    // a rest that can be negative leaves the division whole
    EXPECT_REWRITE((v(K) + v(Kw) * idx(59)) % idx(58), "((k + (kw * 59)) % 58)",
                   [](const Vars& x) { return (x.at("k") + x.at("kw") * 59) % 58; }, K, Kw);
  }

  void rule_compare_scaled() {
    auto lt = [](E a, E b) { return binary(ExprOp::CmpLt, a, b); };
    const VarSpec X{"x", -9, 9};
    EXPECT_REWRITE(lt(v(X) * idx(2), idx(5)), "(x < 3)", [](const Vars& x) { return int64_t(x.at("x") * 2 < 5); }, X);
    EXPECT_REWRITE(lt(v(X) * idx(3), idx(-4)), "(x < -1)",
                   [](const Vars& x) { return int64_t(x.at("x") * 3 < -4); }, X);
    EXPECT_REWRITE(lt(idx(-1), v(X) * idx(2)), "(-1 < x)",
                   [](const Vars& x) { return int64_t(-1 < x.at("x") * 2); }, X);
    EXPECT_REWRITE(lt(idx(4), v(X) * idx(3)), "(1 < x)", [](const Vars& x) { return int64_t(4 < x.at("x") * 3); }, X);
    // a negative factor is left alone
    EXPECT_REWRITE(lt(v(X) * idx(-2), idx(5)), "((x * -2) < 5)",
                   [](const Vars& x) { return int64_t(x.at("x") * -2 < 5); }, X);
  }

  void rule_max_by_range() {
    auto max = [](E a, E b) { return binary(ExprOp::Max, a, b); };
    EXPECT_REWRITE(max(v(J), idx(-1)), "j", [](const Vars& x) { return x.at("j"); }, J);
    EXPECT_REWRITE(max(idx(0), v(J)), "j", [](const Vars& x) { return x.at("j"); }, J);
    EXPECT_REWRITE(max(v(J) + idx(11), v(I)), "(j + 11)", [](const Vars& x) { return x.at("j") + 11; }, I, J);
    EXPECT_REWRITE(max(v(J), v(K)), "max(j, k)", [](const Vars& x) { return std::max(x.at("j"), x.at("k")); }, J,
                   K);
  }

  void rule_divide_common_factor() {
    const VarSpec G{"g", 0, 40}, X{"x", 0, 6};
    E sum = v(G) * idx(7) + v(X);
    EXPECT_REWRITE(sum / idx(21), "(g / 3)", [](const Vars& x) { return (x.at("g") * 7 + x.at("x")) / 21; }, G, X);
    EXPECT_REWRITE(sum % idx(21), "(((g % 3) * 7) + x)",
                   [](const Vars& x) { return (x.at("g") * 7 + x.at("x")) % 21; }, G, X);
    // x up to 7 does not fit below 7
    const VarSpec Y{"y", 0, 7};
    EXPECT_REWRITE((v(G) * idx(7) + v(Y)) / idx(21), "(((g * 7) + y) / 21)",
                   [](const Vars& x) { return (x.at("g") * 7 + x.at("y")) / 21; }, G, Y);
  }

  void rule_and_with_constant() {
    E c = binary(ExprOp::CmpLt, v(K), idx(2));
    auto ref = [](const Vars& x) { return int64_t(x.at("k") < 2); };
    EXPECT_REWRITE(binary(ExprOp::And, c, boolean(true)), "(k < 2)", ref, K);
    EXPECT_REWRITE(binary(ExprOp::And, boolean(true), c), "(k < 2)", ref, K);
    EXPECT_REWRITE(binary(ExprOp::And, c, boolean(false)), "false", [](const Vars&) { return 0; }, K);
    EXPECT_REWRITE(binary(ExprOp::And, boolean(false), c), "false", [](const Vars&) { return 0; }, K);
  }

  void rule_compare_by_range() {
    auto lt = [](E a, E b) { return binary(ExprOp::CmpLt, a, b); };
    // two variables: decided when their ranges do not overlap
    EXPECT_REWRITE(lt(v(J), v(I) + idx(6)), "true", [](const Vars&) { return 1; }, I, J);
    EXPECT_REWRITE(lt(v(I) + idx(5), v(J)), "false", [](const Vars&) { return 0; }, I, J);
    EXPECT_REWRITE(lt(v(J), v(I) + idx(5)), "(j < (i + 5))",
                   [](const Vars& x) { return int64_t(x.at("j") < x.at("i") + 5); }, I, J);
    EXPECT_REWRITE(lt(v(J), idx(6)), "true", [](const Vars&) { return 1; }, J);
    EXPECT_REWRITE(lt(v(J), idx(0)), "false", [](const Vars&) { return 0; }, J);
    EXPECT_REWRITE(lt(idx(-1), v(J)), "true", [](const Vars&) { return 1; }, J);
    EXPECT_REWRITE(lt(idx(5), v(J)), "false", [](const Vars&) { return 0; }, J);
    EXPECT_REWRITE(lt(v(J), idx(5)), "(j < 5)", [](const Vars& x) { return int64_t(x.at("j") < 5); }, J);
  }

  // The rewrites of unary(), cast() and where().
  void unaryCastAndWhereRewrites() {
    QCOMPARE(unary(ExprOp::Exp, f32(1))->value, double(std::exp(1.0f)));
    EXPECT_REWRITE(unary(ExprOp::Neg, unary(ExprOp::Neg, v(K))), "k", [](const Vars& x) { return x.at("k"); }, K);
    QCOMPARE(str(unary(ExprOp::Neg, idx(3))), std::string("-3"));
    // an integer negation goes through sums and constant factors
    EXPECT_REWRITE(unary(ExprOp::Neg, v(K) * idx(3) + idx(2)), "((k * -3) + -2)",
                   [](const Vars& x) { return -(x.at("k") * 3 + 2); }, K);
    EXPECT_REWRITE(cast(v(K), DType::i32), "k", [](const Vars& x) { return x.at("k"); }, K);
    QCOMPARE(str(cast(f32(-2.7), DType::i32)), std::string("-2"));
    QCOMPARE(str(cast(idx(5), DType::boolean)), std::string("true"));
    EXPECT_REWRITE(where(boolean(true), v(I), v(J)), "i", [](const Vars& x) { return x.at("i"); }, I, J);
    EXPECT_REWRITE(where(boolean(false), v(I), v(J)), "j", [](const Vars& x) { return x.at("j"); }, I, J);
  }

  // substitute() rebuilds through the builders: a decided mask picks its side.
  void substituteRebuilds() {
    E inside = binary(ExprOp::CmpLt, v(K), idx(2));
    E e = where(inside, v(K) * idx(3), idx(-1)) + v(J);
    EXPECT_REWRITE(substitute(e, {{inside.get(), boolean(true)}}), "((k * 3) + j)",
                   [](const Vars& x) { return x.at("k") * 3 + x.at("j"); }, K, J);
    EXPECT_REWRITE(substitute(e, {{inside.get(), boolean(false)}}), "(j + -1)",
                   [](const Vars& x) { return x.at("j") - 1; }, K, J);
    // nothing replaced: the very same expression
    QVERIFY(substitute(e, {}) == e);
  }

  // loop_bounds on masks of windows read along x: with x's coefficient 1
  // (stride 1), 2 (stride 2) and -1 (a flip). For every value of the other
  // variables, x satisfies every bound exactly where every masked comparison
  // is true, and the value with the comparisons replaced by true equals the
  // original there.
  void loopBoundsOfWindows_data() {
    QTest::addColumn<int>("coef");
    QTest::addColumn<int>("width");  // x in [0, width)
    QTest::addColumn<int>("size");   // the source axis: 0 <= coef*x + k - 1 (+ flip) < size
    QTest::newRow("stride 1, pad 1") << 1 << 8 << 8;
    QTest::newRow("stride 2, pad 1") << 2 << 4 << 8;
    QTest::newRow("stride 3, pad 1") << 3 << 3 << 8;
    QTest::newRow("flipped") << -1 << 8 << 8;
    QTest::newRow("window wider than the map") << 1 << 3 << 2;
  }
  void loopBoundsOfWindows() {
    QFETCH(int, coef);
    QFETCH(int, width);
    QFETCH(int, size);
    const VarSpec X{"x", 0, width - 1}, Kw{"kw", 0, 4}, Row{"row", 0, 3};
    E x = v(X);
    E pos = x * idx(coef) + v(Kw) + idx(coef < 0 ? width - 2 : -1);  // the source position
    E mask = binary(ExprOp::And, binary(ExprOp::CmpLt, idx(-1), pos), binary(ExprOp::CmpLt, pos, idx(size)));
    E value = where(mask, assume_range(pos, 0, size - 1) + v(Row) * idx(size), idx(-7));
    const LoopBounds b = loop_bounds(value, x);
    QCOMPARE(int(b.bounds.size()), 2);
    QVERIFY(!b.lower.empty() && !b.upper.empty());
    std::unordered_map<const Expr*, E> holds;
    for (auto& c : b.bounds) holds[c.get()] = boolean(true);
    E inside = substitute(value, holds);
    QVERIFY(!has_op(inside, ExprOp::Where));
    for (int64_t kw = Kw.lo; kw <= Kw.hi; ++kw)
      for (int64_t row = Row.lo; row <= Row.hi; ++row)
        for (int64_t xi = 0; xi < width; ++xi) {
          Vars at{{"x", xi}, {"kw", kw}, {"row", row}};
          bool within = true;
          for (auto& l : b.lower) within = within && xi >= eval(l, at, true);
          for (auto& u : b.upper) within = within && xi < eval(u, at, true);
          QCOMPARE(within, eval(mask, at) != 0);
          if (within) QCOMPARE(eval(inside, at, true), eval(value, at));
        }
  }

  // A test free of x is invariant when it is and-ed with a bound on x (the
  // pad's mask on an outer axis of a window), not when it stands alone (the
  // parts of a concatenation along an outer axis).
  void loopBoundsInvariantTests() {
    E x = var("x", 0, 7);
    E row = binary(ExprOp::CmpLt, v(J), idx(4)), col = binary(ExprOp::CmpLt, x + v(J), idx(9));
    const LoopBounds masked = loop_bounds(where(binary(ExprOp::And, row, col), x, idx(0)), x);
    QCOMPARE(int(masked.bounds.size()), 1);
    QCOMPARE(int(masked.invariant.size()), 1);
    QVERIFY(masked.invariant[0] == row);
    // the same row test built again, alone, in another term: invariant too
    E row_again = binary(ExprOp::CmpLt, v(J), idx(4));
    const LoopBounds taps =
        loop_bounds(where(binary(ExprOp::And, row, col), x, idx(0)) + where(row_again, x, idx(1)), x);
    QCOMPARE(int(taps.invariant.size()), 2);
    const LoopBounds parts = loop_bounds(where(row, x, x + idx(8)), x);
    QCOMPARE(int(parts.bounds.size()), 0);
    QCOMPARE(int(parts.invariant.size()), 0);
  }

  // A comparison that is not linear in x is no bound.
  void loopBoundsLeaveOthers() {
    E x = var("x", 0, 7);
    E square = binary(ExprOp::CmpLt, x * x, idx(20));
    QCOMPARE(int(loop_bounds(where(square, x, idx(0)), x).bounds.size()), 0);
    E modulo = binary(ExprOp::CmpLt, (x + v(J)) % idx(5), idx(3));
    QCOMPARE(int(loop_bounds(where(modulo, x, idx(0)), x).bounds.size()), 0);
    // x*2 < b0[0]: a bound would need the floor of a quotient of a value
    // whose range is unknown
    E unknown = binary(ExprOp::CmpLt, x * idx(2), load(0, DType::i32, idx(0)));
    QCOMPARE(int(loop_bounds(where(unknown, x, idx(0)), x).bounds.size()), 0);
  }

  // Padded windows on the cpu device, end to end: convolutions, depthwise
  // convolutions and pooling, at strides 1 and 2, on rows wide enough to be
  // walked by a loop and on 7x7 maps walked as (y, x). The rows of the window
  // kernels split at the pad (x_lo, x_hi), the middle loop reads without a
  // guard, and every output equals a direct computation in double precision.
  // A convolution has no window kernel there: its GEMM gathers the windows
  // from the image as it packs B (ConvGather).
  void paddedWindowsSplitTheirRows_data() {
    QTest::addColumn<int>("channels");
    QTest::addColumn<int>("size");
    QTest::addColumn<int>("kernel");
    QTest::addColumn<int>("stride");
    QTest::addColumn<int>("groups");  // 0: max pooling
    QTest::newRow("conv 3x3 s1") << 3 << 12 << 3 << 1 << 1;
    QTest::newRow("conv 3x3 s2") << 3 << 17 << 3 << 2 << 1;
    QTest::newRow("conv 7x7 s2") << 2 << 20 << 7 << 2 << 1;
    // depthwise as EfficientNet-Lite0 writes it: a sum of K*K taps, each a
    // view of the input through the pad
    QTest::newRow("depthwise 3x3 s1") << 4 << 12 << 3 << 1 << 4;
    QTest::newRow("depthwise 5x5 s2") << 4 << 16 << 5 << 2 << 4;
    QTest::newRow("depthwise 5x5 s1, 7x7 map") << 4 << 7 << 5 << 1 << 4;
    QTest::newRow("depthwise 3x3 s2, 7x7 map") << 4 << 7 << 3 << 2 << 4;
    QTest::newRow("max pool 3x3 s2") << 3 << 18 << 3 << 2 << 0;
  }
  void paddedWindowsSplitTheirRows() {
    QFETCH(int, channels);
    QFETCH(int, size);
    QFETCH(int, kernel);
    QFETCH(int, stride);
    QFETCH(int, groups);
    const int pad = kernel / 2, out = (size + 2 * pad - kernel) / stride + 1;
    const int out_channels = groups ? channels : channels, in_per_group = groups ? channels / groups : 1;
    Generator gen(7);
    Tensor x = Tensor::randn({1, channels, size, size}, gen, "cpu");
    Tensor w = Tensor::randn({out_channels, in_per_group, kernel, kernel}, gen, "cpu");
    x.realize();
    w.realize();
    std::vector<float> got;
    std::string sources, names;
    {
      ProfileCapture capture;
      Conv2dOptions o;
      o.stride_h = o.stride_w = stride, o.pad_h = o.pad_w = pad, o.groups = std::max(groups, 1);
      Tensor y = groups == 1 ? x.conv2d(w, Tensor(), o) : groups ? tap_depthwise(x, w, kernel, stride, pad, out)
                                                                  : x.max_pool2d(kernel, stride, pad);
      got = y.to_vector();
      for (auto& r : capture.records()) sources += r.kernel->source, names += r.kernel->name + " ";
    }
    const std::vector<float> xv = x.to_vector(), wv = w.to_vector();
    QCOMPARE(int(got.size()), out_channels * out * out);
    for (int co = 0; co < out_channels; ++co)
      for (int oy = 0; oy < out; ++oy)
        for (int ox = 0; ox < out; ++ox) {
          const int g = groups ? co / (out_channels / groups) : co;
          double want = groups ? 0 : -INFINITY;
          for (int ci = 0; ci < in_per_group; ++ci)
            for (int ky = 0; ky < kernel; ++ky)
              for (int kx = 0; kx < kernel; ++kx) {
                const int iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
                if (iy < 0 || iy >= size || ix < 0 || ix >= size) continue;
                const double in = xv[((g * in_per_group + ci) * size + iy) * size + ix];
                if (groups)
                  want += in * wv[((co * in_per_group + ci) * kernel + ky) * kernel + kx];
                else
                  want = std::max(want, in);
              }
          const float have = got[(co * out + oy) * out + ox];
          QVERIFY2(std::abs(have - want) <= 1e-4 * (1 + std::abs(want)),
                   (std::to_string(have) + " != " + std::to_string(want) + " at " + std::to_string(co) + "," +
                    std::to_string(oy) + "," + std::to_string(ox))
                       .c_str());
        }
    // The split: a loop over the middle of each row whose loads carry no
    // guard (between x_lo and x_hi, computed per row). (Tensor::max_pool2d is a reduction
    // over the window, whose kernel has no row loop to split.)
    if (!groups) return;
    if (groups == 1) {
      QVERIFY2(names.rfind("GEMM", 0) == 0 && names.find(' ') + 1 == names.size(), names.c_str());
      return;
    }
    bool unguarded = false;
    for (size_t at = sources.find("for (int x = "); at != std::string::npos; at = sources.find("for (int x = ", at + 1)) {
      const size_t line = sources.rfind('\n', at) + 1;
      const std::string end = "\n" + sources.substr(line, at - line) + "}";
      const std::string body = sources.substr(at, sources.find(end, at) - at);
      unguarded = unguarded || body.find('?') == std::string::npos;
    }
    QVERIFY2(unguarded, sources.c_str());
  }

  // The range pass on its own.
  void rangesOfNodes() {
    auto range = [](const E& e) { return std::make_pair(e->lo, e->hi); };
    using R = std::pair<int64_t, int64_t>;
    QCOMPARE(range(v(I) * idx(6) + v(J)), R(0, 71));
    QCOMPARE(range(v(K) * idx(-2)), R(-6, 6));
    QCOMPARE(range(unary(ExprOp::Neg, v(J))), R(-5, 0));
    QCOMPARE(range((v(I) + idx(1)) / idx(4)), R(0, 3));
    QCOMPARE(range(v(I) % idx(5)), R(0, 4));
    QCOMPARE(range(binary(ExprOp::Max, v(K), v(J))), R(0, 5));
    QCOMPARE(range(where(binary(ExprOp::CmpLt, v(K), idx(0)), v(J), v(K))), R(-3, 5));
    QCOMPARE(range(cast(v(K), DType::boolean)), R(0, 1));
    // unknown: a negative dividend, a load, a float cast to int, an overflow
    const R unknown(INT32_MIN, INT32_MAX);
    QCOMPARE(range(v(K) / idx(2)), unknown);
    QCOMPARE(range(load(0, DType::i32, v(I))), unknown);
    QCOMPARE(range(cast(where(binary(ExprOp::CmpLt, v(K), idx(0)), f32(3), f32(5)), DType::i32)), unknown);
    QCOMPARE(range(var("n", 0, 1 << 20) * idx(1 << 12)), unknown);
    // assume_range narrows, never widens
    QCOMPARE(range(assume_range(v(K), 0, 9)), R(0, 3));
  }

  // Random index expressions of the renderer's kinds: the builders' result
  // equals the expression as written for every value of the variables, and
  // every sub-expression stays inside the range the range pass gave it.
  void randomIndicesKeepTheirValues() {
    std::mt19937 rng(2026);
    int rewritten = 0;
    for (int n = 0; n < 400; ++n) {
      Plain plain;
      E e = random_index(rng, 4, plain);
      std::string problem;
      try {
        for_all_vars([&](const Vars& x) {
          if (!problem.empty()) return;
          const int64_t want = plain.eval(x), have = eval(e, x, true);
          if (want != have)
            problem = str(e) + " is " + std::to_string(have) + " instead of " + std::to_string(want) + " at i=" +
                      std::to_string(x.at("i")) + " j=" + std::to_string(x.at("j")) + " k=" + std::to_string(x.at("k"));
        });
      } catch (const std::exception& ex) {
        problem = str(e) + ": " + ex.what();
      }
      QVERIFY2(problem.empty(), ("expression " + std::to_string(n) + ": " + problem).c_str());
      rewritten += size(e) < size(plain);
    }
    // the generator does reach the rules: most expressions get shorter
    QVERIFY2(rewritten > 200, std::to_string(rewritten).c_str());
  }

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
  // A sum over several axes loops over each axis, in the flat order: the
  // same additions in the same order, so the result equals a sum in index
  // order bit for bit, and no index divides.
  void reductionsOverSeveralAxesNest() {
    Generator gen(3);
    Tensor x = Tensor::randn({3, 4, 5, 6}, gen, "cpu").realize();
    std::vector<float> got;
    std::string sources;
    {
      ProfileCapture capture;
      got = x.permute({1, 0, 2, 3}).reshape({4, 3, 30}).sum({1, 2}).to_vector();
      for (auto& r : capture.records()) sources += r.kernel->source;
    }
    const std::vector<float> xv = x.to_vector();
    QCOMPARE(int(got.size()), 4);
    for (int c = 0; c < 4; ++c) {
      float want = 0;
      for (int n = 0; n < 3; ++n)
        for (int p = 0; p < 30; ++p) want = want + xv[size_t((n * 4 + c) * 30 + p)];
      QCOMPARE(got[size_t(c)], want);  // exactly: the same order of additions
    }
    QVERIFY2(sources.find("for (int r0 = 0; r0 < 3; ++r0)") != std::string::npos, sources.c_str());
    const size_t from = sources.find("acc = 0.0f"), to = sources.find("b0[gid] = acc");
    QVERIFY(from != std::string::npos && to != std::string::npos);
    const std::string body = sources.substr(from, to - from);
    QVERIFY2(body.find('/') == std::string::npos && body.find('%') == std::string::npos, sources.c_str());
  }

  // Small windows (pooling) reduce in rows: a loop over the output's last
  // axis whose iterations are independent, so the C compiler vectorises
  // across outputs. Each output still folds its window in index order, so a
  // sum equals a sum in that order bit for bit; a maximum is NaN wherever
  // its window holds a NaN, and compares no other way.
  void poolingReducesInRows() {
    Generator gen(11);
    std::vector<float> xv = Tensor::randn({2, 3, 12, 18}, gen, "cpu").to_vector();
    xv[5] = NAN;          // image 0, channel 0, row 0, column 5: window (0, 2)
    xv[18 * 7 + 16] = NAN;  // row 7, column 16: window (3, 8)
    xv[216 + 3] = -INFINITY;
    Tensor x = Tensor::from_data(xv, {2, 3, 12, 18}, "cpu").realize();
    std::vector<float> mx, sm;
    std::string sources;
    {
      ProfileCapture capture;
      Tensor w = x.reshape({2, 3, 6, 2, 9, 2});
      mx = w.max({3, 5}).to_vector();
      sm = w.sum({3, 5}).to_vector();
      for (auto& r : capture.records())
        if (r.kernel->name[0] == 'R') sources += r.kernel->source;
    }
    QCOMPARE(int(mx.size()), 2 * 3 * 6 * 9);
    for (int p = 0; p < 6; ++p)  // image, channel
      for (int oy = 0; oy < 6; ++oy)
        for (int ox = 0; ox < 9; ++ox) {
          float m = -INFINITY, s = 0;
          bool nan = false;
          for (int ky = 0; ky < 2; ++ky)
            for (int kx = 0; kx < 2; ++kx) {
              const float v = xv[size_t((p * 12 + oy * 2 + ky) * 18 + ox * 2 + kx)];
              nan = nan || std::isnan(v);
              m = std::max(m, v);
              s = s + v;
            }
          const size_t o = size_t((p * 6 + oy) * 9 + ox);
          if (nan) {
            QVERIFY2(std::isnan(mx[o]) && std::isnan(sm[o]), std::to_string(o).c_str());
          } else {
            QCOMPARE(mx[o], m);
            QCOMPARE(sm[o], s);  // exactly: the same order of additions
          }
        }
    QVERIFY(std::isnan(mx[2]) && std::isnan(mx[3 * 9 + 8]) && !std::isnan(mx[3 * 9 + 7]));
    // both kernels walk rows of 9 outputs with the compiler's hint
    QCOMPARE(occurrences(sources, "#pragma"), 2);  // two hints
    QVERIFY2(sources.find("#pragma omp simd\n    for (int x = 0; x < 9; ++x)") != std::string::npos, sources.c_str());
    QVERIFY2(sources.find("b0[gid*9+x] = acc") != std::string::npos, sources.c_str());
  }

  // A reduction whose row would read one element per plane (a sum over each
  // row of a matrix, across rows) keeps one output per item; a long sum over
  // neighbouring elements lets the compiler keep partial sums in a vector,
  // within float rounding of the exact sum. Reduced axes that are neighbours
  // at the input's end (a pool's rows and columns) are one loop for it, but
  // not where the index would divide inside that loop (the axes read in
  // another order): those keep a loop per axis and add in index order.
  void longSumsKeepPartialSums() {
    Generator gen(13);
    Tensor x = Tensor::randn({16, 8, 20, 20}, gen, "cpu").realize();
    std::vector<float> stats, rows, pooled, swapped;
    std::string sources;
    {
      ProfileCapture capture;
      stats = x.sum({0, 2, 3}).to_vector();  // a batch norm's statistics: 8 channels of 16 x 20 x 20
      rows = x.reshape({128, 400}).sum({1}).to_vector();
      pooled = x.sum({2, 3}).to_vector();
      swapped = x.permute({0, 1, 3, 2}).sum({2, 3}).to_vector();
      for (auto& r : capture.records())
        if (r.kernel->name[0] == 'R') sources += r.kernel->source + "\n";
    }
    const std::vector<float> xv = x.to_vector();
    auto close = [](float got, double want, double magnitude) { return std::abs(got - want) <= 1e-6 * magnitude; };
    for (int c = 0; c < 8; ++c) {
      double want = 0, magnitude = 0;
      for (int n = 0; n < 16; ++n)
        for (int p = 0; p < 400; ++p) {
          want += xv[size_t((n * 8 + c) * 400 + p)];
          magnitude += std::abs(xv[size_t((n * 8 + c) * 400 + p)]);
        }
      QVERIFY2(close(stats[size_t(c)], want, magnitude), std::to_string(c).c_str());
    }
    for (int i = 0; i < 128; ++i) {
      double want = 0, magnitude = 0;
      float in_order = 0;  // the transposed plane, column by column
      for (int p = 0; p < 400; ++p) want += xv[size_t(i * 400 + p)], magnitude += std::abs(xv[size_t(i * 400 + p)]);
      for (int w = 0; w < 20; ++w)
        for (int h = 0; h < 20; ++h) in_order = in_order + xv[size_t(i * 400 + h * 20 + w)];
      QVERIFY2(close(rows[size_t(i)], want, magnitude), std::to_string(i).c_str());
      QVERIFY2(close(pooled[size_t(i)], want, magnitude), std::to_string(i).c_str());
      QCOMPARE(swapped[size_t(i)], in_order);  // exactly
    }
    QCOMPARE(occurrences(sources, "#pragma"), 3);  // 3 hints
    for (const char* loop : {"#pragma omp simd reduction(+:acc)\n      for (int r1 = 0; r1 < 400; ++r1)",
                             "#pragma omp simd reduction(+:acc)\n    for (int r = 0; r < 400; ++r)",
                             "#pragma omp simd reduction(+:acc)\n    for (int r0 = 0; r0 < 400; ++r0)",
                             "    for (int r0 = 0; r0 < 20; ++r0) {\n      for (int r1 = 0; r1 < 20; ++r1)"})
      QVERIFY2(sources.find(loop) != std::string::npos, (loop + std::string(" in\n") + sources).c_str());
    QVERIFY2(sources.find("for (int x") == std::string::npos, sources.c_str());
  }

  // A long maximum over neighbouring elements keeps lanes of maxima on the C
  // device, with NaN tested apart: any NaN in a row gives NaN wherever it
  // lies (first, middle, in the loop's scalar tail), an all -inf row -inf,
  // and otherwise the exact maximum. A maximum read across rows keeps the
  // in-order form. Every device computes the same values.
  void longMaximaKeepNaN() {
    const int rows = 6, n = 100;
    Generator gen(17);
    std::vector<float> v = Tensor::randn({rows, n}, gen, "cpu").to_vector();
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    v[1 * n + 0] = nan;
    v[2 * n + 57] = nan;
    v[3 * n + 99] = nan;
    for (int i = 0; i < n; ++i) v[4 * n + i] = -inf;
    v[5 * n + 33] = inf;
    for (const auto& device : tltest::available_devices()) {
      const Tensor x = Tensor::from_data(v, {rows, n}, device);
      std::vector<float> along, pooled, across;
      std::string sources;
      {
        ProfileCapture capture;
        along = x.max({1}).to_vector();
        pooled = x.reshape({rows, 10, 10}).max({1, 2}).to_vector();  // a global max pool's rows and columns
        across = x.reshape({n, rows}).max({0}).to_vector();
        for (auto& r : capture.records())
          if (r.kernel->name[0] == 'R') sources += r.kernel->source + "\n";
      }
      auto want = [&](int stride, int count, int first) {
        float m = -inf;
        for (int i = 0; i < count; ++i) {
          const float e = v[size_t(first + i * stride)];
          if (std::isnan(e)) return nan;
          m = std::max(m, e);
        }
        return m;
      };
      auto same = [](float got, float w) { return std::isnan(w) ? std::isnan(got) : got == w; };
      for (int r = 0; r < rows; ++r) {
        const float w = want(1, n, r * n), got = along[size_t(r)];
        QVERIFY2(same(got, w), qPrintable(QString("%1 row %2: %3, want %4").arg(device.c_str()).arg(r).arg(got).arg(w)));
        const float p = pooled[size_t(r)];
        QVERIFY2(same(p, w), qPrintable(QString("%1 pooled %2: %3, want %4").arg(device.c_str()).arg(r).arg(p).arg(w)));
      }
      for (int c = 0; c < rows; ++c) {
        const float w = want(rows, n, c), got = across[size_t(c)];
        QVERIFY2(same(got, w), qPrintable(QString("%1 column %2: %3, want %4").arg(device.c_str()).arg(c).arg(got).arg(w)));
      }
      if (device == "cpu") {
        const std::string hint = "#pragma omp simd reduction(max:acc) reduction(|:any_nan)\n    for (int ";
        QCOMPARE(occurrences(sources, hint + "r = 0; r < 100; ++r)"), 1);
        QCOMPARE(occurrences(sources, hint + "r0 = 0; r0 < 100; ++r0)"), 1);  // the two axes as one loop
        QCOMPARE(occurrences(sources, "any_nan"), 8);  // declared, hinted, ORed, read; in two kernels
      }
    }
  }

  // exp on the C device is kernels/c_math.h's tl_expf, which vectorises:
  // within an ulp of the exact value across floats from -110 to 95, NaN,
  // infinities, overflow and underflow as exp gives them, and the same bits
  // for the same input wherever it lies (a vector lane or the scalar tail).
  void expIsWithinAnUlpEverywhere() {
    std::vector<float> x;
    for (uint32_t u = 0; u < 0xffffffffu - 4099; u += 4099) {
      float f;
      std::memcpy(&f, &u, 4);
      if (f > -110.0f && f < 95.0f) x.push_back(f);
    }
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (float f : {0.0f, -0.0f, inf, -inf, nan, 88.7228393f, 88.7228470f, -87.4f, -103.9f, -104.5f, 1e-30f})
      x.push_back(f);
    for (int i = 0; i < 37; ++i) x.push_back(0.3f);  // one value across lanes and the tail
    const int64_t n = int64_t(x.size());
    std::vector<float> got;
    std::string sources;
    {
      ProfileCapture capture;
      got = Tensor::from_data(x, {n}, "cpu").exp().to_vector();
      for (auto& r : capture.records()) sources += r.kernel->source;
    }
    auto order = [](float f) {
      int32_t i;
      std::memcpy(&i, &f, 4);
      return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
    };
    int64_t worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = float(std::exp(double(x[size_t(i)]))), g = got[size_t(i)];
      const QString what = QString("exp(%1): %2, want %3").arg(double(x[size_t(i)]), 0, 'g', 9).arg(g).arg(want);
      if (std::isnan(want) || std::isinf(want) || want == 0)
        QVERIFY2(std::isnan(want) ? std::isnan(g) : g == want, qPrintable(what));
      else
        QVERIFY2(std::abs(order(g) - order(want)) <= 1, qPrintable(what));
      worst = std::max(worst, std::isfinite(want) && want != 0 ? std::abs(order(g) - order(want)) : 0);
    }
    QVERIFY(x.size() > 500000);
    for (int64_t i = n - 37; i < n; ++i) QCOMPARE(order(got[size_t(i)]), order(got[size_t(n - 1)]));
    QVERIFY2(sources.find("tl_expf(v") != std::string::npos, sources.c_str());
    qInfo("exp: %lld inputs, at most %lld ulp from the correctly rounded value", (long long)n, (long long)worst);
  }

  // Batch norm in training divides no index inside its loops: its statistics
  // nest their loops over images and pixels, and its kernels walk one image's
  // pixels.
  void batchNormTrainingDividesNoIndex() {
    Generator gen(5);
    Tensor x = Tensor::randn({4, 3, 6, 6}, gen, "cpu").realize();
    Tensor w = Tensor::randn({3}, gen, "cpu").realize(), b = Tensor::randn({3}, gen, "cpu").realize();
    Tensor rm = Tensor::zeros({3}, DType::f32, "cpu").realize(), rv = Tensor::ones({3}, DType::f32, "cpu").realize();
    std::string sources;
    {
      ProfileCapture capture;
      x.batch_norm(w, b, rm, rv, true, 0.1, 1e-5).realize();
      for (auto& r : capture.records()) sources += r.kernel->source;
    }
    int loads = 0;
    for (size_t at = sources.find("["); at != std::string::npos; at = sources.find("[", at + 1)) {
      if (at < 2 || sources[at - 2] != 'b' || !std::isdigit(static_cast<unsigned char>(sources[at - 1]))) continue;
      // the row's own coordinates (gid / ..., gid % ...) are loop-invariant
      const std::string index =
          std::regex_replace(sources.substr(at, sources.find(']', at) - at), std::regex("gid[/%][0-9]+"), "");
      QVERIFY2(index.find('/') == std::string::npos && index.find('%') == std::string::npos,
               (index + " in\n" + sources).c_str());
      ++loads;
    }
    QVERIFY(loads > 5);
  }

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
