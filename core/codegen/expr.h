// The kernel IR: a small expression tree for values and index arithmetic.
// Builders simplify as they go, so the rendered source stays short: a list of
// small named rewrite rules (constant folding, x*1, x+0, and division or
// modulo that value ranges prove trivial; see expr.cpp), and a range pass
// that gives every integer expression the interval of values it can take.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/dtype.h"

namespace tl {

enum class ExprOp : uint8_t {
  Const, Var, Load,
  Neg, Exp, Log, Sqrt, Recip, Sin, Cast,
  Add, Mul, Div, Mod, Max, Pow, CmpLt, CmpEq, And,
  Where,
};

struct Expr;
using E = std::shared_ptr<const Expr>;

struct Expr {
  ExprOp op;
  DType dtype;
  std::vector<E> src;
  double value = 0;       // Const
  std::string name;       // Var
  int buffer = -1;        // Load: parameter index
  int64_t lo = 0, hi = 0; // value range of integer expressions (inclusive); int32's whole range when unknown
};

E constant(double v, DType t);
E var(const std::string& name, int64_t lo, int64_t hi);  // int32 loop variable
E load(int buffer, DType t, E index);
E unary(ExprOp op, E a);
E cast(E a, DType t);
E binary(ExprOp op, E a, E b);
E where(E cond, E a, E b);

inline E operator+(E a, E b) { return binary(ExprOp::Add, a, b); }
inline E operator*(E a, E b) { return binary(ExprOp::Mul, a, b); }
inline E operator/(E a, E b) { return binary(ExprOp::Div, a, b); }
inline E operator%(E a, E b) { return binary(ExprOp::Mod, a, b); }
inline E idx(int64_t v) { return constant(double(v), DType::i32); }

bool is_const(const E& e, double v);
bool same(const E& a, const E& b);  // a and b compute the same value the same way

// Visits each node under `root` once (a shared one too), each before its
// sources, in the order of a recursive walk. `visit` returns Walk::into to go
// on into the node's sources, Walk::over to pass them by, Walk::stop to end
// the walk; walk_nodes returns false when a visit stopped it.
enum class Walk { into, over, stop };
template <class Visit>
bool walk_nodes(const Expr& root, Visit&& visit) {
  std::vector<const Expr*> stack = {&root};
  std::unordered_set<const Expr*> seen;
  while (!stack.empty()) {
    const Expr* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    const Walk w = visit(*n);
    if (w == Walk::stop) return false;
    if (w == Walk::into)
      for (size_t i = n->src.size(); i-- > 0;) stack.push_back(n->src[i].get());
  }
  return true;
}
// Whether `e` reads the node `x` (a loop variable).
inline bool reads_var(const Expr& e, const E& x) {
  return !walk_nodes(e, [&](const Expr& n) { return &n == x.get() ? Walk::stop : Walk::into; });
}

// The names of binary()'s rewrite rules, in the order they are tried (for the
// tests, which cover each one).
std::vector<std::string> binary_rule_names();

// The same expression, known to lie in [lo, hi] wherever its value matters
// (e.g. inside a padding mask: outside it the value is never used).
E assume_range(const E& e, int64_t lo, int64_t hi);

// `e` with each node that `with` names replaced, rebuilt through the
// builders, so their rules see the replacements (where(true, a, b) is a).
E substitute(const E& e, const std::unordered_map<const Expr*, E>& with);

// The comparisons in `e` that bound the loop variable `x` linearly
// (c*x + rest < 0 with `rest` free of x: a pad's mask on a window read along
// x), as bounds: every comparison in `bounds` holds for x >= each of `lower`
// and x < each of `upper`. Bounds already met by every x of x's range are
// left out; so are comparisons that are not linear in x. The comparisons
// that do not read x but are and-ed with a test that does (a pad's mask on an
// outer axis), and their copies elsewhere in `e`, are `invariant`: the same
// for every x of the loop. (Tests free of x that stand alone, such as the
// parts of a concatenation, are not: the row of one part would never split.)
struct LoopBounds {
  std::vector<E> lower, upper;
  std::vector<E> bounds, invariant;
};
LoopBounds loop_bounds(const E& e, const E& x);

// Whether every load in `v` reads at most `limit` elements apart from one x
// to the next, near the middle of x's range (the other variables at the low
// end of theirs): a loop over x then reads neighbouring memory and
// vectorises without gathers.
bool loads_near_along(const E& v, const E& x, int64_t limit);

}  // namespace tl
