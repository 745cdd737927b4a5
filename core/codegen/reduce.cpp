// Reductions' shared text (render.cpp writes their bodies): the grouped
// form's size choice and code, the serial form's loops, and how a value
// folds into an accumulator; and the rows kernels, elementwise kernels that
// compute the reductions they read a row at a time.
#include "core/codegen/reduce.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "core/codegen/lower.h"
#include "core/codegen/render.h"
#include "core/settings.h"

namespace tl {

// The serial form gives each output one work-item that loops over all its
// elements; the grouped form gives each output a work-group of L items that
// read neighbouring elements (coalesced on a GPU) and then add up their L
// partial results in local memory in log2(L) halving steps, each behind a
// barrier. Which is faster depends on how many waves of work-items each
// needs: a device runs about compute units x largest work-group items at
// once (135k on an H200, 8k for PoCL on 2 cores), so the serial form costs
// about waves(outputs) * count steps and the grouped form
// waves(outputs * L) * (count / L + 2 log2 L), a barrier step counted as two.
// A softmax over 1000 classes (one output per image) or a bias gradient (one
// output per channel over N*H*W) is far cheaper grouped; a global average
// pool of a batch of 16 (20k outputs of 49) is not: measured on an H200 with
// tinylens-cli bench reduce, 3x, 30-80x and 0.5x. Below 32 elements per output
// a tree is not worth its barriers.
constexpr int64_t kMinGroupedCount = 32;
constexpr int64_t kMaxGroup = 256;  // enough items to keep a memory channel busy; every GPU allows it

int64_t reduce_group_size(const Dialect& d, const DeviceInfo& info, int64_t outputs, int64_t count, DType acc) {
  if (d.local_qualifier.empty() || info.local_memory == 0 || count < kMinGroupedCount || outputs <= 0) return 0;
  int64_t group = 1, steps = 0;
  while (group < count && group < kMaxGroup) group *= 2;
  while (group > int64_t(info.max_work_group) || uint64_t(group) * dtype_size(acc) > info.local_memory) group /= 2;
  // Kernels index with int: the launch must stay below 2^31 items.
  if (group < kMinGroupedCount || outputs > (int64_t(1) << 31) / group - 1) return 0;
  for (int64_t g = group; g > 1; g /= 2) ++steps;
  const int64_t width = int64_t(std::max(info.compute_units, 1)) * int64_t(info.max_work_group);
  auto waves = [&](int64_t items) { return (items + width - 1) / width; };
  const int64_t serial = waves(outputs) * count;
  const int64_t grouped = waves(outputs * group) * ((count + group - 1) / group + 2 * steps);
  return grouped < serial ? group : 0;
}

std::string independent_hint(const Dialect& d, const std::string& indent) {
  return d.independent_loop.empty() ? "" : indent + d.independent_loop + "\n";
}

// `acc` with `value` folded in: a sum, or a maximum where NaN wins.
std::string fold(bool is_sum, const std::string& acc, const std::string& value) {
  if (is_sum) return acc + " + " + value;
  return lowering::nan_max(value, acc);
}

// The grouped form's halving steps: items below each half fold in the
// partial result that half above them, behind a barrier, until part[0] and
// part[1] are left. `indent` is the steps', `barrier` the barrier's line.
static std::string halve_parts(int64_t group, bool is_sum, const std::string& type, const std::string& indent,
                               const std::string& barrier) {
  std::string s;
  for (int64_t half = group / 2; half > 1; half /= 2) {
    const std::string h = std::to_string(half);
    s += indent + "if (lid < " + h + ") {\n" + indent + "  " + type + " x = part[lid + " + h + "];\n" + indent +
         "  part[lid] = " + fold(is_sum, "part[lid]", "x") + ";\n" + indent + "}\n" + barrier;
  }
  return s;
}

// Whether a group of `group` items folds its results by shuffles
// (fold_by_shuffles): the dialect has them and the group is whole
// subgroups (a shuffle needs every item of its subgroup; groups have 32 to
// 256 items).
static bool folds_by_shuffles(const Dialect& d, int64_t group) {
  const int64_t w = d.subgroup_size;
  return w > 1 && !d.shuffle_xor.empty() && group % w == 0;
}

// Every item's `acc` replaced by the fold of all the group's: a butterfly of
// shuffles within each subgroup (each item folds its own value with its
// partner's, the two in either order: the same result in every item), then,
// with several subgroups, their results through local memory `part`, read
// by every item in one order. One barrier at most, where halving takes one a
// step (a softmax row of 197 in 64 items: 6).
static std::string fold_by_shuffles(const Dialect& d, int64_t group, bool is_sum, const std::string& type,
                                    const std::string& indent) {
  const int64_t w = d.subgroup_size;
  std::string shuffle = d.shuffle_xor;
  shuffle.replace(shuffle.find("{v}"), 3, "acc");
  shuffle.replace(shuffle.find("{o}"), 3, "o");
  std::string s = indent + "for (int o = " + std::to_string(w / 2) + "; o > 0; o >>= 1) {\n" + indent + "  " + type +
                  " y = " + shuffle + ";\n" + indent + "  acc = " + fold(is_sum, "acc", "y") + ";\n" + indent + "}\n";
  if (group == w) return s;
  const std::string W = std::to_string(w);
  s += indent + "if (lid % " + W + " == 0) part[lid / " + W + "] = acc;\n" + indent + d.barrier + "\n" + indent +
       "acc = part[0];\n";
  for (int64_t p = 1; p < group / w; ++p)
    s += indent + "{\n" + indent + "  " + type + " y = part[" + std::to_string(p) + "];\n" + indent + "  acc = " +
         fold(is_sum, "acc", "y") + ";\n" + indent + "}\n";
  return s;
}

// Whether a group folds its items' results in local memory at all: not
// when it is one subgroup that shuffles.
static bool needs_parts(const Dialect& d, int64_t group) {
  return !folds_by_shuffles(d, group) || group != d.subgroup_size;
}

// Every item's `acc` replaced by the fold of all the group's: by shuffles
// where the dialect has them, else halving in local memory `part`, and
// every item reading the last two halves. A caller that writes `part` again
// puts a barrier first (needs_parts).
static std::string fold_group(const Dialect& d, int64_t group, bool is_sum, const std::string& type,
                              const std::string& indent) {
  if (folds_by_shuffles(d, group)) return fold_by_shuffles(d, group, is_sum, type, indent);
  const std::string barrier = indent + d.barrier + "\n";
  return indent + "part[lid] = acc;\n" + barrier + halve_parts(group, is_sum, type, indent, barrier) + indent +
         "{\n" + indent + "  " + type + " x = part[1];\n" + indent + "  acc = " + fold(is_sum, "part[0]", "x") +
         ";\n" + indent + "}\n";
}

// The grouped form (dialect.h): item lid of group gid folds elements lid,
// lid + L, ... of output gid, then the group halves its partial results in
// local memory until one is left. `loop` holds the lines that compute `value`
// for element r.
std::string grouped_reduce(const Dialect& d, int64_t group, int64_t count, bool is_sum, const std::string& type,
                           const std::string& init, const std::string& loop, const std::string& value) {
  const std::string L = std::to_string(group);
  std::string s = "  int gid = " + d.group_id + ", lid = " + d.local_id + ";\n";
  if (needs_parts(d, group)) s += "  " + d.local_qualifier + type + " part[" + L + "];\n";
  s += "  " + type + " acc = " + init + ";\n";
  s += "  for (int r = lid; r < " + std::to_string(count) + "; r += " + L + ") {\n" + loop;
  s += "    acc = " + fold(is_sum, "acc", value) + ";\n  }\n";
  return s + fold_group(d, group, is_sum, type, "  ") + "  if (lid == 0) b0[gid] = acc;\n";
}

std::pair<std::string, std::string> reduce_loops(const ReduceLoops& loops, const std::string& deeper,
                                                 const std::string& inner_hint) {
  std::string open, close;
  for (size_t level = 0; level < loops.size(); ++level) {
    const std::string pad = deeper + std::string(4 + 2 * level, ' '), &name = loops[level].first->name;
    if (level + 1 == loops.size() && !inner_hint.empty()) open += pad + inner_hint + "\n";
    open += pad + "for (int " + name + " = 0; " + name + " < " + std::to_string(loops[level].second) + "; ++" + name +
            ") {\n";
    close = pad + "}\n" + close;
  }
  return {open, close};
}

// ---- rows: reductions computed by the kernel that reads them ----

using namespace lowering;

// The work-group of a rows kernel on a device with local memory: about four
// elements of a row an item, 32 to 256 items (a softmax's 197-long rows get
// 64, a LayerNorm's 768 get 256); 0 for the serial form (and with
// TINYLENS_REDUCE=serial, as for reductions).
static int64_t rows_group_size(const Dialect& d, const DeviceInfo& info, int64_t rows, int64_t length) {
  if (d.local_qualifier.empty() || info.local_memory == 0 || setting_equals("TINYLENS_REDUCE", "serial")) return 0;
  int64_t group = 32;
  while (group < 256 && group * 4 < length) group *= 2;
  while (group > int64_t(info.max_work_group) || uint64_t(group) * 4 > info.local_memory) group /= 2;
  if (group < 2 || rows > (int64_t(1) << 31) / group - 1) return 0;
  return group;
}

// How rows_body computes a plan's rows on a device, with the values it
// prints: each reduction's at element r of a row, then the output's at x.
struct RowsForm {
  std::vector<const Node*> reds;
  int64_t rows = 0, length = 0;
  int64_t group = 0;  // > 0: a work-group of this many items a row
  int64_t block = 0;  // > 0 (C device): this many neighbouring rows an item, in an inner loop
  bool near = false;  // a row's elements are neighbours in memory
  std::vector<E> values;
  E out;
  E r;  // the loop variable over a row's elements in `values`
  // >= 0: the loop of reduction `kept` stores each element's value in the
  // output row, and `out` reads it back there instead of computing it again
  // (a softmax's exp(x - max) once an element, not twice).
  int kept = -1;
};

// Whether `e` computes something worth a store and a load to do once: an exp,
// a log, a root, a sine or a power.
static bool costly(const E& e) {
  return !walk_nodes(*e, [](const Expr& n) {
    const bool hard = n.op == ExprOp::Exp || n.op == ExprOp::Log || n.op == ExprOp::Sqrt || n.op == ExprOp::Sin ||
                      n.op == ExprOp::Pow;
    return hard ? Walk::stop : Walk::into;
  });
}

// The row's output (element x of row `row`) with the value of the last
// reduction that `out` computes again in full read back from the output
// row, where that reduction's loop leaves it: f.kept and f.out.
static void keep_a_value(RowsForm& f, const E& row, const E& x) {
  for (int j = int(f.values.size()) - 1; j >= 0; --j) {
    const E& v = f.values[size_t(j)];
    if (v->dtype != DType::f32 || f.out->dtype != DType::f32 || !costly(v)) continue;
    const E at_x = substitute(v, {{f.r.get(), x}});
    const E stored = load(0, DType::f32, row * idx(f.length) + x);
    std::unordered_map<const Expr*, E> reads;
    std::unordered_set<const Expr*> seen;  // a node shared by several is looked at once
    std::function<void(const E&)> find = [&](const E& n) {
      if (!seen.insert(n.get()).second) return;
      if (same(n, at_x)) reads[n.get()] = stored;
      else
        for (const E& s : n->src) find(s);
    };
    find(f.out);
    if (reads.empty()) continue;
    f.out = substitute(f.out, reads);
    f.kept = j;
    return;
  }
}

static RowsForm rows_form(Lowerer& low, const KernelPlan& plan, const Device& device) {
  const Dialect& d = device.dialect();
  const Node& out = *plan.output;
  const Shape& shape = out.shape;
  RowsForm f;
  for (auto& n : plan.fused)
    if (is_reduce(n->op)) f.reds.push_back(n.get());
  f.rows = numel(f.reds.front()->shape), f.length = numel(shape) / f.rows;
  const int64_t rows = f.rows, length = f.length;
  size_t a = shape.size();
  while (a > 0 && f.reds.front()->shape[a - 1] == 1) --a;
  const Shape row_shape(shape.begin(), shape.begin() + long(a)), row_inner(shape.begin() + long(a), shape.end());
  const E i = f.r = var("r", 0, length - 1), x = var("x", 0, length - 1);
  // The values at a row `row` (its axes `row_dims`); a reduction read by a
  // later one is that one's variable: red0, red1, ... (red0[b], ... for a block).
  auto lower_all = [&](const E& row, const std::vector<E>& row_dims, const std::string& suffix) {
    auto at = [&](const E& e) {
      std::vector<E> dims = row_dims;
      const std::vector<E>& inner = dims_of(*low.keep(with_flat(row_inner, e)));
      dims.insert(dims.end(), inner.begin(), inner.end());
      IndexRef ix = low.keep(with_dims(shape, dims, nullptr));
      ix->flat = row * idx(length) + e;
      return ix;
    };
    f.values.clear();
    for (size_t j = 0; j < f.reds.size(); ++j) {
      f.values.push_back(cast(low.lower(f.reds[j]->src[0], at(i)), f.reds[j]->dtype));
      auto value = std::make_shared<Expr>();
      value->op = ExprOp::Var;
      value->dtype = f.reds[j]->dtype;
      value->name = "red" + std::to_string(j) + suffix;
      low.given[f.reds[j]] = value;
    }
    f.out = cast(low.lower(plan.output, at(x)), out.dtype);
  };
  const E row = var("gid", 0, rows - 1);
  lower_all(row, dims_of(*low.keep(with_flat(row_shape, row))), "");
  // A work-group reads a row together where its elements are neighbours in
  // memory (a softmax's, a LayerNorm over a stored sequence).
  f.near = loads_near_along(f.out, x, 1);
  for (const E& v : f.values) f.near = f.near && loads_near_along(v, i, 1);
  f.group = f.near ? rows_group_size(d, device.info(), rows, length) : 0;
  // On the C device rows across an NCHW map's channels (ConvNeXt's
  // LayerNorm) go a block at a time: the rows along the row's last axis (a
  // map's row of pixels), whose elements are neighbours, in an inner loop
  // that vectorises (red0[b]), each with its own sums in the order of one
  // row alone.
  if (!f.near && d.buffers_in_array && !d.independent_loop.empty() && !row_shape.empty() && row_shape.back() >= 4) {
    f.block = row_shape.back();
    const E blk = var("gid", 0, rows / f.block - 1), b = var("b", 0, f.block - 1);
    std::vector<E> dims = dims_of(*low.keep(with_flat(Shape(row_shape.begin(), row_shape.end() - 1), blk)));
    dims.push_back(b);
    lower_all(blk * idx(f.block) + b, dims, "[b]");
    bool along = loads_near_along(f.out, b, 1);
    for (const E& v : f.values) along = along && loads_near_along(v, b, 1);
    if (!along) {  // back to a row an item
      f.block = 0;
      lower_all(row, dims_of(*low.keep(with_flat(row_shape, row))), "");
    }
  }
  if (f.block == 0) keep_a_value(f, row, x);
  return f;
}

// Rows whose elements are neighbours in memory, or on the C device a block
// of neighbouring rows an item: the forms that read memory in order. A row
// an item across strided elements is not one: on a GPU its items' stores
// land a row apart (ConvNeXt's LayerNorm of an NCHW map at batch 64 on an
// H100: 395 us for the mean and centring, against 131 as a reduction and an
// elementwise kernel).
bool rows_in_kernel(const KernelPlan& plan, const Device& device) {
  Lowerer low;
  for (size_t i = 0; i < plan.inputs.size(); ++i) low.params[plan.inputs[i].get()] = int(i + 1);
  const RowsForm f = rows_form(low, plan, device);
  return f.near || f.block > 0;
}

// An elementwise kernel that computes the reductions it reads (fused
// reduction nodes: schedule.cpp's fuse_rows) one row of its output's
// trailing axes at a time: each reduction over the row into a variable
// (red0, red1, ..., a later one may read an earlier one), then the row's
// outputs, in the form rows_form picks. On the C device a parallel item is
// a row (or a block of rows) and the loops are serial; with local memory a
// work-group takes a row, each reduction folds in local memory as the
// grouped form does and every item reads the result. Sets the kernel's
// flops and launch sizes.
std::string rows_body(Lowerer& low, const KernelPlan& plan, const Device& device, RenderedKernel& k,
                      int64_t& parallel_items) {
  const Dialect& d = device.dialect();
  const RowsForm f = rows_form(low, plan, device);
  const auto& reds = f.reds;
  const int64_t rows = f.rows, length = f.length, group = f.group, block = f.block;
  const E& i = f.r;
  const auto& values = f.values;
  const E& v_out = f.out;
  const std::string L = std::to_string(length), G = std::to_string(group), B = std::to_string(block);
  const std::string pad = group ? "  " : "    ", barrier = pad + d.barrier + "\n";
  std::string s = group ? "  int gid = " + d.group_id + ", lid = " + d.local_id + ";\n" : "";
  if (group && needs_parts(d, group)) s += "  " + d.local_qualifier + "float part[" + G + "];\n";
  int counter = 0;
  double flops = 0;
  for (size_t j = 0; j < reds.size(); ++j) {
    const Node& r = *reds[j];
    const bool is_sum = r.op == Op::Sum;
    const E& v = values[j];
    Printer pr{d, "", pad + "    ", {}, counter, 0};
    const std::string val = pr(v), name = "red" + std::to_string(j);
    counter = pr.counter;
    flops += (pr.flops_per_item + 1) * double(length);
    const std::string init = is_sum ? "0.0f" : "(-" + d.infinity + ")";
    // The value the output reads back (RowsForm::kept), stored where the
    // item that reads it will (the same item: no barrier).
    const std::string store =
        int(j) == f.kept ? pad + "    b0[gid*" + L + "+r] = " + Printer::strip(val) + ";\n" : std::string();
    if (block) {
      s += pad + "float " + name + "[" + B + "];\n" + pad + "for (int b = 0; b < " + B + "; ++b) " + name + "[b] = " +
           init + ";\n" + pad + "for (int r = 0; r < " + L + "; ++r) {\n" + independent_hint(d, pad + "  ") + pad +
           "  for (int b = 0; b < " + B + "; ++b) {\n" + pr.lines + pad + "    " + name + "[b] = " +
           fold(is_sum, name + "[b]", val) + ";\n" + pad + "  }\n" + pad + "}\n";
      continue;
    }
    s += pad + "float " + name + ";\n" + pad + "{\n" + pad + "  float acc = " + init + ";\n";
    if (group) {
      s += pad + "  for (int r = lid; r < " + L + "; r += " + G + ") {\n" + pr.lines + store + pad + "    acc = " +
           fold(is_sum, "acc", val) + ";\n" + pad + "  }\n";
      s += fold_group(d, group, is_sum, "float", pad + "  ") + pad + "  " + name + " = acc;\n" + pad + "}\n";
      if (needs_parts(d, group)) s += barrier;  // every item has read part before the next reduction writes it
    } else {
      // Partial results in lanes where the loop reads neighbouring elements,
      // as the serial reduction does (render.cpp's reduce_body).
      const bool lanes = length >= 32 && loads_near_along(v, i, 1);
      const std::string stripped = Printer::strip(val);
      if (!is_sum && lanes) s += pad + "  int any_nan = 0;\n";
      if (lanes) s += pad + "  " + (is_sum ? d.reordered_sum_loop : d.reordered_max_loop) + "\n";
      s += pad + "  for (int r = 0; r < " + L + "; ++r) {\n" + pr.lines + store;
      if (!is_sum && lanes)
        s += pad + "    any_nan |= " + stripped + " != " + stripped + ";\n" + pad + "    acc = " + stripped + " > acc ? " +
             stripped + " : acc;\n" + pad + "  }\n" + pad + "  " + name + " = any_nan ? " + d.nan + " : acc;\n";
      else
        s += pad + "    acc = " + fold(is_sum, "acc", val) + ";\n" + pad + "  }\n" + pad + "  " + name + " = acc;\n";
      s += pad + "}\n";
    }
  }
  Printer pr{d, "", pad + (block ? "    " : "  "), {}, counter, 0};
  const std::string val = Printer::strip(pr(v_out));
  flops += pr.flops_per_item * double(length);
  if (group)
    s += "  for (int x = lid; x < " + L + "; x += " + G + ") {\n" + pr.lines + "    b0[gid*" + L + "+x] = " + val + ";\n  }\n";
  else if (block)
    s += pad + "for (int x = 0; x < " + L + "; ++x) {\n" + independent_hint(d, pad + "  ") + pad + "  for (int b = 0; b < " + B +
         "; ++b) {\n" + pr.lines + pad + "    b0[(gid*" + B + "+b)*" + L + "+x] = " + val + ";\n" + pad + "  }\n" + pad +
         "}\n";
  else
    s += independent_hint(d, pad) + pad + "for (int x = 0; x < " + L + "; ++x) {\n" + pr.lines + pad + "  b0[gid*" + L +
         "+x] = " + val + ";\n" + pad + "}\n";
  k.flops = flops * double(rows);
  parallel_items = block ? rows / block : rows;
  k.global[0] = group ? rows * group : parallel_items;
  k.local[0] = group;
  return s;
}

}  // namespace tl
