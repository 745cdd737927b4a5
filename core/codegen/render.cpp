#include "core/codegen/render.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "core/codegen/expr.h"
#include "core/codegen/lower.h"
#include "core/codegen/reduce.h"
#include "core/codegen/templates.h"
#include "core/settings.h"

namespace tl {

namespace {

using namespace lowering;

std::string join_dims(const Shape& s) {
  std::string out;
  for (auto v : s)
    if (v != 1) out += "_" + std::to_string(v);
  return out.empty() ? "_1" : out;
}

std::string signature(const Dialect& d, const std::string& name, const std::vector<std::pair<std::string, bool>>& bufs,
                      bool fp64, const std::string& attribute = "") {
  // bufs: (element type, is output)
  std::string out = d.preamble + (fp64 ? d.fp64_preamble : "") + d.kernel_prefix + " " +
                    (attribute.empty() ? "" : attribute + " ") + name + "(";
  std::string params, decls;  // the buffers as parameters, or (buffers_in_array) read from args
  for (size_t i = 0; i < bufs.size(); ++i) {
    const std::string type = (bufs[i].second ? "" : "const ") + bufs[i].first + "*", b = "b" + std::to_string(i);
    params += (i ? ", " : "") + d.global_qualifier + type + " " + d.restrict_kw + " " + b;
    decls += "  " + type + " " + d.restrict_kw + " " + b + " = (" + type + ")args[" + std::to_string(i) + "];\n";
  }
  return out + (d.buffers_in_array ? "int start, int end, void** args) {\n" + decls : params + ") {\n");
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// ---- reductions ----

// The position in the reduced axes: a flat r, or with `nested` one loop
// variable per axis of more than one element (r0, r1, ... by axis); the axes
// from `merge_from` on share one loop, whose variable the index splits by
// division (the index rules join it again where the input is contiguous
// over those axes). Sets `loops`.
static IndexRef reduced_index(const Shape& red_shape, bool nested, size_t merge_from, ReduceLoops& loops) {
  const int64_t r_count = numel(red_shape);
  IndexRef red_ix = with_flat(red_shape, nullptr);
  loops.clear();
  if (!nested) {
    red_ix->flat = var("r", 0, std::max<int64_t>(r_count - 1, 0));
    loops.push_back({red_ix->flat, r_count});
    return red_ix;
  }
  int64_t merged_size = 1;
  for (size_t a = merge_from; a < red_shape.size(); ++a) merged_size *= red_shape[a];
  E flat = idx(0), merged;
  int64_t stride = r_count, inner = merged_size;
  for (size_t a = 0; a < red_shape.size(); ++a) {
    const int64_t v = red_shape[a];
    stride /= v;
    E dim = idx(0);
    if (a >= merge_from) {
      if (!merged) loops.push_back({merged = var("r" + std::to_string(a), 0, merged_size - 1), merged_size});
      inner /= v;
      if (v != 1) dim = (merged / idx(inner)) % idx(v);
    } else if (v != 1) {
      loops.push_back({dim = var("r" + std::to_string(a), 0, v - 1), v});
    }
    red_ix->dims.push_back(dim);
    flat = flat + dim * idx(stride);
  }
  red_ix->flat = flat;
  return red_ix;
}

// Whether a division or modulo in `e` reads `x`.
static bool divides(const E& e, const E& x) {
  return !walk_nodes(*e, [&](const Expr& n) {
    return (n.op == ExprOp::Div || n.op == ExprOp::Mod) && reads_var(n, x) ? Walk::stop : Walk::into;
  });
}

// The serial body of a float maximum whose innermost loop the dialect
// reorders (Dialect::reordered_max_loop): lanes of maxima, with whether a
// value was NaN ORed apart, so the loop vectorises; the in-order form's NaN
// test is a dependence no compiler vectorises (a softmax's row maximum ran
// at 1 GFLOP/s). NaN anywhere gives NaN, as in order.
static std::string lanes_of_maxima(const Dialect& d, const std::string& declare_acc, const std::string& loops_open,
                                   const Printer& pr, const std::string& value, const std::string& loops_close) {
  return "    " + declare_acc + ";\n    int any_nan = 0;\n" + loops_open + pr.lines + pr.indent + "any_nan |= " + value +
         " != " + value + ";\n" + pr.indent + "acc = " + value + " > acc ? " + value + " : acc;\n" + loops_close +
         "    b0[gid] = any_nan ? " + d.nan + " : acc;\n";
}

// A reduction kernel's body, in the serial or the grouped form; sets the
// kernel's name, flops and launch sizes. The serial body runs inside the
// dialect's parallel loop, the grouped one is the whole function body.
std::string reduce_body(Lowerer& low, Printer& pr, const Node& out, const Device& device, RenderedKernel& k) {
  const Dialect& d = device.dialect();
  const Node& input = *out.src[0];
  const int64_t n_out = numel(out.shape);
  std::vector<bool> reduced(out.shape.size());
  Shape red_shape;
  bool trailing = true;
  for (size_t i = 0; i < out.shape.size(); ++i) {
    reduced[i] = input.shape[i] != out.shape[i] || std::find(out.arg.begin(), out.arg.end(), int64_t(i)) != out.arg.end();
    if (reduced[i]) red_shape.push_back(input.shape[i]);
    else if (!red_shape.empty() && input.shape[i] != 1) trailing = false;
  }
  const int64_t r_count = numel(red_shape);
  E gid = var("gid", 0, std::max<int64_t>(n_out - 1, 0));
  const bool serial_only = setting_equals("TINYLENS_REDUCE", "serial");
  const int64_t group = serial_only ? 0 : reduce_group_size(d, device.info(), n_out, r_count, out.dtype);
  // The serial form walks several reduced axes (a batch norm's images and
  // pixels) as nested loops, one per axis of more than one element, in the
  // flat index's order: the same additions in the same order, with no
  // division of a flat r into the axes.
  const auto loop_count = [&](size_t from) {  // reduced axes of more than one element, from `from` on
    return std::count_if(red_shape.begin() + long(from), red_shape.end(), [](int64_t n) { return n != 1; });
  };
  const bool nested = !group && loop_count(0) > 1;
  ReduceLoops loops;
  IndexRef red_ix = reduced_index(red_shape, nested, red_shape.size(), loops);
  // The value at output position `out_flat` (and `out_dims`, when known).
  auto value_at = [&](const E& out_flat, std::vector<E> out_dims) {
    IndexRef out_ix = low.keep(with_flat(out.shape, out_flat, std::move(out_dims)));
    std::vector<E> dims;
    size_t j = 0;
    for (size_t i = 0; i < out.shape.size(); ++i)
      dims.push_back(reduced[i] ? dims_of(*red_ix)[j++] : dims_of(*out_ix)[i]);
    IndexRef in_ix = low.keep(with_dims(input.shape, dims, nullptr));
    if (trailing) in_ix->flat = out_flat * idx(r_count) + red_ix->flat;
    return cast(low.lower(out.src[0], in_ix), out.dtype);
  };
  // The rows form (C): a parallel item is a row of the output's last axis,
  // walked by a loop over x whose iterations are independent (each x folds
  // its own window in the serial order), so the compiler vectorises across
  // a pooling row. Only where the loads move a few elements from one x to
  // the next: a row across a batch norm's channels would gather.
  int row_axis = -1;
  for (size_t i = 0; i < out.shape.size(); ++i)
    if (out.shape[i] > 1) row_axis = int(i);
  const int64_t width = row_axis < 0 ? 1 : out.shape[row_axis];
  E v, x;
  bool rows = !group && d.buffers_in_array && !d.independent_loop.empty() && width >= 4 && n_out > 0;
  if (rows) {
    E row = var("gid", 0, n_out / width - 1);
    x = var("x", 0, width - 1);
    std::vector<E> out_dims = dims_of(*low.keep(with_flat(Shape(out.shape.begin(), out.shape.begin() + row_axis), row)));
    out_dims.push_back(x);
    while (out_dims.size() < out.shape.size()) out_dims.push_back(idx(0));
    v = value_at(row * idx(width) + x, out_dims);
    rows = loads_near_along(v, x, 4);
  }
  // A long sum one output at a time: its innermost loop, where it reads
  // neighbouring elements, keeps a vector of partial sums (a batch norm's
  // statistics are otherwise one chain of 12800 dependent additions). The
  // reduced axes at the input's end (a global pool's rows and columns) are
  // one loop for it, unless the index would divide inside it.
  const bool is_sum = out.op == Op::Sum, reorder = !rows && is_sum && !d.reordered_sum_loop.empty();
  // A long maximum of floats the same way (lanes_of_maxima).
  const bool reorder_max = !rows && !is_sum && is_float(out.dtype) && !d.reordered_max_loop.empty();
  if (!rows) v = nullptr;
  if ((reorder || reorder_max) && nested) {
    size_t merge_from = red_shape.size(), pos = red_shape.size();
    for (size_t i = input.shape.size(); i-- > 0 && (reduced[i] || merge_from == red_shape.size());)
      if (reduced[i]) merge_from = --pos;
    if (loop_count(merge_from) > 1) {
      red_ix = reduced_index(red_shape, nested, merge_from, loops);
      v = value_at(gid, {});
      if (divides(v, loops.back().first)) {
        red_ix = reduced_index(red_shape, nested, red_shape.size(), loops);
        v = nullptr;
      }
    }
  }
  if (!v) v = value_at(gid, {});
  const std::string deeper = rows ? "  " : "";  // the serial body, inside the loop over x
  const E innermost = loops.back().first;
  const bool lanes = (reorder || reorder_max) && innermost->hi + 1 >= 32 && loads_near_along(v, innermost, 1);
  const bool partial_sums = reorder && lanes, partial_max = reorder_max && lanes;
  const auto [loops_open, loops_close] = reduce_loops(
      loops, deeper, partial_sums ? d.reordered_sum_loop : partial_max ? d.reordered_max_loop : std::string());
  pr.indent = group ? "    " : deeper + std::string(4 + 2 * loops.size(), ' ');
  std::string val = pr(v);
  std::string acc_type = pr.type(out.dtype);
  std::string init = is_sum ? (is_float(out.dtype) ? float_literal(0, out.dtype) : "0") : "(-" + d.infinity + ")";
  if (!is_sum && !is_float(out.dtype)) init = "(-2147483647-1)";
  k.name = "R" + join_dims(out.shape) + "_" + std::to_string(r_count);
  k.flops = (pr.flops_per_item + 1) * double(n_out) * double(r_count);
  k.global[0] = n_out;
  if (group) {
    k.global[0] = n_out * group;
    k.local[0] = group;
    return grouped_reduce(d, group, r_count, is_sum, acc_type, init, pr.lines, val);
  }
  if (partial_max)
    return lanes_of_maxima(d, acc_type + " acc = " + init, loops_open, pr, Printer::strip(val), loops_close);
  const std::string serial = deeper + "    " + acc_type + " acc = " + init + ";\n" + loops_open + pr.lines + pr.indent +
                             "acc = " + fold(is_sum, "acc", val) + ";\n" + loops_close;
  if (!rows) return serial + "    b0[gid] = acc;\n";
  k.global[0] = n_out / width;
  const std::string w = std::to_string(width);
  return independent_hint(d, "    ") + "    for (int x = 0; x < " + w + "; ++x) {\n" + serial + "      b0[gid*" + w +
         "+x] = acc;\n    }\n";
}

}  // namespace

// The elements one parallel item of an elementwise kernel walks: a row of the
// last axis, or the last two axes when a row is narrower than a vector.
static int64_t row_block(const Shape& shape) {
  const int64_t width = shape.back();
  return width < 8 && shape.size() >= 2 ? width * shape[shape.size() - 2] : width;
}

// The loop over x (a row of the output) that stores `value` at `store`.
// When the value tests linear bounds on x (the mask of a pad read through a
// window, lo <= x + k < hi), the loop splits where the bounds change: between
// them every test is true and drops out, so the loads are affine in x without
// a guard and vectorise; the few x before and after keep the tested form.
// The bounds are computed once per row; so are the tests and-ed with them
// that do not read x (the pad's mask on outer axes): where one fails, the
// middle loop is empty and the row is computed by the tested form alone.
static std::string row_loops(Printer& pr, const E& value, const E& x, const std::string& store, const std::string& indent) {
  const std::string n = std::to_string(x->hi + 1);
  const LoopBounds split = loop_bounds(value, x);
  // The kernel's flops are those of one computation of the value per x: the
  // largest of the loops' bodies.
  const double flops = pr.flops_per_item;
  double body_flops = 0;
  auto loop = [&](const E& v, const std::string& from, const std::string& to) {
    const auto names = pr.names;  // values named inside one loop are not visible in the next
    pr.lines.clear();
    pr.indent = indent + "  ";
    const std::string result = Printer::strip(pr(v));
    pr.names = names;
    body_flops = std::max(body_flops, pr.flops_per_item - flops);
    pr.flops_per_item = flops;
    return independent_hint(pr.d, indent) + indent + "for (int x = " + from + "; x < " + to + "; ++x) {\n" + pr.lines +
           indent + "  " + store + " = " + result + ";\n" + indent + "}\n";
  };
  if (split.bounds.empty()) {
    std::string out = loop(value, "0", n);
    pr.flops_per_item += body_flops;
    return out;
  }
  std::unordered_map<const Expr*, E> holds;
  for (auto& c : split.bounds) holds[c.get()] = constant(1, DType::boolean);
  for (auto& c : split.invariant) holds[c.get()] = constant(1, DType::boolean);
  const E inside = substitute(value, holds);
  pr.lines.clear();
  pr.indent = indent;
  // x_lo = max(0, lower...), x_hi = min(n, upper...), then x_lo <= x_hi <= n.
  std::string bounds;
  std::set<std::string> written;  // the same bound may be tested by several masks
  auto bound = [&](const E& b, const std::string& test) {
    const std::string t = Printer::strip(pr(b));
    if (written.insert(test + t).second) bounds += indent + replace_all(test, "{}", t) + ";\n";
  };
  for (auto& b : split.lower) bound(b, "if (x_lo < {}) x_lo = {}");
  for (auto& b : split.upper) bound(b, "if (x_hi > {}) x_hi = {}");
  if (!split.lower.empty()) bounds += indent + "if (x_lo > " + n + ") x_lo = " + n + ";\n";
  if (!split.upper.empty() || !split.invariant.empty()) bounds += indent + "if (x_hi < x_lo) x_hi = x_lo;\n";
  for (auto& c : split.invariant) bound(c, "if (!({})) x_hi = x_lo");
  bounds = pr.lines + indent + "int x_lo = 0, x_hi = " + n + ";\n" + bounds;
  const bool tail = !split.upper.empty() || !split.invariant.empty();
  std::string out = bounds;
  if (!split.lower.empty()) out += loop(value, "0", "x_lo");
  out += loop(inside, "x_lo", "x_hi");
  if (tail) out += loop(value, "x_hi", n);
  pr.flops_per_item += body_flops;
  return out;
}

namespace {

// The tests of one row-invariant integer g against constants, each as
// "g < t" (c < g is !(g < c + 1)): the comparison nodes and their t.
struct RowTests {
  E g;
  std::vector<std::pair<const Expr*, int64_t>> tests;  // (comparison, t); negated when `above`
  std::vector<bool> above;                              // the test is c < g
  std::vector<int64_t> cuts;                            // the distinct t, sorted
};

void collect_row_tests(const E& value, const E& x, std::vector<RowTests>& by_g) {
  walk_nodes(*value, [&](const Expr& e) {
    if (e.op != ExprOp::CmpLt || e.src.size() != 2 || is_float(e.src[0]->dtype)) return Walk::into;
    const E& a = e.src[0];
    const E& b = e.src[1];
    const bool a_const = a->op == ExprOp::Const, b_const = b->op == ExprOp::Const;
    const double c = a_const ? a->value : b->value;
    if (a_const == b_const || std::fabs(c) >= 2147483647.0) return Walk::into;  // an index bound, in int range
    const E& g = a_const ? b : a;
    if (reads_var(*g, x)) return Walk::into;
    auto r = std::find_if(by_g.begin(), by_g.end(), [&](const RowTests& t) { return same(t.g, g); });
    if (r == by_g.end()) r = by_g.insert(r, RowTests{});
    r->g = g;
    r->tests.push_back({&e, a_const ? int64_t(c) + 1 : int64_t(c)});
    r->above.push_back(a_const);
    return Walk::over;
  });
}

}  // namespace

// A concatenation along an outer axis, read by a row kernel (a DenseNet
// layer's batch norm over the concatenation of all earlier layers), tests
// one row-invariant index g against the parts' bounds, and every element
// read every part through its guard: 30 guarded loads for one value. The
// row is dispatched on g instead: one loop per interval between the bounds,
// with each test of g folded to what it is there, so the loop reads its one
// part. Falls back to row_loops when fewer than three bounds test one index.
static std::string dispatched_row_loops(Printer& pr, const E& value, const E& x, const std::string& store,
                                        const std::string& indent) {
  std::vector<RowTests> by_g;
  collect_row_tests(value, x, by_g);
  RowTests* best = nullptr;
  for (auto& r : by_g) {
    r.cuts.clear();
    for (const auto& t : r.tests) r.cuts.push_back(t.second);
    std::sort(r.cuts.begin(), r.cuts.end());
    r.cuts.erase(std::unique(r.cuts.begin(), r.cuts.end()), r.cuts.end());
    // Only cuts inside g's range split it.
    std::vector<int64_t> inside;
    for (int64_t c : r.cuts)
      if (c > r.g->lo && c <= r.g->hi) inside.push_back(c);
    r.cuts = inside;
    if (r.cuts.size() >= 3 && r.cuts.size() <= 128 && (!best || r.cuts.size() > best->cuts.size())) best = &r;
  }
  if (!best) return row_loops(pr, value, x, store, indent);
  const RowTests& r = *best;
  pr.lines.clear();
  pr.indent = indent;
  const std::string g = Printer::strip(pr(r.g));
  std::string out = pr.lines;
  const auto names = pr.names;
  const double flops = pr.flops_per_item;
  double most = 0;
  for (size_t i = 0; i <= r.cuts.size(); ++i) {
    // g in [cuts[i - 1], hi): g < t holds for t >= hi, for no t below
    // (each t is a cut, so none lies inside the interval).
    const int64_t hi = i == r.cuts.size() ? INT64_MAX : r.cuts[i];
    std::unordered_map<const Expr*, E> holds;
    for (size_t k = 0; k < r.tests.size(); ++k) {
      const bool below = r.tests[k].second >= hi;  // t >= hi: g < t holds
      holds[r.tests[k].first] = constant(r.above[k] ? !below : below, DType::boolean);
    }
    pr.names = names;
    pr.flops_per_item = flops;
    const std::string loop = row_loops(pr, substitute(value, holds), x, store, indent + "  ");
    most = std::max(most, pr.flops_per_item - flops);
    const std::string test = i == r.cuts.size() ? "" : "if (" + g + " < " + std::to_string(hi) + ") ";
    out += indent + (i == 0 ? "" : "} else ") + test + "{\n" + loop;
  }
  pr.names = names;
  pr.flops_per_item = flops + most;
  return out + indent + "}\n";
}

// Whether `value` (the lowered epilogue) is clamp(acc + bias[row], lo, hi):
// maxima and minima (-max(-x, -c)) with constants around acc plus an f32
// buffer read at [row], or acc alone. Each bound is folded in from the
// inside out, clamp(x, l, h) then max c = clamp(x, max(l, c), max(h, c)),
// so any order of them is one clamp; NaN passes each of them unchanged.
static void match_row_bias_clamp(const E& value, GemmEpilogue& ep) {
  auto constant_of = [](const E& e, double& c) {
    if (e->op != ExprOp::Const || e->dtype != DType::f32 || std::isnan(e->value)) return false;
    c = e->value;
    return true;
  };
  std::vector<std::pair<bool, double>> bounds;  // outermost first: (is a maximum, its constant)
  E v = value;
  for (double c;;) {
    if (v->op == ExprOp::Max && constant_of(v->src[1], c)) {
      bounds.push_back({true, c}), v = v->src[0];
    } else if (v->op == ExprOp::Max && constant_of(v->src[0], c)) {
      bounds.push_back({true, c}), v = v->src[1];
    } else if (v->op == ExprOp::Neg && v->src[0]->op == ExprOp::Max && v->src[0]->src[0]->op == ExprOp::Neg &&
               constant_of(v->src[0]->src[1], c)) {
      bounds.push_back({false, -c}), v = v->src[0]->src[0]->src[0];
    } else {
      break;
    }
  }
  auto is_acc = [](const E& e) { return e->op == ExprOp::Var && e->name == "acc"; };
  // A bias read at [row], or at [batch] (a depthwise convolution's channel).
  std::string index;
  auto is_bias_load = [&](const E& e) {
    const bool load = e->op == ExprOp::Load && e->dtype == DType::f32 && e->src.size() == 1 &&
                      e->src[0]->op == ExprOp::Var && (e->src[0]->name == "row" || e->src[0]->name == "batch");
    if (load) index = e->src[0]->name;
    return load;
  };
  int bias = -1;
  if (v->op == ExprOp::Add && is_acc(v->src[0]) && is_bias_load(v->src[1])) bias = v->src[1]->buffer;
  else if (v->op == ExprOp::Add && is_acc(v->src[1]) && is_bias_load(v->src[0])) bias = v->src[0]->buffer;
  else if (!is_acc(v)) return;
  double lo = -INFINITY, hi = INFINITY;
  for (auto it = bounds.rbegin(); it != bounds.rend(); ++it)
    if (it->first) lo = std::max(lo, it->second), hi = std::max(hi, it->second);
    else lo = std::min(lo, it->second), hi = std::min(hi, it->second);
  ep.bias = bias, ep.lo = lo, ep.hi = hi;
  (index == "batch" ? ep.batch_bias_clamp : ep.row_bias_clamp) = true;
}

// The elementwise ops a GEMM plan fused after its product, as a GEMM
// template's epilogue (templates.h); `flops` gets their count over all of C.
static GemmEpilogue render_gemm_epilogue(const KernelPlan& plan, const Dialect& d, bool flat, double& flops) {
  GemmEpilogue ep;
  ep.flat = flat;
  const MatmulHint& h = *plan.gemm().matmul;
  Lowerer low;
  Printer pr{d, "", "  ", {}, 0, 0};
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    low.params[plan.inputs[i].get()] = int(i + 1);
    ep.buffers.push_back(pr.type(plan.inputs[i]->dtype));
  }
  if (plan.fused.size() == 1) return ep;
  auto acc = std::make_shared<Expr>();
  acc->op = ExprOp::Var;
  acc->dtype = DType::f32;
  acc->name = "acc";
  low.given[&plan.gemm()] = acc;
  // The scheduler fused only ops that read the sum where they write, so the
  // output's position is C's (batch, row, col) in flat order.
  auto c_ix = with_dims({h.batch, h.m, h.n},
                        {var("batch", 0, h.batch - 1), var("row", 0, h.m - 1), var("col", 0, h.n - 1)}, nullptr);
  // Both forms are known: loads of full tensors use the flat index (affine in
  // col), broadcast vectors the regrouped axes (a bias reads b[row]).
  const NodeRef& end = plan.epilogue_end();
  IndexRef ix = regroup(*c_ix, end->shape);
  if (!ix) ix = with_flat(end->shape, nullptr);
  ix->flat = flat_of(*c_ix);
  E value = cast(low.lower(end, ix), DType::f32);
  match_row_bias_clamp(value, ep);
  // The template's `flat` stands for that index wherever it survived
  // lowering (a full tensor's load), so the text names no size of C; what
  // was simplified (a bias's b[row]) never needed it.
  if (flat) value = substitute(value, {{ix->flat.get(), var("flat", 0, std::max<int64_t>(0, h.batch * h.m * h.n - 1))}});
  ep.value = Printer::strip(pr(value));
  ep.statements = pr.lines;
  flops = pr.flops_per_item * double(h.batch * h.m * h.n);
  return ep;
}

bool gemm_epilogue_in_registers(const KernelPlan& plan, const Device& device) {
  double flops = 0;
  const GemmEpilogue ep = render_gemm_epilogue(plan, device.dialect(), gemm_epilogue_takes_flat(device), flops);
  return ep.row_bias_clamp || plan.fused.size() == 1;
}

// A GEMM plan's product as its template sees it: sizes, strides, which
// operands are constants, and the gather when the scheduler gave it the image.
static GemmShape product_shape(const KernelPlan& plan) {
  const MatmulHint& h = *plan.gemm().matmul;
  GemmShape g;
  g.batch = h.batch, g.m = h.m, g.n = h.n, g.k = h.k;
  for (int i = 0; i < 3; ++i) g.a_strides[i] = h.a_strides[i], g.b_strides[i] = h.b_strides[i];
  g.a_period = h.a_period;
  g.a_constant = plan.inputs[0]->realized();
  g.b_constant = plan.inputs[1]->realized();
  if (plan.inputs[1] == h.image) g.gather = h.gather;
  return g;
}

bool gemm_pools_in_kernel(const KernelPlan& plan, const Device& device) {
  return gemm_template_pools(device) && gemm_epilogue_in_registers(plan, device) &&
         !gemm_faster_unpooled(device, product_shape(plan));
}

// A GEMM plan's kernel (k has its ops and bytes): the device's template,
// specialised with the product's shape, gather, pool and epilogue.
static RenderedKernel render_gemm_kernel(const KernelPlan& plan, const Device& device, RenderedKernel k) {
  const MatmulHint& h = *plan.gemm().matmul;
  GemmShape g = product_shape(plan);
  const bool pool = g.gather.max;  // a max pool (ConvGather::max) says so in its name
  k.name = (pool ? "MAXPOOL_" : "GEMM_") + std::to_string(h.batch) + "_" + std::to_string(h.m) + "_" +
           std::to_string(h.n) + "_" + std::to_string(h.k);
  double pool_flops = 0;
  if (plan.pool) {  // a max pool of C computed with it (KernelPlan::pool), named after its window too
    const MatmulHint& p = *plan.pool->matmul;
    g.pool = p.gather, g.pool_h = p.n / p.gather.out_w;
    k.name += "_MAXPOOL_" + std::to_string(p.k);
    pool_flops = double(p.batch) * double(p.n) * double(p.k);
  }
  double epilogue_flops = 0;
  g.epilogue = render_gemm_epilogue(plan, device.dialect(), gemm_epilogue_takes_flat(device), epilogue_flops);
  TemplateKernel t;
  if (!render_gemm(device, g, k.name, t)) throw std::logic_error("GEMM planned for a device without a template");
  static_cast<TemplateKernel&>(k) = std::move(t);
  k.flops = (pool ? 1.0 : 2.0) * double(h.batch) * double(h.m) * double(h.n) * double(h.k) + epilogue_flops +
            pool_flops;
  k.ops.front() = pool ? "MAXPOOL" : "GEMM";
  return k;
}

RenderedKernel render_kernel(const KernelPlan& plan, const Device& device) {
  const Dialect& d = device.dialect();
  RenderedKernel k;
  for (auto& n : plan.fused) k.ops.push_back(op_name(n->op));
  const Node& out = *plan.output;
  k.bytes = double(numel(out.shape)) * dtype_size(out.dtype);
  for (auto& i : plan.inputs) k.bytes += double(numel(i->shape)) * dtype_size(i->dtype);

  if (plan.kind == KernelPlan::Kind::Gemm) return render_gemm_kernel(plan, device, std::move(k));

  Lowerer low;
  std::vector<std::pair<std::string, bool>> bufs;
  Printer pr{d, "", "    ", {}, 0, 0};
  bufs.push_back({pr.type(out.dtype), true});
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    low.params[plan.inputs[i].get()] = int(i + 1);
    bufs.push_back({pr.type(plan.inputs[i]->dtype), false});
  }
  int64_t n_out = numel(out.shape);
  E gid = var("gid", 0, std::max<int64_t>(n_out - 1, 0));
  std::string body;
  int64_t parallel_items = n_out;
  const bool rows = std::any_of(plan.fused.begin(), plan.fused.end(), [](auto& n) { return is_reduce(n->op); });
  if (plan.kind == KernelPlan::Kind::Elementwise && rows) {
    body = rows_body(low, plan, device, k, parallel_items);
    k.name = "ROWS" + join_dims(out.shape);
  } else if (plan.kind == KernelPlan::Kind::Elementwise) {
    // A reshape on top of the computed value (e.g. (C, H, W) flattened to
    // (C, H*W) for a GEMM) keeps the flat order, so the kernel may walk the
    // shape before it: rows of W read their inputs with unit stride, where
    // rows of H*W would divide and wrap every index.
    NodeRef value_node = out.op == Op::Contiguous ? out.src[0] : plan.output;
    Shape shape = out.shape;
    while (value_node->op == Op::Reshape && !low.params.count(value_node.get()) && !value_node->src[0]->shape.empty() &&
           row_block(value_node->src[0]->shape) >= 8 && value_node->src[0]->shape.back() < shape.back()) {
      value_node = value_node->src[0];
      shape = value_node->shape;
    }
    IndexRef ix = with_flat(shape, gid);
    // On the C device each parallel item is a whole row, walked by an inner
    // loop: the index arithmetic of the outer axes is then loop-invariant and
    // the row itself vectorises. Rows narrower than a vector (a 7x7 map) are
    // walked with their column as two loops, so no index divides by the width.
    const int64_t width = shape.empty() ? 1 : shape.back();
    const int64_t height = width < 8 && shape.size() >= 2 ? shape[shape.size() - 2] : 1;
    const int64_t block = width * height;
    if (d.buffers_in_array && block >= 8 && n_out > 0) {
      parallel_items = n_out / block;
      const E row = var("gid", 0, parallel_items - 1);
      E x = var("x", 0, width - 1);
      E y = height > 1 ? var("y", 0, height - 1) : nullptr;
      Shape outer(shape.begin(), shape.end() - (y ? 2 : 1));
      ix->dims = dims_of(*low.keep(with_flat(outer, row)));
      if (y) ix->dims.push_back(y);
      ix->dims.push_back(x);
      ix->flat = row * idx(block) + (y ? y * idx(width) + x : x);
      pr.indent = y ? "        " : "      ";
      const std::string w = std::to_string(width), b = std::to_string(block);
      // The rows of a block narrower than a vector (a 7x7 map) are one loop
      // over its elements when no index divides by the loop variable (each
      // load reads the block in order: y*W + x recombines into it), which
      // fills vectors where a loop of 7 did not (EfficientNet's
      // squeeze-excite scales over 7x7 maps).
      E flat_x, flat_v;
      if (height > 1) {
        flat_x = var("x", 0, block - 1);
        IndexRef fix = low.keep(std::make_shared<Index>(*ix));
        fix->dims[fix->dims.size() - 2] = flat_x / idx(width);
        fix->dims.back() = flat_x % idx(width);
        fix->flat = row * idx(block) + flat_x;
        flat_v = cast(low.lower(value_node, fix), out.dtype);
        if (divides(flat_v, flat_x)) flat_v = nullptr;
      }
      const E v = flat_v ? flat_v : cast(low.lower(value_node, ix), out.dtype);
      if (flat_v) {
        pr.indent = "      ";
        body = dispatched_row_loops(pr, v, flat_x, "b0[gid*" + b + "+x]", "    ");
      } else if (height > 1)
        body = "    for (int y = 0; y < " + std::to_string(height) + "; ++y) {\n" +
               dispatched_row_loops(pr, v, ix->dims.back(), "b0[gid*" + b + "+y*" + w + "+x]", "      ") + "    }\n";
      else
        body = dispatched_row_loops(pr, v, ix->dims.back(), "b0[gid*" + w + "+x]", "    ");
    } else {
      E v = cast(low.lower(value_node, ix), out.dtype);
      std::string result = pr(v);
      body = pr.lines + "    b0[gid] = " + Printer::strip(result) + ";\n";
    }
    k.name = "E" + join_dims(out.shape);
    k.flops = pr.flops_per_item * double(n_out);
  } else {
    body = reduce_body(low, pr, out, device, k);
    parallel_items = k.global[0];
  }
  std::string comment = "// " + k.name + ": " + shape_str(out.shape) + " " + dtype_name(out.dtype) + ", fused:";
  for (auto& o : k.ops) comment += " " + o;
  bool fp64 = false;
  for (auto& n : plan.fused) fp64 = fp64 || n->dtype == DType::f64;
  for (auto& n : plan.inputs) fp64 = fp64 || n->dtype == DType::f64;
  if (k.local[0] > 0) {  // the grouped form of a reduction is the whole function body
    k.source = comment + "\n" + signature(d, k.name, bufs, fp64, replace_all(d.group_size_attribute, "{n}", std::to_string(k.local[0]))) +
               body + "}\n";
    return k;
  }
  k.source = comment + "\n" + signature(d, k.name, bufs, fp64) + "  " + replace_all(d.parallel_open, "{n}", std::to_string(parallel_items)) + "\n" +
             body + "  " + d.parallel_close + "\n}\n";
  k.global[0] = parallel_items;
  return k;
}

}  // namespace tl
