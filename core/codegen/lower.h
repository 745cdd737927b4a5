// The renderer's lowering (render.cpp): the nodes of a planned kernel
// become IR expressions (expr.h) at an index into their shape (Lowerer), and
// the IR becomes source text in a device's dialect (Printer). Internal to the
// renderer.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/codegen/expr.h"
#include "core/dialect.h"
#include "core/ops.h"

namespace tl::lowering {

// A multi-dimensional position in a node's shape. Either the row-major flat
// index or the per-axis indices may be known; the other is derived on demand.
struct Index {
  Shape shape;
  E flat;                // may be null
  std::vector<E> dims;   // may be empty
  E valid;               // null = always in bounds
};
using IndexRef = std::shared_ptr<Index>;

E flat_of(Index& ix);                             // derived from dims when unknown
const std::vector<E>& dims_of(Index& ix);         // derived from flat when unknown
IndexRef with_dims(const Shape& shape, std::vector<E> dims, E valid);
IndexRef with_flat(const Shape& shape, E flat, std::vector<E> dims = {});  // always in bounds

// A reshape that only splits or merges neighbouring axes maps each group of
// axes on its own, which keeps the division and modulo small and the value
// ranges tight. Returns null when the shapes do not group that way.
IndexRef regroup(const Index& ix, const Shape& from);

// A node's value at an index, as IR: loads of the kernel's input buffers
// (params), values given (a GEMM's sum) and the elementwise and movement ops
// between them. Memoised per (node, index).
struct Lowerer {
  std::unordered_map<const Node*, int> params;  // input node -> buffer parameter
  std::unordered_map<const Node*, E> given;     // node -> its value at every index (a GEMM's sum)
  std::map<std::pair<const Node*, const Index*>, E> memo;
  std::vector<IndexRef> keep_alive;  // memo keys point at these
  IndexRef keep(IndexRef ix) {  // kept alive as long as the memo
    keep_alive.push_back(ix);
    return ix;
  }

  E lower(const NodeRef& n, const IndexRef& ix) {
    auto key = std::make_pair(n.get(), ix.get());
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    E e = compute(n, ix);
    memo[key] = e;
    return e;
  }

  E compute(const NodeRef& n, const IndexRef& ix);
};

// ---- source text ----

// A float32 literal carries the f suffix; a float64 one has all 17 digits.
std::string float_literal(double v, DType t);

// The larger of two floats, NaN winning, as two selects: y if y is NaN,
// else x where !(x <= y) (x larger, or x NaN), else y. (x>y || x!=x) becomes
// branches in C compilers, even inside vectorised loops, and
// (x!=x)?x:((x>y)?x:y) a mask combined in integer registers (GCC, AVX-512):
// a ReLU6 epilogue then cost 40 % of a K=16 GEMM, against 10 % in this
// form. The Printer's Max and a reduction's fold (reduce.h) both spell it so.
std::string nan_max(const std::string& x, const std::string& y);

// IR to source text in a dialect: `lines` collects the named values'
// statements at `indent`; operator() returns an expression's spelling.
struct Printer {
  const Dialect& d;
  std::string lines;
  std::string indent = "    ";
  std::unordered_map<const Expr*, std::string> names;
  int counter = 0;
  double flops_per_item = 0;

  std::string type(DType t) const { return d.type(t); }

  std::string spell(const std::string& name) {
    if (name == "INFINITY") return d.infinity;
    if (name == "(-INFINITY)") return "(-" + d.infinity + ")";
    if (name == "NAN") return d.nan;
    return name;
  }

  // Float values and loads become named SSA values; integer index arithmetic
  // is written inline, where it reads best.
  std::string operator()(const E& e) {
    if (auto it = names.find(e.get()); it != names.end()) return it->second;
    std::string text = expression(e);
    bool leaf = e->op == ExprOp::Const || e->op == ExprOp::Var;
    bool named = !leaf && (e->op == ExprOp::Load || is_float(e->dtype) || text.size() > 48);
    if (!named) {
      names[e.get()] = text;  // short index arithmetic reads best inline
      return text;
    }
    std::string v = "v" + std::to_string(counter++);
    lines += indent + type(e->dtype) + " " + v + " = " + text + ";\n";
    if (is_float(e->dtype) && e->op != ExprOp::Load) flops_per_item += 1;
    names[e.get()] = v;
    return v;
  }

  std::string expression(const E& e);

  static std::string strip(const std::string& s);
};

}  // namespace tl::lowering
