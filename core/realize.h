// Runs the kernels a set of nodes needs: schedule, render, compile (memoised
// in memory and cached on disk), allocate, launch, record a profile entry.
#pragma once
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops.h"
#include "profile.h"
#include "runtime/device.h"

namespace tl {

void realize_nodes(const std::vector<NodeRef>& roots);

// Set by a job's owner: checked between kernels; when it becomes true the
// realize throws Cancelled and leaves every tensor as it was.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};
void set_cancel_flag(const std::atomic<bool>* flag);  // for this thread; nullptr clears

}  // namespace tl
