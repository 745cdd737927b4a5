#include "thread_pool.h"

namespace tl {

ThreadPool::ThreadPool(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
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
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    n_ = n;
    pending_ = unsigned(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  int64_t start, end;
  slice(n, size(), 0, start, end);
  if (start < end) fn(start, end);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::work(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = n_;
    }
    int64_t start, end;
    slice(n, size(), index, start, end);
    if (start < end) (*job)(start, end);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace tl
