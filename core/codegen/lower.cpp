#include "core/codegen/lower.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tl::lowering {

E flat_of(Index& ix) {
  if (!ix.flat) {
    auto st = strides_of(ix.shape);
    E f = idx(0);
    for (size_t i = 0; i < ix.shape.size(); ++i)
      if (ix.shape[i] != 1) f = f + ix.dims[i] * idx(st[i]);
    ix.flat = f;
  }
  return ix.flat;
}

const std::vector<E>& dims_of(Index& ix) {
  if (ix.dims.empty() && !ix.shape.empty()) {
    auto st = strides_of(ix.shape);
    for (size_t i = 0; i < ix.shape.size(); ++i)
      ix.dims.push_back(ix.shape[i] == 1 ? idx(0) : (ix.flat / idx(st[i])) % idx(ix.shape[i]));
  }
  return ix.dims;
}

IndexRef with_dims(const Shape& shape, std::vector<E> dims, E valid) {
  auto ix = std::make_shared<Index>();
  ix->shape = shape;
  ix->dims = std::move(dims);
  ix->valid = std::move(valid);
  return ix;
}

IndexRef with_flat(const Shape& shape, E flat, std::vector<E> dims) {
  auto ix = with_dims(shape, std::move(dims), nullptr);
  ix->flat = std::move(flat);
  return ix;
}

IndexRef regroup(const Index& ix, const Shape& from) {
  const Shape& to = ix.shape;
  for (auto v : to) if (v == 0) return nullptr;
  for (auto v : from) if (v == 0) return nullptr;
  std::vector<E> dims(from.size());
  size_t i = 0, j = 0;
  while (i < to.size() || j < from.size()) {
    size_t i0 = i, j0 = j;
    int64_t pt = i < to.size() ? to[i++] : 1, pf = j < from.size() ? from[j++] : 1;
    while (pt != pf) {
      if (pt < pf) {
        if (i >= to.size()) return nullptr;
        pt *= to[i++];
      } else {
        if (j >= from.size()) return nullptr;
        pf *= from[j++];
      }
    }
    E g = idx(0);
    int64_t stride = 1;
    for (size_t a = i; a-- > i0;) {
      g = g + ix.dims[a] * idx(stride);
      stride *= to[a];
    }
    stride = 1;
    for (size_t b = j; b-- > j0;) {
      dims[b] = from[b] == 1 ? idx(0) : (g / idx(stride)) % idx(from[b]);
      stride *= from[b];
    }
  }
  return with_dims(from, dims, ix.valid);
}

// a && b, either may be null (true).
static E both(const E& a, const E& b) {
  if (!a) return b;
  if (!b) return a;
  return binary(ExprOp::And, a, b);
}

std::string nan_max(const std::string& x, const std::string& y) {
  return "((" + y + "!=" + y + ")?" + y + ":(!(" + x + "<=" + y + ")?" + x + ":" + y + "))";
}

std::string float_literal(double v, DType t) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  const bool f64 = t == DType::f64;
  char buf[64];
  std::snprintf(buf, sizeof buf, f64 ? "%.17g" : "%.9g", f64 ? v : double(float(v)));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (!f64) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

E Lowerer::compute(const NodeRef& n, const IndexRef& ix) {
  if (auto p = params.find(n.get()); p != params.end()) {
    E i = flat_of(*ix);
    if (ix->valid) i = where(ix->valid, i, idx(0));  // never read out of bounds
    return load(p->second, n->dtype, i);
  }
  if (auto g = given.find(n.get()); g != given.end()) return g->second;
  const auto& s = n->src;
  switch (n->op) {
    case Op::Const: return constant(n->value, n->dtype);
    case Op::Neg: return unary(ExprOp::Neg, lower(s[0], ix));
    case Op::Exp: return unary(ExprOp::Exp, lower(s[0], ix));
    case Op::Log: return unary(ExprOp::Log, lower(s[0], ix));
    case Op::Sqrt: return unary(ExprOp::Sqrt, lower(s[0], ix));
    case Op::Recip: return unary(ExprOp::Recip, lower(s[0], ix));
    case Op::Sin: return unary(ExprOp::Sin, lower(s[0], ix));
    case Op::Cast: return cast(lower(s[0], ix), n->dtype);
    case Op::Add: return binary(ExprOp::Add, lower(s[0], ix), lower(s[1], ix));
    case Op::Mul: return binary(ExprOp::Mul, lower(s[0], ix), lower(s[1], ix));
    case Op::Max: return binary(ExprOp::Max, lower(s[0], ix), lower(s[1], ix));
    case Op::Pow: return binary(ExprOp::Pow, lower(s[0], ix), lower(s[1], ix));
    case Op::CmpLt: return binary(ExprOp::CmpLt, lower(s[0], ix), lower(s[1], ix));
    case Op::CmpEq: return binary(ExprOp::CmpEq, lower(s[0], ix), lower(s[1], ix));
    case Op::Where:
      return where(cast(lower(s[0], ix), DType::boolean), lower(s[1], ix), lower(s[2], ix));
    case Op::Contiguous: return lower(s[0], ix);
    case Op::Reshape: {
      // A buffer is loaded by its flat index, which a reshape keeps: no
      // need to split it into the source's axes and join them again.
      if (!ix->flat && !ix->dims.empty() && !params.count(s[0].get()))
        if (auto c = regroup(*ix, s[0]->shape)) return lower(s[0], keep(c));
      auto c = with_flat(s[0]->shape, flat_of(*ix));
      c->valid = ix->valid;
      return lower(s[0], keep(c));
    }
    case Op::Permute: {
      auto& d = dims_of(*ix);
      std::vector<E> src_dims(d.size());
      for (size_t i = 0; i < d.size(); ++i) src_dims[n->arg[i]] = d[i];
      return lower(s[0], keep(with_dims(s[0]->shape, src_dims, ix->valid)));
    }
    case Op::Expand: {
      auto d = dims_of(*ix);
      for (size_t i = 0; i < d.size(); ++i)
        if (s[0]->shape[i] == 1) d[i] = idx(0);
      return lower(s[0], keep(with_dims(s[0]->shape, d, ix->valid)));
    }
    case Op::Shrink: {
      auto d = dims_of(*ix);
      for (size_t i = 0; i < d.size(); ++i) d[i] = d[i] + idx(n->arg[2 * i]);
      return lower(s[0], keep(with_dims(s[0]->shape, d, ix->valid)));
    }
    case Op::Flip: {
      auto d = dims_of(*ix);
      for (int64_t axis : n->arg) d[axis] = idx(s[0]->shape[axis] - 1) + unary(ExprOp::Neg, d[axis]);
      return lower(s[0], keep(with_dims(s[0]->shape, d, ix->valid)));
    }
    case Op::Pad: {
      // Whether the position lies inside the source on every padded axis;
      // each padded d[i] becomes the source's coordinate, known to lie inside
      // it wherever the value is used (outside, loads are guarded and the
      // value masked).
      auto d = dims_of(*ix);
      E inside;
      for (size_t i = 0; i < d.size(); ++i) {
        const int64_t before = n->arg[2 * i], size = s[0]->shape[i];
        if (before == 0 && n->arg[2 * i + 1] == 0) continue;
        inside = both(inside, both(binary(ExprOp::CmpLt, idx(before - 1), d[i]),
                                   binary(ExprOp::CmpLt, d[i], idx(before + size))));
        d[i] = assume_range(d[i] + idx(-before), 0, size - 1);
      }
      E v = lower(s[0], keep(with_dims(s[0]->shape, d, both(ix->valid, inside))));
      return inside ? where(inside, v, constant(n->value, n->dtype)) : v;
    }
    default:
      throw std::logic_error(std::string("renderer: op ") + op_name(n->op) + " cannot appear inside a kernel");
  }
}

std::string Printer::expression(const E& e) {
  auto a = [&](int i) { return (*this)(e->src[i]); };
  switch (e->op) {
    case ExprOp::Const:
      if (is_float(e->dtype)) return spell(float_literal(e->value, e->dtype));
      return std::to_string(int64_t(e->value));
    case ExprOp::Var: return e->name;
    case ExprOp::Load: return "b" + std::to_string(e->buffer) + "[" + strip(a(0)) + "]";
    case ExprOp::Neg: return "(-" + a(0) + ")";
    case ExprOp::Exp: return d.math(e->dtype).exp + "(" + a(0) + ")";
    case ExprOp::Log: return d.math(e->dtype).log + "(" + a(0) + ")";
    case ExprOp::Sqrt: return d.math(e->dtype).sqrt + "(" + a(0) + ")";
    case ExprOp::Sin: return d.math(e->dtype).sin + "(" + a(0) + ")";
    case ExprOp::Recip: return "(" + float_literal(1, e->dtype) + "/" + a(0) + ")";
    case ExprOp::Cast:
      if (e->dtype == DType::boolean) return "(" + type(e->dtype) + ")(" + a(0) + "!=0)";
      return "(" + type(e->dtype) + ")(" + a(0) + ")";
    case ExprOp::Add: return "(" + a(0) + "+" + a(1) + ")";
    case ExprOp::Mul: return "(" + a(0) + "*" + a(1) + ")";
    case ExprOp::Div: return "(" + a(0) + "/" + a(1) + ")";
    case ExprOp::Mod: return "(" + a(0) + "%" + a(1) + ")";
    case ExprOp::Max: {
      std::string x = a(0), y = a(1);
      if (is_float(e->dtype)) return nan_max(x, y);
      return "(" + x + ">" + y + "?" + x + ":" + y + ")";
    }
    case ExprOp::Pow: return d.math(e->dtype).pow + "(" + a(0) + "," + a(1) + ")";
    case ExprOp::CmpLt: return "(" + a(0) + "<" + a(1) + ")";
    case ExprOp::CmpEq: return "(" + a(0) + "==" + a(1) + ")";
    case ExprOp::And: return "(" + a(0) + "&&" + a(1) + ")";
    case ExprOp::Where: return "(" + a(0) + "?" + a(1) + ":" + a(2) + ")";
  }
  return "?";
}

std::string Printer::strip(const std::string& s) {
  if (s.size() > 2 && s.front() == '(' && s.back() == ')') {
    int depth = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
      if (depth == 0) return s;
    }
    return s.substr(1, s.size() - 2);
  }
  return s;
}

}  // namespace tl::lowering
