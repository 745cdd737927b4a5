#include "core/runtime/buffer_pool.h"

#include <algorithm>
#include <cstdlib>

#include "core/runtime/device.h"
#include "core/runtime/run_memory.h"
#include "core/settings.h"

namespace tl {

BufferPool::BufferPool(size_t capacity) : state_(std::make_shared<State>()) {
  if (const char* mb = setting_value("TINYLENS_POOL_MB"); mb && *mb) capacity = size_t(std::strtoull(mb, nullptr, 10)) << 20;
  state_->capacity = capacity;
}

std::shared_ptr<Buffer> BufferPool::get(Device& device, size_t bytes) {
  if (!device.available()) {
    clear();
    return device.allocate(bytes);  // names why the device cannot be used
  }
  std::shared_ptr<Buffer> raw;
  {
    std::lock_guard lock(state_->mutex);
    if (auto it = state_->free.find(bytes); it != state_->free.end()) {
      raw = std::move(it->second);
      state_->free.erase(it);
      state_->held -= bytes;
    }
  }
  if (!raw) raw = device.allocate(bytes);
  if (state_->capacity == 0) return raw;
  // The caller's handle shares nothing with `raw` but the pointer: when the
  // last copy goes, `raw` returns to the pool (or is freed).
  std::weak_ptr<State> pool = state_;
  Buffer* p = raw.get();
  return std::shared_ptr<Buffer>(p, [pool, raw = std::move(raw), bytes](Buffer*) mutable {
    if (auto s = pool.lock()) {
      std::lock_guard lock(s->mutex);
      if (s->held + bytes <= s->capacity && raw->device()->available()) {
        raw->forget_derived();  // its next owner writes other contents
        s->held += bytes;
        s->free.emplace(bytes, std::move(raw));
        return;
      }
    }
    raw.reset();  // freed outside the pool's lock
  });
}

size_t BufferPool::held_bytes() const {
  std::lock_guard lock(state_->mutex);
  return state_->held;
}

void BufferPool::clear() {
  std::multimap<size_t, std::shared_ptr<Buffer>> drop;
  std::lock_guard lock(state_->mutex);
  drop.swap(state_->free);
  state_->held = 0;
}

std::shared_ptr<Buffer> Device::acquire(size_t bytes) {
  BufferPool* pool = nullptr;
  {
    std::lock_guard lock(pool_mutex_);
    if (!pool_) {
      // A device with memory of its own keeps up to a quarter of it (a batch
      // of 64 through EfficientNet-Lite0 releases about 1.5 GB a run, and
      // re-allocating what did not fit cost a GPU 6 ms a run); a device in
      // the host's memory keeps an eighth, at most 1 GiB.
      const uint64_t memory = info().global_memory ? info().global_memory : uint64_t(2) << 30;
      const bool own_memory = info().kind == "GPU";
      pool_ = std::make_unique<BufferPool>(
          size_t(own_memory ? memory / 4 : std::min<uint64_t>(memory / 8, uint64_t(1) << 30)));
    }
    pool = pool_.get();
  }
  return RunMemory::charge(bytes, [&] { return pool->get(*this, bytes); });
}

void Device::release_pooled() {
  std::lock_guard lock(pool_mutex_);
  if (pool_) pool_->clear();
}

}  // namespace tl
