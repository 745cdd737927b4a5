#include "core/runtime/thread_pool.h"

#include <sched.h>

#include <chrono>

namespace tl {

namespace {

// A model launches a kernel every few tens of microseconds; a worker asleep on
// the condition variable after each one is woken ~90 times per image, and a
// wake costs about as much as a small kernel. So both sides first poll the
// atomics for a while, spinning briefly and then yielding the core on every
// poll so a loaded machine loses little, and only then block. The while is
// longer than a kernel: the thread that finishes its slice first waits for
// the other, and a launch that found its worker asleep (in a virtual
// machine, its core idle) started it 100-1000 us late. With 50 us, 23% of
// SqueezeNet's launches did (mean delay 53 us); with 2 ms, 0.2% (mean 1.5 us).
constexpr auto kPoll = std::chrono::microseconds(2000);

// The gap between two kernels of a replayed model is a few microseconds of
// host work: that long, the pollers spin without giving the core away (a
// yield costs a system call each time). Measured on SqueezeNet (44 kernels,
// 2 threads, 8 interleaved rounds): median 2.37 ms against 2.43 with yields only.
constexpr int kSpins = 200;  // pause instructions: about 4-10 us

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls until done() or kPoll has passed; true when done() held.
template <typename Done>
bool poll_until(Done done) {
  for (int i = 0; i < kSpins; ++i) {
    if (done()) return true;
    spin_pause();
  }
  const auto deadline = std::chrono::steady_clock::now() + kPoll;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    sched_yield();
  }
  return true;
}

}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

static void slice(int64_t n, unsigned parts, unsigned i, int64_t& start, int64_t& end) {
  start = n * i / parts;
  end = n * (i + 1) / parts;
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard serial(launch_);  // one launch at a time shares the workers
  job_ = &fn;
  n_ = n;
  pending_.store(unsigned(workers_.size()), std::memory_order_relaxed);
  {
    // Under the mutex, so a worker that checks before it sleeps cannot miss it.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  int64_t start, end;
  slice(n, size(), 0, start, end);
  if (start < end) fn(start, end);
  auto finished = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!poll_until(finished)) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, finished);
  }
  job_ = nullptr;
}

void ThreadPool::work(unsigned index) {
  uint64_t seen = 0;
  auto woken = [&] {
    return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
  };
  for (;;) {
    if (!poll_until(woken)) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, woken);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    const auto* job = job_;
    const int64_t n = n_;
    int64_t start, end;
    slice(n, size(), index, start, end);
    if (start < end) (*job)(start, end);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);  // pairs with the caller's check before it sleeps
      done_.notify_one();
    }
  }
}

}  // namespace tl
