// Runs the kernels a set of nodes needs: schedule, render, compile (memoised
// in memory and cached on disk), allocate, launch, record a profile entry.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ops.h"
#include "profile.h"
#include "runtime/device.h"

namespace tl {

void realize_nodes(const std::vector<NodeRef>& roots);

// Compiles through the in-process memo and the disk cache. `hit` says whether
// nothing new was compiled. Exposed for tests and tools.
std::shared_ptr<Program> compile_kernel(Device& device, const std::string& name, const std::string& source,
                                        bool* hit = nullptr);

// Kernels as they would run for these nodes, without running them (the UI's
// kernel graph and the CLI's --dump-kernels).
std::vector<KernelInfo> plan_kernels(const std::vector<NodeRef>& roots);

// Set by a job's owner: checked between kernels; when it becomes true the
// realize throws Cancelled and leaves every tensor as it was.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};
void set_cancel_flag(const std::atomic<bool>* flag);  // for this thread; nullptr clears

}  // namespace tl
