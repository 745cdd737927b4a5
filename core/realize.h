// Runs the kernels a set of nodes needs: schedule, render, compile (memoised
// in memory and cached on disk), allocate, launch, record a profile entry.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/profile.h"
#include "core/progress.h"
#include "core/runtime/device.h"
#include "core/settings.h"

namespace tl {

void realize_nodes(const std::vector<NodeRef>& roots);
// How many realizes with work to do this thread has started, and how many
// tensors it has read back to the host (tensor.cpp): core/jit.cpp sees from
// them whether a function computed or read anything on the way.
uint64_t realizes_on_this_thread();
uint64_t host_reads_on_this_thread();

// While alive, realizes on this thread (realize_nodes, Tensor::realize, and
// the work handed to realize_then) are collected instead of run; realize()
// then runs them all as one realize, so one schedule covers them and a
// repeated group (a training step) replays as one plan. The `then` actions
// run after that realize succeeded, in order: state that must only change
// when the values exist (a model's weights) is assigned there, so a cancel
// leaves it as it was. Reading a value (to_vector, item) while collecting is
// an error. Destroyed without realize(): the collected work is dropped.
class RealizeTogether {
 public:
  RealizeTogether();
  ~RealizeTogether();
  RealizeTogether(const RealizeTogether&) = delete;
  RealizeTogether& operator=(const RealizeTogether&) = delete;
  void realize();
  static bool collect(const std::vector<NodeRef>& roots, std::function<void()> then = {});  // false: none alive

 private:
  std::vector<NodeRef> roots_;
  std::vector<std::function<void()>> then_;
  RealizeTogether* parent_;
};

// Realizes `roots`, then runs `then`; inside a RealizeTogether both wait
// for its realize().
void realize_then(const std::vector<NodeRef>& roots, std::function<void()> then);

// While alive, every realize on this thread first shows the roots it is about
// to compute to `see`, before anything is scheduled. It lets a caller
// snapshot the graph of work that library code realizes internally (the
// forward, backward and optimizer update of a training step). Nestable: only
// the innermost observer sees the roots.
class RealizeObserver {
 public:
  explicit RealizeObserver(std::function<void(const std::vector<NodeRef>&)> see);
  ~RealizeObserver();
  RealizeObserver(const RealizeObserver&) = delete;
  RealizeObserver& operator=(const RealizeObserver&) = delete;
  static void notify(const std::vector<NodeRef>& roots);  // called by realize_nodes

 private:
  std::function<void(const std::vector<NodeRef>&)> see_;
  RealizeObserver* parent_;
};

// How a realize compiles: the kernels among `kernels` that this process has
// not compiled yet are loaded from the disk cache when each was built alone
// before; the rest are built in one batch per core (one program each) when
// the device can (Device::builds_together) and TINYLENS_NOBATCH is not set to
// a value other than 0, else kernel by kernel; either way one compiler per
// core. A batch that fails is built again kernel by kernel, so the
// CompileError names the broken kernel and carries its own source and log.
// Returns how many it built (not loaded).
size_t compile_new_kernels(Device& device, const std::vector<KernelSource>& kernels);
bool batching_enabled();  // false when TINYLENS_NOBATCH=1
// Whether a convolution and the max pool that alone reads it run as one
// kernel where the device can (KernelPlan::pool); false when
// TINYLENS_NOPOOLFUSION=1, to compare.
bool pool_fusion_enabled();

// Forgets every kernel this process rendered and compiled (not the disk
// cache): the next realize renders, then compiles or loads, as a new process
// would. For tests.
void forget_compiled_kernels();

}  // namespace tl
