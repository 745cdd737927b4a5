#include "core/runtime/scratch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace tl {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::atomic<uint64_t> g_takes{0}, g_from_block{0};
std::atomic<size_t> g_fail_above{SIZE_MAX};

}  // namespace

ScratchArena::~ScratchArena() { std::free(base_); }

bool ScratchArena::in_block(const void* p) const {
  const auto* q = static_cast<const unsigned char*>(p);
  return base_ && q >= base_ && q < base_ + size_;
}

void* ScratchArena::take(size_t bytes) {
  bytes = round_up(std::max<size_t>(bytes, 1), kAlign);
  if (live_ == 0 && want_ > size_) {  // whole again, and too small for the last calls
    std::free(base_);
    size_ = round_up(want_, size_t{1} << 16);
    base_ = static_cast<unsigned char*>(std::aligned_alloc(kAlign, size_));
    if (!base_) size_ = 0;
  }
  need_ += bytes;
  if (need_ <= kMaxBlock) want_ = std::max(want_, need_);
  void* p = nullptr;
  if (used_ + bytes <= size_) {
    p = base_ + used_;
    used_ += bytes;
    g_from_block.fetch_add(1, std::memory_order_relaxed);
  } else {
    p = std::aligned_alloc(kAlign, bytes);
    if (!p) {
      need_ -= bytes;
      return nullptr;
    }
  }
  ++live_;
  g_takes.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void ScratchArena::give(void* p) {
  if (!p) return;
  if (!in_block(p)) std::free(p);
  if (--live_ == 0) used_ = need_ = 0;
}

namespace {
ScratchArena& this_thread_arena() {
  thread_local ScratchArena arena;
  return arena;
}
}  // namespace

void* scratch_take(size_t bytes) {
  if (bytes > g_fail_above.load(std::memory_order_relaxed)) return nullptr;
  return this_thread_arena().take(bytes);
}
void scratch_fail_above(size_t bytes) { g_fail_above.store(bytes, std::memory_order_relaxed); }
void scratch_give(void* p) { this_thread_arena().give(p); }

ScratchCounts scratch_counts() {
  return {g_takes.load(std::memory_order_relaxed), g_from_block.load(std::memory_order_relaxed)};
}

}  // namespace tl
