// Buffers a realize no longer needs, kept by exact size and handed out again.
// A replayed plan asks for the same sizes on every run, and device
// allocators are slow: cuMemAlloc takes tens of microseconds and cuMemFree
// waits for the GPU; a large malloc on the host maps fresh pages that fault
// on first touch. Bounded: a released buffer that would take the pool past
// its capacity is freed at once. The pool may die before the buffers it
// handed out; those are then freed when released.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace tl {

class Buffer;
class Device;

class BufferPool {
 public:
  // capacity: the most bytes kept unused; TINYLENS_POOL_MB overrides it (0
  // turns pooling off).
  explicit BufferPool(size_t capacity);
  // A buffer of exactly `bytes` bytes from `device`: a released one if the
  // pool holds one, else device.allocate(bytes).
  std::shared_ptr<Buffer> get(Device& device, size_t bytes);
  size_t held_bytes() const;
  void clear();

 private:
  struct State {
    mutable std::mutex mutex;
    std::multimap<size_t, std::shared_ptr<Buffer>> free;
    size_t held = 0, capacity = 0;
  };
  std::shared_ptr<State> state_;
};

}  // namespace tl
