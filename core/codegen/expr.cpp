#include "expr.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

namespace tl {

static std::shared_ptr<Expr> make(ExprOp op, DType t, std::vector<E> src) {
  auto e = std::make_shared<Expr>();
  e->op = op;
  e->dtype = t;
  e->src = std::move(src);
  // Nothing is known about a value (a load, a cast) until an op narrows it.
  e->lo = INT32_MIN;
  e->hi = INT32_MAX;
  return e;
}

bool is_const(const E& e, double v) { return e->op == ExprOp::Const && e->value == v; }

E assume_range(const E& e, int64_t lo, int64_t hi) {
  if (e->op == ExprOp::Const || (e->lo >= lo && e->hi <= hi)) return e;
  auto copy = std::make_shared<Expr>(*e);
  copy->lo = std::max(e->lo, lo);
  copy->hi = std::min(e->hi, hi);
  return copy;
}

E constant(double v, DType t) {
  auto e = std::make_shared<Expr>();
  e->op = ExprOp::Const;
  e->dtype = t;
  e->value = v;
  if (t != DType::f32) e->lo = e->hi = int64_t(v);
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

static double fold_unary(ExprOp op, double a) {
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

E unary(ExprOp op, E a) {
  if (a->op == ExprOp::Const && a->dtype == DType::f32) return constant(float(fold_unary(op, a->value)), a->dtype);
  if (op == ExprOp::Neg && a->op == ExprOp::Neg) return a->src[0];
  auto e = make(op, a->dtype, {a});
  if (op == ExprOp::Neg) {
    e->lo = -a->hi;
    e->hi = -a->lo;
  }
  return e;
}

E cast(E a, DType t) {
  if (a->dtype == t) return a;
  if (a->op == ExprOp::Const) {
    double v = a->value;
    if (t == DType::boolean) v = v != 0;
    if (t == DType::i32) v = std::trunc(v);
    return constant(v, t);
  }
  auto e = make(ExprOp::Cast, t, {a});
  if (t == DType::boolean) {
    e->lo = 0;
    e->hi = 1;
  } else {
    e->lo = a->lo;
    e->hi = a->hi;
  }
  return e;
}

// The constant factor of a term of a sum: k for x * k, the value for a
// constant, 1 for anything else.
static int64_t coefficient(const E& t) {
  if (t->op == ExprOp::Mul && t->src[1]->op == ExprOp::Const) return int64_t(t->src[1]->value);
  if (t->op == ExprOp::Const) return int64_t(t->value);
  return 1;
}

// For (sum of non-negative terms) / d or % d: finds a factor c of d, c < d,
// that divides every term's coefficient except for a rest whose range lies in
// [0, c), and rewrites with the identity in binary()'s comment. nullptr when
// no such factor exists.
static E split_common_factor(const std::vector<E>& terms, ExprOp op, int64_t d) {
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
      } else if (t->op == ExprOp::Const) {
        whole = whole + idx(k / c);
        any_whole = true;
      } else {
        whole = whole + t->src[0] * idx(k / c);
        any_whole = true;
      }
    }
    if (!any_whole || rest->lo < 0 || rest->hi >= c || whole->lo < 0) continue;
    const int64_t m = d / c;
    return op == ExprOp::Div ? whole / idx(m) : (whole % idx(m)) * idx(c) + rest;
  }
  return nullptr;
}

static DType result_type(ExprOp op, const E& a) {
  if (op == ExprOp::CmpLt || op == ExprOp::CmpEq || op == ExprOp::And) return DType::boolean;
  return a->dtype;
}

E binary(ExprOp op, E a, E b) {
  bool integer = a->dtype != DType::f32;
  // constant folding
  if (a->op == ExprOp::Const && b->op == ExprOp::Const) {
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
  // keep constants on the right of commutative ops
  if ((op == ExprOp::Add || op == ExprOp::Mul) && a->op == ExprOp::Const) std::swap(a, b);
  // identities; float ones only where IEEE allows them (x+0, x*1)
  if (op == ExprOp::Add && is_const(b, 0)) return a;
  // (x + c1) + c2 -> x + (c1 + c2)
  if (op == ExprOp::Add && integer && b->op == ExprOp::Const && a->op == ExprOp::Add && a->src[1]->op == ExprOp::Const)
    return a->src[0] + constant(a->src[1]->value + b->value, a->dtype);
  if (op == ExprOp::Mul && is_const(b, 1)) return a;
  if (integer) {
    if (op == ExprOp::Mul && is_const(b, 0)) return b;
    if (op == ExprOp::Div && is_const(b, 1)) return a;
    if (op == ExprOp::Mod && is_const(b, 1)) return idx(0);
    if ((op == ExprOp::Div || op == ExprOp::Mod) && b->op == ExprOp::Const && b->value > 0 && a->lo >= 0) {
      int64_t d = int64_t(b->value);
      if (op == ExprOp::Div && a->hi < d) return idx(0);
      if (op == ExprOp::Mod && a->hi < d) return a;
      // (x * d) / d == x and (x * d) % d == 0 for non-negative x
      if (a->op == ExprOp::Mul && is_const(a->src[1], double(d))) return op == ExprOp::Div ? a->src[0] : idx(0);
      // A sum of non-negative terms, some of them multiples of d (x * k with
      // k % d == 0), and the rest:
      //   sum / d -> sum of the (x * k/d) + rest / d,  sum % d -> rest % d
      if (a->op == ExprOp::Add) {
        std::vector<E> terms, stack{a};
        while (!stack.empty()) {
          E t = stack.back();
          stack.pop_back();
          if (t->op == ExprOp::Add) {
            stack.push_back(t->src[0]);
            stack.push_back(t->src[1]);
          } else {
            terms.push_back(t);
          }
        }
        E whole = idx(0), rest = idx(0);
        bool any_whole = false, ok = true;
        for (auto& t : terms) {
          ok &= t->lo >= 0;
          if (t->op == ExprOp::Mul && t->src[1]->op == ExprOp::Const && int64_t(t->src[1]->value) % d == 0) {
            whole = whole + t->src[0] * idx(int64_t(t->src[1]->value) / d);
            any_whole = true;
          } else if (t->op == ExprOp::Const && int64_t(t->value) % d == 0 && t->value != 0) {
            whole = whole + idx(int64_t(t->value) / d);
            any_whole = true;
          } else {
            rest = rest + t;
          }
        }
        // (whole * d + rest) / d == whole + rest / d for non-negative terms
        if (ok && any_whole && rest->lo >= 0) return op == ExprOp::Div ? whole + rest / idx(d) : rest % idx(d);
        // A common factor c of d that divides every term but a small rest:
        // for A >= 0 and 0 <= rest < c, (A*c + rest) / (m*c) == A / m and
        // (A*c + rest) % (m*c) == (A % m)*c + rest. It turns the row index
        // of a strided window, (gid*W + x) / (H*W), into gid / H.
        if (ok)
          if (E r = split_common_factor(terms, op, d)) return r;
      }
    }
    if (op == ExprOp::And && is_const(b, 1)) return a;
    if (op == ExprOp::CmpLt && b->op == ExprOp::Const) {
      if (a->hi < b->value) return constant(1, DType::boolean);
      if (a->lo >= b->value) return constant(0, DType::boolean);
    }
    if (op == ExprOp::CmpLt && a->op == ExprOp::Const) {
      if (a->value < b->lo) return constant(1, DType::boolean);
      if (a->value >= b->hi) return constant(0, DType::boolean);
    }
  }
  if (op == ExprOp::And) {
    if (is_const(a, 1)) return b;
    if (is_const(b, 0) || is_const(a, 0)) return constant(0, DType::boolean);
  }
  auto e = make(op, result_type(op, a), {a, b});
  if (integer) {
    switch (op) {
      case ExprOp::Add: e->lo = a->lo + b->lo; e->hi = a->hi + b->hi; break;
      case ExprOp::Mul: {
        int64_t c[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
        e->lo = *std::min_element(c, c + 4);
        e->hi = *std::max_element(c, c + 4);
        break;
      }
      case ExprOp::Div:
        if ((op == ExprOp::Div || op == ExprOp::Mod) && b->op == ExprOp::Const && b->value > 0 && a->lo >= 0) {
          e->lo = a->lo / int64_t(b->value);
          e->hi = a->hi / int64_t(b->value);
        } else {
          e->lo = -(int64_t(1) << 31);
          e->hi = int64_t(1) << 31;
        }
        break;
      case ExprOp::Mod:
        if ((op == ExprOp::Div || op == ExprOp::Mod) && b->op == ExprOp::Const && b->value > 0 && a->lo >= 0) {
          e->lo = 0;
          e->hi = std::min<int64_t>(a->hi, int64_t(b->value) - 1);
        } else {
          e->lo = -(int64_t(1) << 31);
          e->hi = int64_t(1) << 31;
        }
        break;
      case ExprOp::Max: e->lo = std::max(a->lo, b->lo); e->hi = std::max(a->hi, b->hi); break;
      case ExprOp::CmpLt: case ExprOp::CmpEq: case ExprOp::And: e->lo = 0; e->hi = 1; break;
      default: e->lo = -(int64_t(1) << 31); e->hi = int64_t(1) << 31; break;
    }
  }
  return e;
}

E where(E cond, E a, E b) {
  if (cond->op == ExprOp::Const) return cond->value != 0 ? a : b;
  auto e = make(ExprOp::Where, a->dtype, {cond, a, b});
  e->lo = std::min(a->lo, b->lo);
  e->hi = std::max(a->hi, b->hi);
  return e;
}

}  // namespace tl
