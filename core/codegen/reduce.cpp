// Reductions' shared text (render.cpp writes their bodies): the grouped
// form's size choice and code, the serial form's loops, and how a value
// folds into an accumulator.
#include "core/codegen/reduce.h"

#include <algorithm>

#include "core/codegen/lower.h"
#include "core/codegen/render.h"

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

// `acc` with `value` folded in: a sum, or a maximum where NaN wins.
std::string fold(bool is_sum, const std::string& acc, const std::string& value) {
  if (is_sum) return acc + " + " + value;
  return lowering::nan_max(value, acc);
}

// The grouped form (dialect.h): item lid of group gid folds elements lid,
// lid + L, ... of output gid, then the group halves its partial results in
// local memory until one is left. `loop` holds the lines that compute `value`
// for element r.
std::string grouped_reduce(const Dialect& d, int64_t group, int64_t count, bool is_sum, const std::string& type,
                           const std::string& init, const std::string& loop, const std::string& value) {
  const std::string L = std::to_string(group), barrier = "  " + d.barrier + "\n";
  std::string s = "  int gid = " + d.group_id + ", lid = " + d.local_id + ";\n";
  s += "  " + d.local_qualifier + type + " part[" + L + "];\n";
  s += "  " + type + " acc = " + init + ";\n";
  s += "  for (int r = lid; r < " + std::to_string(count) + "; r += " + L + ") {\n" + loop;
  s += "    acc = " + fold(is_sum, "acc", value) + ";\n  }\n";
  s += "  part[lid] = acc;\n" + barrier;
  for (int64_t half = group / 2; half > 1; half /= 2) {
    const std::string h = std::to_string(half);
    s += "  if (lid < " + h + ") {\n    " + type + " x = part[lid + " + h + "];\n    part[lid] = " +
         fold(is_sum, "part[lid]", "x") + ";\n  }\n" + barrier;
  }
  s += "  if (lid == 0) {\n    " + type + " x = part[1];\n    b0[gid] = " + fold(is_sum, "part[0]", "x") + ";\n  }\n";
  return s;
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

}  // namespace tl
