// A tiny pool that runs fn(start, end) over slices of [0, n) on every core.
// Kernels on the CPU device are launched through it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tl {

// How many threads the C device runs: TINYLENS_THREADS when it is a
// positive number, otherwise the cores this process may run on (its
// affinity mask: `taskset`, a container's cpuset), not every core the
// machine has, which would put two threads on one core and make each
// launch wait for the slower.
unsigned default_thread_count();

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  unsigned size() const { return unsigned(workers_.size()) + 1; }
  // Splits [0, n) into one contiguous slice per thread (the caller runs one).
  // With a grain > 0 the slices are shared: each thread calls fn on pieces of
  // its own slice, `grain` units at a time from its front, and a thread that
  // runs out takes half of what is left of the fullest other slice, from its
  // back. A core slowed by other work (a busy virtual machine) then holds the
  // others up by at most a piece, not by the rest of its slice. Only for
  // kernels whose pieces cost no more than their slice in one call (n <= 2^31).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 0);

 private:
  void work(unsigned index);
  // Runs thread `index`'s part of the current launch: its slice at once, or
  // (grain_ > 0) piece by piece, then pieces of the others' slices.
  void run_part(unsigned index);
  bool take_front(unsigned index, int64_t& start, int64_t& end);
  bool take_half(unsigned index, int64_t& start, int64_t& end);
  std::vector<std::thread> workers_;
  std::mutex mutex_, launch_;
  std::condition_variable wake_, done_;
  // Published by generation_ (release) and read after it (acquire).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, grain_ = 0;
  // Each thread's unclaimed slice while a launch shares them: front in the
  // low 32 bits, back (exclusive) in the high 32, changed by compare-exchange.
  struct alignas(64) Slice {
    std::atomic<uint64_t> range{0};
  };
  std::vector<Slice> slices_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tl
