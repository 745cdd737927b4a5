#include "core/codegen/expr.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <vector>

// Two passes over each new node, in this order:
//  1. rewrite rules (kBinaryRules for binary ops; unary(), cast() and where()
//     have their own few): the first rule that applies returns the simpler
//     expression, built again through these builders;
//  2. when no rule applies, the node is made and range_of() gives it the range
//     of values it can take, from its sources' ranges. Rules read these ranges
//     to prove their rewrites (e.g. x % 8 is x when x lies in [0, 7]).
// Ranges are tracked for integer expressions only (int32 and bool).

namespace tl {

namespace {

constexpr int64_t kUnknownLo = INT32_MIN, kUnknownHi = INT32_MAX;

bool is_integer(DType t) { return t == DType::i32 || t == DType::boolean; }

// ---------------------------------------------------------------------------
// The range pass

struct Range {
  int64_t lo = kUnknownLo, hi = kUnknownHi;
};

// A range beyond int32 means the int32 arithmetic of the kernel may wrap:
// nothing is known then. Keeping every range within int32 also keeps the
// products below in int64.
Range checked(int64_t lo, int64_t hi) {
  if (lo < kUnknownLo || hi > kUnknownHi) return {};
  return {lo, hi};
}

// The divisor d > 0 of an integer a / d or a % d whose a is never negative;
// 0 when the expression is not of that form.
int64_t positive_divisor(ExprOp op, const E& a, const E& b) {
  if ((op != ExprOp::Div && op != ExprOp::Mod) || !is_integer(a->dtype) || b->op != ExprOp::Const ||
      b->value <= 0 || a->lo < 0)
    return 0;
  return int64_t(b->value);
}

// The range of a node from the ranges of its sources (set by the builders
// for Const and Var, unknown for Load).
Range range_of(const Expr& e) {
  if (!is_integer(e.dtype)) return {};
  const Expr* a = e.src.size() > 0 ? e.src[0].get() : nullptr;
  const Expr* b = e.src.size() > 1 ? e.src[1].get() : nullptr;
  switch (e.op) {
    case ExprOp::Neg: return checked(-a->hi, -a->lo);
    case ExprOp::Cast:
      if (e.dtype == DType::boolean) return {0, 1};
      // a float's range is not tracked: its cast to int may be anything
      return is_integer(a->dtype) ? Range{a->lo, a->hi} : Range{};
    case ExprOp::Add: return checked(a->lo + b->lo, a->hi + b->hi);
    case ExprOp::Mul: {
      const int64_t c[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
      return checked(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
    }
    case ExprOp::Div:
    case ExprOp::Mod: {
      const int64_t d = positive_divisor(e.op, e.src[0], e.src[1]);
      if (d == 0) return {};
      return e.op == ExprOp::Div ? Range{a->lo / d, a->hi / d} : Range{0, std::min<int64_t>(a->hi, d - 1)};
    }
    case ExprOp::Max: return {std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    case ExprOp::CmpLt:
    case ExprOp::CmpEq:
    case ExprOp::And: return {0, 1};
    case ExprOp::Where: return {std::min(e.src[1]->lo, e.src[2]->lo), std::max(e.src[1]->hi, e.src[2]->hi)};
    default: return {};
  }
}

std::shared_ptr<Expr> make(ExprOp op, DType t, std::vector<E> src) {
  auto e = std::make_shared<Expr>();
  e->op = op;
  e->dtype = t;
  e->src = std::move(src);
  Range r = range_of(*e);
  e->lo = r.lo;
  e->hi = r.hi;
  return e;
}

// ---------------------------------------------------------------------------
// Rewrite rules of binary ops. Each returns the rewritten expression, or
// nullptr when it does not apply. Integer division and modulo truncate
// toward zero as in C, so the division rules ask for non-negative operands.

DType result_type(ExprOp op, const E& a) {
  if (op == ExprOp::CmpLt || op == ExprOp::CmpEq || op == ExprOp::And) return DType::boolean;
  return a->dtype;
}

// Two constants: compute the value now. Floats round to float32 as the
// kernel would; comparisons give a bool.
E fold_constants(ExprOp op, const E& a, const E& b) {
  if (a->op != ExprOp::Const || b->op != ExprOp::Const) return nullptr;
  const bool integer = is_integer(a->dtype);
  double x = a->value, y = b->value, r = 0;
  switch (op) {
    case ExprOp::Add: r = x + y; break;
    case ExprOp::Mul: r = x * y; break;
    case ExprOp::Div: r = integer ? (y != 0 ? std::trunc(x / y) : 0) : x / y; break;
    case ExprOp::Mod: r = y != 0 ? std::fmod(x, y) : 0; break;
    case ExprOp::Max: r = std::max(x, y); break;
    case ExprOp::Pow: r = std::pow(float(x), float(y)); break;
    case ExprOp::CmpLt: r = x < y; break;
    case ExprOp::CmpEq: r = x == y; break;
    case ExprOp::And: r = (x != 0) && (y != 0); break;
    default: break;
  }
  if (!integer && op != ExprOp::CmpLt && op != ExprOp::CmpEq) r = float(r);
  return constant(r, result_type(op, a));
}

// c + x -> x + c and c * x -> x * c: the rules below then look for a
// constant on the right only.
E constant_to_the_right(ExprOp op, const E& a, const E& b) {
  if ((op != ExprOp::Add && op != ExprOp::Mul) || a->op != ExprOp::Const || b->op == ExprOp::Const) return nullptr;
  return binary(op, b, a);
}

// x + 0 -> x. For floats too: it differs only for x = -0.0, whose sign no
// kernel output depends on.
E add_zero(ExprOp op, const E& a, const E& b) { return op == ExprOp::Add && is_const(b, 0) ? a : nullptr; }

// (x + c1) + c2 -> x + (c1 + c2): the offsets of nested padding and slicing
// become one constant. Integers only (float addition is not associative).
E merge_constant_offsets(ExprOp op, const E& a, const E& b) {
  if (op != ExprOp::Add || !is_integer(a->dtype) || b->op != ExprOp::Const || a->op != ExprOp::Add ||
      a->src[1]->op != ExprOp::Const)
    return nullptr;
  return a->src[0] + constant(a->src[1]->value + b->value, a->dtype);
}

// x * 1 -> x, exact for floats too.
E multiply_by_one(ExprOp op, const E& a, const E& b) { return op == ExprOp::Mul && is_const(b, 1) ? a : nullptr; }

// x * 0 -> 0 for integers (not floats: inf * 0 and NaN * 0 are NaN).
E multiply_by_zero(ExprOp op, const E& a, const E& b) {
  return op == ExprOp::Mul && is_integer(a->dtype) && is_const(b, 0) ? b : nullptr;
}

// x / 1 -> x and x % 1 -> 0 for integers, whatever the sign of x.
E divide_by_one(ExprOp op, const E& a, const E& b) {
  if (!is_integer(a->dtype) || !is_const(b, 1)) return nullptr;
  if (op == ExprOp::Div) return a;
  if (op == ExprOp::Mod) return idx(0);
  return nullptr;
}

// The terms of a nested sum, in the order they are written.
std::vector<E> terms_of(const E& sum) {
  std::vector<E> terms, stack{sum};
  while (!stack.empty()) {
    E t = stack.back();
    stack.pop_back();
    if (t->op == ExprOp::Add) {
      stack.push_back(t->src[1]);
      stack.push_back(t->src[0]);
    } else {
      terms.push_back(t);
    }
  }
  return terms;
}

// (x / a) / b -> x / (a*b) for x >= 0: a flat index split in two steps reads
// as one division, which the rules below can then match.
E divide_nested(ExprOp op, const E& a, const E& b) {
  const int64_t d = positive_divisor(op, a, b);
  if (d == 0 || op != ExprOp::Div || a->op != ExprOp::Div || a->src[1]->op != ExprOp::Const ||
      a->src[1]->value <= 0 || a->src[0]->lo < 0)
    return nullptr;
  const int64_t product = int64_t(a->src[1]->value) * d;
  if (product > kUnknownHi) return nullptr;
  return a->src[0] / idx(product);
}

// A term of a sum as core * k, k = 1 when it has no constant factor.
struct ScaledTerm {
  E core;
  int64_t k;
};
ScaledTerm scaled_term(const E& t) {
  if (t->op == ExprOp::Mul && t->src[1]->op == ExprOp::Const) return {t->src[0], int64_t(t->src[1]->value)};
  return {t, 1};
}

// The pieces of a split index put back together. For x >= 0 and a, b > 0:
//   (x % a)*k + ((x / a) % b)*(a*k) -> (x % (a*b))*k
//   (x % a)*k + (x / a)*(a*k)       -> x*k
// A reshape that splits a flat axis r into (r / 400, (r / 20) % 20, r % 20)
// and joins them again (a batch-norm row read through its image axes) then
// indexes with r itself, which neither divides nor stops vectorisation.
E recombine_split_index(ExprOp op, const E& a, const E& b) {
  if (op != ExprOp::Add || !is_integer(a->dtype)) return nullptr;
  auto has_mod = [](const E& t) { return scaled_term(t).core->op == ExprOp::Mod; };
  std::vector<E> terms = terms_of(a), more = terms_of(b);
  terms.insert(terms.end(), more.begin(), more.end());
  if (std::none_of(terms.begin(), terms.end(), has_mod)) return nullptr;
  for (size_t i = 0; i < terms.size(); ++i) {
    const ScaledTerm low = scaled_term(terms[i]);
    if (low.core->op != ExprOp::Mod || low.k == 0) continue;
    const E& x = low.core->src[0];
    const E& m = low.core->src[1];
    if (m->op != ExprOp::Const || m->value <= 0 || x->lo < 0) continue;
    const int64_t a_div = int64_t(m->value);
    for (size_t j = 0; j < terms.size(); ++j) {
      const ScaledTerm high = scaled_term(terms[j]);
      if (j == i || high.k != low.k * a_div) continue;
      E whole;
      const E& c = high.core;
      if (c->op == ExprOp::Div && is_const(c->src[1], double(a_div)) && same(c->src[0], x)) {
        whole = x;
      } else if (c->op == ExprOp::Mod && c->src[1]->op == ExprOp::Const && c->src[1]->value > 0 &&
                 c->src[0]->op == ExprOp::Div && is_const(c->src[0]->src[1], double(a_div)) &&
                 same(c->src[0]->src[0], x)) {
        const int64_t product = a_div * int64_t(c->src[1]->value);
        if (product > kUnknownHi) continue;
        whole = x % idx(product);
      } else {
        continue;
      }
      E sum = idx(0);
      for (size_t t = 0; t < terms.size(); ++t)
        if (t == i) sum = sum + whole * idx(low.k);
        else if (t != j) sum = sum + terms[t];
      return sum;
    }
  }
  return nullptr;
}

// 0 <= x < d: x / d -> 0 and x % d -> x. The range pass proves it for loop
// variables and for indices already reduced modulo something smaller.
E divide_smaller_value(ExprOp op, const E& a, const E& b) {
  const int64_t d = positive_divisor(op, a, b);
  if (d == 0 || a->hi >= d) return nullptr;
  return op == ExprOp::Div ? idx(0) : a;
}

// (x * d) / d -> x and (x * d) % d -> 0 for x >= 0: a flat index split back
// into the coordinates it was built from.
E divide_exact_multiple(ExprOp op, const E& a, const E& b) {
  const int64_t d = positive_divisor(op, a, b);
  if (d == 0 || a->op != ExprOp::Mul || !is_const(a->src[1], double(d))) return nullptr;
  return op == ExprOp::Div ? a->src[0] : idx(0);
}

// A non-negative sum of terms, some of them whole multiples of d (x * k or a
// constant k with k % d == 0), and a rest that is never negative:
//   (whole * d + rest) / d -> whole + rest / d,   ... % d -> rest % d.
// (With rest = q*d + s, 0 <= s < d, the sum is (whole + q)*d + s >= 0, so
// whole + q >= 0 and C's truncation is the floor.) It takes the outer
// coordinates out of a flat index: (n*C*H*W + c*H*W + y*W + x) / W keeps
// only (x / W) as a division.
// A positive coefficient k > d that is no multiple splits the same way, into
// x * (k / d) * d + x * (k % d), when the rest stays non-negative: the window
// of a padded axis, (x + k*59) % 58, is (x + k) % 58, which the ranges may
// then prove smaller than 58.
E divide_whole_terms(ExprOp op, const E& a, const E& b) {
  const int64_t d = positive_divisor(op, a, b);
  if (d == 0 || a->op != ExprOp::Add) return nullptr;
  std::vector<E> terms = terms_of(a);
  E whole = idx(0), rest = idx(0);
  bool any_whole = false;
  for (auto& t : terms) {
    const bool scaled = t->op == ExprOp::Mul && t->src[1]->op == ExprOp::Const;
    const int64_t k = scaled ? int64_t(t->src[1]->value) : t->op == ExprOp::Const ? int64_t(t->value) : 0;
    const int64_t q = k % d == 0 || k > d ? k / d : 0;  // whole multiples of d in k
    if (q == 0) {
      rest = rest + t;
      continue;
    }
    any_whole = true;
    const E unit = scaled ? t->src[0] : idx(1);  // t is unit * k
    whole = whole + unit * idx(q);
    rest = rest + unit * idx(k - q * d);
  }
  if (!any_whole || rest->lo < 0) return nullptr;
  return op == ExprOp::Div ? whole + rest / idx(d) : rest % idx(d);
}

// The constant factor of a term of a sum: k for x * k, the value for a
// constant, 1 for anything else.
int64_t coefficient(const E& t) { return t->op == ExprOp::Const ? int64_t(t->value) : scaled_term(t).k; }

// A common factor c of d = m*c that divides every term of a sum but a small
// rest: for A >= 0 and 0 <= rest < c,
//   (A*c + rest) / (m*c) -> A / m,   (A*c + rest) % (m*c) -> (A % m)*c + rest.
// It turns the row index of a strided window, (gid*W + x) / (H*W), into
// gid / H, so the inner loop variable x leaves the division. The largest
// such c wins.
E divide_common_factor(ExprOp op, const E& a, const E& b) {
  const int64_t d = positive_divisor(op, a, b);
  if (d == 0 || a->op != ExprOp::Add) return nullptr;
  std::vector<E> terms = terms_of(a);
  std::vector<int64_t> candidates;
  for (auto& t : terms) {
    int64_t c = coefficient(t);
    if (c > 1 && c < d && d % c == 0) candidates.push_back(c);
  }
  std::sort(candidates.rbegin(), candidates.rend());
  for (int64_t c : candidates) {
    E whole = idx(0), rest = idx(0);
    bool any_whole = false;
    for (auto& t : terms) {
      int64_t k = coefficient(t);
      if (k % c != 0 || k == 0) {
        rest = rest + t;
        continue;
      }
      whole = whole + (t->op == ExprOp::Const ? idx(k / c) : t->src[0] * idx(k / c));
      any_whole = true;
    }
    if (!any_whole || rest->lo < 0 || rest->hi >= c || whole->lo < 0) continue;
    const int64_t m = d / c;
    return op == ExprOp::Div ? whole / idx(m) : (whole % idx(m)) * idx(c) + rest;
  }
  return nullptr;
}

// true && x -> x, x && true -> x, false && x -> false: the masks of padding
// on several axes collapse where a range pass already decided an axis.
E and_with_constant(ExprOp op, const E& a, const E& b) {
  if (op != ExprOp::And) return nullptr;
  if (is_const(b, 1)) return a;
  if (is_const(a, 1)) return b;
  if (is_const(a, 0) || is_const(b, 0)) return constant(0, DType::boolean);
  return nullptr;
}

// a < b decided by the ranges of a and b: a padding mask on an axis the
// window never leaves becomes a constant (and then disappears).
E compare_by_range(ExprOp op, const E& a, const E& b) {
  if (op != ExprOp::CmpLt || !is_integer(a->dtype)) return nullptr;
  if (a->hi < b->lo) return constant(1, DType::boolean);
  if (a->lo >= b->hi) return constant(0, DType::boolean);
  return nullptr;
}

// floor(a / b) for b > 0, whatever the sign of a.
int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

// x*k < c -> x < ceil(c/k) and c < x*k -> floor(c/k) < x for k > 0: a
// window's mask on a strided axis tests the coordinate itself.
E compare_scaled(ExprOp op, const E& a, const E& b) {
  if (op != ExprOp::CmpLt || !is_integer(a->dtype)) return nullptr;
  auto factor = [](const E& e) {
    return e->op == ExprOp::Mul && e->src[1]->op == ExprOp::Const && e->src[1]->value > 1 ? int64_t(e->src[1]->value)
                                                                                          : 0;
  };
  if (const int64_t k = factor(a); k && b->op == ExprOp::Const)
    return binary(op, a->src[0], idx(floor_div(int64_t(b->value) + k - 1, k)));
  if (const int64_t k = factor(b); k && a->op == ExprOp::Const)
    return binary(op, idx(floor_div(int64_t(a->value), k)), b->src[0]);
  return nullptr;
}

// max(a, b) -> a when a is never below b, and the other way round: the
// clamps of a loop's bounds vanish where the ranges already decide them.
E max_by_range(ExprOp op, const E& a, const E& b) {
  if (op != ExprOp::Max || !is_integer(a->dtype)) return nullptr;
  if (a->lo >= b->hi) return a;
  if (b->lo >= a->hi) return b;
  return nullptr;
}

struct Rule {
  const char* name;
  E (*apply)(ExprOp op, const E& a, const E& b);
};

// In order: the first that applies wins.
const Rule kBinaryRules[] = {
    {"fold_constants", fold_constants},
    {"constant_to_the_right", constant_to_the_right},
    {"add_zero", add_zero},
    {"merge_constant_offsets", merge_constant_offsets},
    {"multiply_by_one", multiply_by_one},
    {"multiply_by_zero", multiply_by_zero},
    {"divide_by_one", divide_by_one},
    {"divide_nested", divide_nested},
    {"divide_smaller_value", divide_smaller_value},
    {"divide_exact_multiple", divide_exact_multiple},
    {"divide_whole_terms", divide_whole_terms},
    {"divide_common_factor", divide_common_factor},
    {"recombine_split_index", recombine_split_index},
    {"and_with_constant", and_with_constant},
    {"compare_by_range", compare_by_range},
    {"compare_scaled", compare_scaled},
    {"max_by_range", max_by_range},
};

// ---------------------------------------------------------------------------
// Rewrites of unary ops

double fold_unary(ExprOp op, double a) {
  switch (op) {
    case ExprOp::Neg: return -a;
    case ExprOp::Exp: return std::exp(float(a));
    case ExprOp::Log: return std::log(float(a));
    case ExprOp::Sqrt: return std::sqrt(float(a));
    case ExprOp::Recip: return 1.0f / float(a);
    case ExprOp::Sin: return std::sin(float(a));
    default: return a;
  }
}

}  // namespace

std::vector<std::string> binary_rule_names() {
  std::vector<std::string> names;
  for (const Rule& r : kBinaryRules) names.push_back(r.name);
  return names;
}

bool is_const(const E& e, double v) { return e->op == ExprOp::Const && e->value == v; }

bool same(const E& a, const E& b) {
  if (a == b) return true;
  if (a->op != b->op || a->dtype != b->dtype || a->value != b->value || a->name != b->name ||
      a->buffer != b->buffer || a->src.size() != b->src.size())
    return false;
  for (size_t i = 0; i < a->src.size(); ++i)
    if (!same(a->src[i], b->src[i])) return false;
  return true;
}

E assume_range(const E& e, int64_t lo, int64_t hi) {
  if (e->op == ExprOp::Const || (e->lo >= lo && e->hi <= hi)) return e;
  auto copy = std::make_shared<Expr>(*e);
  copy->lo = std::max(e->lo, lo);
  copy->hi = std::min(e->hi, hi);
  return copy;
}

E constant(double v, DType t) {
  // An integer constant's value converts to int64_t below and in every fold:
  // NaN and values beyond its range (a hostile file's) would be undefined.
  if (is_integer(t)) v = std::isnan(v) ? 0 : std::clamp(v, -0x1p63, std::nextafter(0x1p63, 0.0));
  auto e = std::make_shared<Expr>();
  e->op = ExprOp::Const;
  e->dtype = t;
  e->value = v;
  e->lo = is_integer(t) ? int64_t(v) : kUnknownLo;
  e->hi = is_integer(t) ? int64_t(v) : kUnknownHi;
  return e;
}

E var(const std::string& name, int64_t lo, int64_t hi) {
  auto e = std::make_shared<Expr>();
  e->op = ExprOp::Var;
  e->dtype = DType::i32;
  e->name = name;
  e->lo = lo;
  e->hi = hi;
  return e;
}

E load(int buffer, DType t, E index) {
  auto e = make(ExprOp::Load, t, {std::move(index)});
  e->buffer = buffer;
  return e;
}

E unary(ExprOp op, E a) {
  // A float constant: compute it now, in its own precision as the kernel would.
  if (a->op == ExprOp::Const && a->dtype == DType::f32) return constant(float(fold_unary(op, a->value)), a->dtype);
  if (a->op == ExprOp::Const && a->dtype == DType::f64) return constant(fold_unary(op, a->value), a->dtype);
  if (a->op == ExprOp::Const && op == ExprOp::Neg && is_integer(a->dtype)) return constant(-a->value, a->dtype);
  // -(-x) -> x, exact for every type.
  if (op == ExprOp::Neg && a->op == ExprOp::Neg) return a->src[0];
  // Integers: -(x + y) -> (-x) + (-y) and -(x * c) -> x * -c, so the bounds
  // of loops (loop_bounds) read as sums.
  if (op == ExprOp::Neg && is_integer(a->dtype) && a->op == ExprOp::Add)
    return unary(op, a->src[0]) + unary(op, a->src[1]);
  if (op == ExprOp::Neg && is_integer(a->dtype) && a->op == ExprOp::Mul && a->src[1]->op == ExprOp::Const)
    return a->src[0] * constant(-a->src[1]->value, a->dtype);
  return make(op, a->dtype, {a});
}

E cast(E a, DType t) {
  if (a->dtype == t) return a;
  // A constant: convert it now (to an int it truncates toward zero as C does, and saturates).
  if (a->op == ExprOp::Const) return constant(value_of_type(a->value, t), t);
  return make(ExprOp::Cast, t, {a});
}

E binary(ExprOp op, E a, E b) {
  for (const Rule& rule : kBinaryRules)
    if (E rewritten = rule.apply(op, a, b)) return rewritten;
  return make(op, result_type(op, a), {a, b});
}

namespace {

E rebuild_with(const E& e, const std::vector<E>& src) {
  switch (e->op) {
    case ExprOp::Const:
    case ExprOp::Var: return e;
    case ExprOp::Load: return load(e->buffer, e->dtype, src[0]);
    case ExprOp::Cast: return cast(src[0], e->dtype);
    case ExprOp::Where: return where(src[0], src[1], src[2]);
    default: return src.size() == 1 ? unary(e->op, src[0]) : binary(e->op, src[0], src[1]);
  }
}

}  // namespace

E where(E cond, E a, E b) {
  // A decided condition picks its side.
  if (cond->op == ExprOp::Const) return cond->value != 0 ? a : b;
  return make(ExprOp::Where, a->dtype, {cond, a, b});
}

// ---------------------------------------------------------------------------
// Substitution and the bounds of a loop

E substitute(const E& e, const std::unordered_map<const Expr*, E>& with) {
  std::unordered_map<const Expr*, E> done;
  std::function<E(const E&)> walk = [&](const E& n) -> E {
    if (auto it = with.find(n.get()); it != with.end()) return it->second;
    if (auto it = done.find(n.get()); it != done.end()) return it->second;
    std::vector<E> src;
    bool changed = false;
    for (auto& s : n->src) {
      src.push_back(walk(s));
      changed = changed || src.back() != s;
    }
    // A node that keeps its sources keeps its range too (assume_range's);
    // a rebuilt one still takes no other values where the original is used.
    E r = changed ? rebuild_with(n, src) : n;
    if (changed && is_integer(n->dtype)) r = assume_range(r, n->lo, n->hi);
    done[n.get()] = r;
    return r;
  };
  return walk(e);
}

namespace {

// c*x + rest, with rest free of x; ok is false when `e` is not of that form.
struct Linear {
  bool ok = false;
  int64_t coef = 0;
  E rest;
};

struct LinearForms {
  const Expr* x;
  std::unordered_map<const Expr*, bool> reads_memo;

  bool reads(const E& e) {
    if (e.get() == x) return true;
    if (auto it = reads_memo.find(e.get()); it != reads_memo.end()) return it->second;
    bool r = false;
    for (auto& s : e->src) r = r || reads(s);
    reads_memo[e.get()] = r;
    return r;
  }

  Linear of(const E& e) {
    if (!reads(e)) return {true, 0, e};
    if (e.get() == x) return {true, 1, idx(0)};
    if (e->op == ExprOp::Add) {
      Linear a = of(e->src[0]), b = of(e->src[1]);
      if (a.ok && b.ok) return {true, a.coef + b.coef, a.rest + b.rest};
    } else if (e->op == ExprOp::Mul && e->src[1]->op == ExprOp::Const) {
      const int64_t k = int64_t(e->src[1]->value);
      Linear a = of(e->src[0]);
      if (a.ok) return {true, a.coef * k, a.rest * idx(k)};
    } else if (e->op == ExprOp::Neg) {
      Linear a = of(e->src[0]);
      if (a.ok) return {true, -a.coef, unary(ExprOp::Neg, a.rest)};
    }
    return {};
  }
};

// floor(v / m) for m > 0 in C's truncating division: v is shifted to be
// non-negative by its range. Null when v's range is unknown.
E floor_divide(const E& v, int64_t m) {
  if (m == 1) return v;
  if (v->lo <= kUnknownLo) return nullptr;
  if (v->lo >= 0) return v / idx(m);
  const int64_t k = (-v->lo + m - 1) / m;
  const E shifted = v + idx(k * m);
  if (shifted->hi >= kUnknownHi) return nullptr;  // the kernel's int would overflow
  return shifted / idx(m) + idx(-k);
}

}  // namespace

LoopBounds loop_bounds(const E& e, const E& x) {
  LoopBounds out;
  LinearForms forms{x.get(), {}};
  std::unordered_map<const Expr*, bool> seen, invariant;
  // The integer comparisons of a conjunction.
  std::function<void(const E&)> collect_tests = [&](const E& n) {
    if (n->op == ExprOp::And) {
      for (auto& side : n->src) collect_tests(side);
    } else if (n->op == ExprOp::CmpLt && is_integer(n->src[0]->dtype) && !invariant[n.get()]) {
      invariant[n.get()] = true;
      out.invariant.push_back(n);
    }
  };
  std::vector<E> free_tests;  // every other test free of x
  std::function<void(const E&)> walk = [&](const E& n) {
    if (seen[n.get()]) return;
    seen[n.get()] = true;
    for (auto& s : n->src) walk(s);
    if (n->op == ExprOp::CmpLt && is_integer(n->src[0]->dtype) && !forms.reads(n)) free_tests.push_back(n);
    // a && b with b free of x: b's tests hold for the whole row or for none
    if (n->op == ExprOp::And && forms.reads(n))
      for (auto& side : n->src)
        if (!forms.reads(side)) collect_tests(side);
    if (n->op != ExprOp::CmpLt || !is_integer(n->src[0]->dtype) || !forms.reads(n)) return;
    Linear a = forms.of(n->src[0]), b = forms.of(n->src[1]);
    if (!a.ok || !b.ok || a.coef == b.coef) return;
    // a < b  <=>  c*x + r < 0
    const int64_t c = a.coef - b.coef;
    const E r = a.rest + unary(ExprOp::Neg, b.rest);
    if (c > 0) {  // x < ceil(-r / c)
      E upper = floor_divide(unary(ExprOp::Neg, r) + idx(c - 1), c);
      if (!upper) return;
      if (upper->lo <= x->hi) out.upper.push_back(upper);
    } else {  // x > floor(r / -c)
      E lower = floor_divide(r, -c);
      if (!lower) return;
      lower = lower + idx(1);
      if (lower->hi > x->lo) out.lower.push_back(lower);
    }
    out.bounds.push_back(n);
  };
  walk(e);
  // The same test built again elsewhere (a tap of a window whose column
  // needs no mask tests only its row) is invariant too.
  const size_t anded = out.invariant.size();
  for (auto& t : free_tests)
    if (!invariant[t.get()])
      for (size_t i = 0; i < anded; ++i)
        if (same(t, out.invariant[i])) {
          invariant[t.get()] = true;
          out.invariant.push_back(t);
          break;
        }
  return out;
}

// The value of integer index arithmetic with `x` at `xv` and every other
// variable at the low end of its range, folded by the builders' rules; false
// when it does not fold to a constant (it reads memory).
static bool value_along(const E& e, const E& x, int64_t xv, int64_t& out) {
  std::unordered_map<const Expr*, E> at;
  walk_nodes(*e, [&](const Expr& n) {
    if (n.op == ExprOp::Var) at[&n] = idx(&n == x.get() ? xv : n.lo);
    return Walk::into;
  });
  const E v = substitute(e, at);
  out = int64_t(v->value);
  return v->op == ExprOp::Const;
}

bool loads_near_along(const E& v, const E& x, int64_t limit) {
  return walk_nodes(*v, [&](const Expr& e) {
    if (e.op != ExprOp::Load) return Walk::into;
    const int64_t mid = x->hi / 2;
    int64_t at0 = 0, at1 = 0;
    if (!value_along(e.src[0], x, mid, at0) || !value_along(e.src[0], x, mid + 1, at1)) return Walk::stop;
    return at1 - at0 > limit || at0 - at1 > limit ? Walk::stop : Walk::over;
  });
}

}  // namespace tl
