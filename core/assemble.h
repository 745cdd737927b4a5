// Concatenations assembled in place. Tensor::cat is a sum of zero-padded
// pieces, which the scheduler makes a kernel of its own: it reads every
// piece and writes them again side by side (SqueezeNet's fire modules spent
// 0.5 ms of 4 in such copies). Where the pieces lie one after another in the
// concatenation's memory (the axis has only unit axes before it: a batch of
// one joined along channels) and each is the output of an earlier kernel of
// the same plan, those kernels write their outputs straight into their part
// of its buffer (Device::view), and the concatenation is not launched. A
// piece may be an assembled concatenation itself (Tensor::cat stores a
// concatenation that another one joins): its own pieces then write into
// their part of its part, views in views.
#pragma once
#include <vector>

#include "core/replay.h"
#include "core/schedule.h"

namespace tl {

class Device;

// Marks the plan's concatenations that can be assembled (their KernelInfo's
// `assembled`) and their inputs' kernels (Plan::Kernel::into, into_offset).
// `plans` are the kernels' schedules, in the plan's order; keep and frees
// are already set.
// Nothing changes on a device without views.
void assemble_concatenations(Plan& plan, const std::vector<KernelPlan>& plans, Device& device);

}  // namespace tl
