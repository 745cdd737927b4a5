// The text of reductions shared by the renderer (render.cpp): how a value
// folds into an accumulator, the serial form's loops, and the grouped form
// (reduce_group_size, in render.h, decides when it is used); and the rows
// kernels' bodies (rows_body).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/codegen/expr.h"
#include "core/dialect.h"

namespace tl {

// The dialect's hint that a loop's iterations are independent, on its own
// line before the loop ("" when the dialect has none).
std::string independent_hint(const Dialect& d, const std::string& indent);

// `acc` with `value` folded in: a sum, or a maximum where NaN wins.
std::string fold(bool is_sum, const std::string& acc, const std::string& value);

// The serial form's loops over the reduced axes, outermost first: a loop
// variable (expr.h's Var) and its extent each.
using ReduceLoops = std::vector<std::pair<E, int64_t>>;

// Their opening and closing text, each loop indented by `deeper` and two
// spaces a level. `inner_hint` (a dialect's pragma) is written before the
// innermost loop.
std::pair<std::string, std::string> reduce_loops(const ReduceLoops& loops, const std::string& deeper,
                                                 const std::string& inner_hint);

// The grouped form: item lid of group gid folds elements lid, lid + L, ...
// of output gid, then the group halves its partial results in local memory.
std::string grouped_reduce(const Dialect& d, int64_t group, int64_t count, bool is_sum, const std::string& type,
                           const std::string& init, const std::string& loop, const std::string& value);

// An elementwise plan that computes the reductions it reads (fused
// reduction nodes: schedule.cpp's fuse_rows), a row of its output's last
// axis at a time (render.h's rows_in_kernel says in which form): the body
// of its kernel, its flops and launch sizes in k, and its parallel items.
struct RenderedKernel;
struct KernelPlan;
class Device;
namespace lowering {
struct Lowerer;
}
std::string rows_body(lowering::Lowerer& low, const KernelPlan& plan, const Device& device, RenderedKernel& k,
                      int64_t& parallel_items);

}  // namespace tl
