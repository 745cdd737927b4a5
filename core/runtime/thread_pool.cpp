#include "core/runtime/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/settings.h"

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

unsigned default_thread_count() {
  if (const char* env = setting_value("TINYLENS_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= 1024) return unsigned(n);
  }
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0 && CPU_COUNT(&mask) > 0) return unsigned(CPU_COUNT(&mask));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(unsigned threads) : slices_(std::max(1u, threads)) {
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

namespace {
uint64_t pack_range(int64_t front, int64_t back) { return uint64_t(front) | uint64_t(back) << 32; }
int64_t front_of(uint64_t r) { return int64_t(r & 0xffffffffu); }
int64_t back_of(uint64_t r) { return int64_t(r >> 32); }
}  // namespace

bool ThreadPool::take_front(unsigned index, int64_t& start, int64_t& end) {
  auto& range = slices_[index].range;
  uint64_t r = range.load(std::memory_order_acquire);
  for (;;) {
    const int64_t front = front_of(r), back = back_of(r);
    if (front >= back) return false;
    const int64_t next = std::min(back, front + grain_);
    if (range.compare_exchange_weak(r, pack_range(next, back), std::memory_order_acq_rel)) {
      start = front, end = next;
      return true;
    }
  }
}

bool ThreadPool::take_half(unsigned index, int64_t& start, int64_t& end) {
  for (;;) {
    // The slice with the most left, from its back: its owner keeps working
    // from the front, on memory it has touched.
    unsigned victim = index;
    int64_t most = 0;
    for (unsigned i = 0; i < slices_.size(); ++i) {
      const uint64_t r = slices_[i].range.load(std::memory_order_acquire);
      if (i != index && back_of(r) - front_of(r) > most) victim = i, most = back_of(r) - front_of(r);
    }
    if (victim == index) return false;
    uint64_t r = slices_[victim].range.load(std::memory_order_acquire);
    const int64_t front = front_of(r), back = back_of(r);
    if (front >= back) continue;
    const int64_t cut = back - (back - front + 1) / 2;
    if (slices_[victim].range.compare_exchange_strong(r, pack_range(front, cut), std::memory_order_acq_rel)) {
      start = cut, end = back;
      return true;
    }
  }
}

void ThreadPool::run_part(unsigned index) {
  const auto& fn = *job_;
  int64_t start, end;
  if (grain_ <= 0) {
    slice(n_, size(), index, start, end);
    if (start < end) fn(start, end);
    return;
  }
  for (;;) {
    if (take_front(index, start, end)) {
      fn(start, end);
    } else if (take_half(index, start, end)) {
      // Taken whole, then worked through a piece at a time like an own
      // slice, so that others may take from it in turn.
      slices_[index].range.store(pack_range(start, end), std::memory_order_release);
    } else {
      return;
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  std::lock_guard serial(launch_);  // one launch at a time shares the workers
  job_ = &fn;
  n_ = n;
  grain_ = grain > 0 && n < (int64_t(1) << 31) ? grain : 0;
  if (grain_ > 0)
    for (unsigned i = 0; i < size(); ++i) {
      int64_t start, end;
      slice(n, size(), i, start, end);
      slices_[i].range.store(pack_range(start, end), std::memory_order_relaxed);
    }
  pending_.store(unsigned(workers_.size()), std::memory_order_relaxed);
  {
    // Under the mutex, so a worker that checks before it sleeps cannot miss it.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_part(0);
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
    run_part(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);  // pairs with the caller's check before it sleeps
      done_.notify_one();
    }
  }
}

}  // namespace tl
