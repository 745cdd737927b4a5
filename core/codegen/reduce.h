// The text of reductions shared by the renderer (render.cpp): how a value
// folds into an accumulator, and the grouped form (reduce_group_size, in
// render.h, decides when it is used).
#pragma once
#include <cstdint>
#include <string>

#include "core/dialect.h"

namespace tl {

// `acc` with `value` folded in: a sum, or a maximum where NaN wins.
std::string fold(bool is_sum, const std::string& acc, const std::string& value);

// The grouped form: item lid of group gid folds elements lid, lid + L, ...
// of output gid, then the group halves its partial results in local memory.
std::string grouped_reduce(const Dialect& d, int64_t group, int64_t count, bool is_sum, const std::string& type,
                           const std::string& init, const std::string& loop, const std::string& value);

}  // namespace tl
