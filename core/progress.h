// How a running realize is watched and stopped: the cancel flag a job's
// owner sets, and the count of kernels compiled so far. Realize, replay and
// the tuner all check and report through these, so they live below all three.
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <set>
#include <stdexcept>

#include "core/runtime/device.h"

namespace tl {

// Set by a job's owner: checked between kernels; when it becomes true the
// realize throws Cancelled and leaves every tensor as it was.
struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("cancelled") {}
};
void set_cancel_flag(const std::atomic<bool>* flag);  // for this thread; nullptr clears
bool cancel_requested();                             // this thread's flag is set
const std::atomic<bool>* cancel_flag_of_this_thread();  // for threads that work for this one

// While alive, every realize on this thread that compiles kernels new to this
// process reports its progress to `report(ready, total)`, counted over the
// observer's whole life, so a run of several realizes (an ONNX model
// realizes in pieces, a classify realizes its input first) counts every
// kernel of the run: a realize that finds n new kernels (or, on PoCL, n
// built by a cancelled realize and never launched) reports total + n before
// its first compile starts, then ready + 1 once per kernel, when that
// kernel can run: when it is built (a disk-cache hit counts; kernels built
// together in one compiler run are counted when that run ends, one call
// each), or, on a device that finishes a build at the kernel's first launch
// (Device::builds_at_first_launch: PoCL), when its first launch has
// returned, which is where such a device spends the time. So ready reaches
// total only when the last new kernel is done. Always called on the
// realizing thread, even while workers compile in parallel; it must not
// throw. A realize with nothing new to compile reports nothing. Nestable
// like RealizeObserver: only the innermost observer is told. The CLI draws a
// progress bar with it, the window a status line.
class CompileProgress {
 public:
  explicit CompileProgress(std::function<void(size_t ready, size_t total)> report);
  ~CompileProgress();
  CompileProgress(const CompileProgress&) = delete;
  CompileProgress& operator=(const CompileProgress&) = delete;
  // Called by realize: n more kernels to count, then each one ready.
  static void kernels_found(size_t n);
  static void kernels_ready(size_t n);

 private:
  std::function<void(size_t, size_t)> report_;
  CompileProgress* parent_;
  size_t ready_ = 0, total_ = 0;
};

// The kernels a realize built on a device that finishes its builds at a
// kernel's first launch (Device::builds_at_first_launch), from the plan's
// making until run_plan has launched each once: CompileProgress counts them
// then. What run_plan never launches (a tuning candidate, a kernel with
// nothing to compute) counts when the realize is done with it
// (count_the_rest). One per realize of a new plan; the innermost is this
// thread's.
class FirstLaunches {
 public:
  FirstLaunches();
  ~FirstLaunches();
  FirstLaunches(const FirstLaunches&) = delete;
  FirstLaunches& operator=(const FirstLaunches&) = delete;
  static FirstLaunches* innermost();  // nullptr outside a realize
  void count_the_rest();
  std::set<Program*> waiting;

 private:
  FirstLaunches* parent_;
};

// Called by run_plan after each launch: a kernel built on a device that
// finishes builds at first launch and not launched before is counted ready
// now (Program::awaits_first_launch).
void count_first_launch(Program& program);

}  // namespace tl
