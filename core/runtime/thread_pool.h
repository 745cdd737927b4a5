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

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  unsigned size() const { return unsigned(workers_.size()) + 1; }
  // Splits [0, n) into one contiguous slice per thread (the caller runs one).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void work(unsigned index);
  std::vector<std::thread> workers_;
  std::mutex mutex_, launch_;
  std::condition_variable wake_, done_;
  // Published by generation_ (release) and read after it (acquire).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tl
