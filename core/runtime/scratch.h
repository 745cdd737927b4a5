// Scratch memory for the C device's GEMM library (kernels/gemm_cpu_shared.h):
// packed panels, a convolution's phased image, Winograd's V and M. A call
// takes a few blocks at its start and gives them all back before it
// returns, on the same thread, millions of times a run.
//
// Each thread keeps one block and cuts a call's pieces from it, one after
// another; when the call has given every piece back the block is whole
// again, so the next call gets the same memory, which a kernel wrote a
// moment ago and the cache still holds. From malloc, a Winograd call of
// SqueezeNet took 2-2.5x its time in a profiled run (500-700 us against
// 210-280), likely because the profiler's host allocations between kernels
// moved malloc's blocks (not pinned down); with the per-thread block it
// kept its unprofiled time.
//
// A call that wants more than the block holds gets the rest from malloc and
// the block grows to the call's whole need once it is free again, up to
// kMaxBlock; a larger need (a phased image of a very large image) always
// goes to malloc. The block is freed when its thread ends.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tl {

class ScratchArena {
 public:
  static constexpr size_t kMaxBlock = size_t{64} << 20;
  ScratchArena() = default;
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;
  ~ScratchArena();

  // 64-byte aligned; nullptr only when malloc fails.
  void* take(size_t bytes);
  // Any order; nullptr is ignored.
  void give(void* p);

  size_t block_bytes() const { return size_; }
  bool in_block(const void* p) const;

 private:
  unsigned char* base_ = nullptr;
  size_t size_ = 0;  // the block
  size_t used_ = 0;  // cut from it since it was last whole
  size_t need_ = 0;  // taken since it was last whole, block or not
  size_t want_ = 0;  // the largest need seen (up to kMaxBlock)
  int live_ = 0;     // pieces not given back
};

// The calling thread's arena: what the GEMM library's scratch_alloc and
// scratch_free call once the C device has installed them.
void* scratch_take(size_t bytes);
void scratch_give(void* p);

// For tests: every request for more than `bytes` fails, as when memory runs
// out, so the library's paths without scratch run. SIZE_MAX (the default)
// lifts it.
void scratch_fail_above(size_t bytes);

// Counts over every thread since the process started.
struct ScratchCounts {
  uint64_t takes = 0;       // pieces handed out
  uint64_t from_block = 0;  // of which cut from a thread's block
};
ScratchCounts scratch_counts();

}  // namespace tl
