#include "core/runtime/run_memory.h"

#include "core/error.h"
#include "core/runtime/device.h"

namespace tl {

namespace {
// The scope bounding this thread's runs, if any.
thread_local std::shared_ptr<void> current_scope;
}  // namespace

RunMemory::RunMemory(uint64_t limit, Describe describe) {
  if (current_scope) return;  // inside another run's scope
  state_ = std::make_shared<State>();
  state_->limit = limit;
  state_->describe = std::move(describe);
  current_scope = state_;
}

RunMemory::~RunMemory() {
  if (state_) current_scope.reset();
}

uint64_t RunMemory::peak_bytes() const { return state_ ? state_->peak.load() : 0; }

std::shared_ptr<Buffer> RunMemory::charge(size_t bytes, const std::function<std::shared_ptr<Buffer>()>& make) {
  auto state = std::static_pointer_cast<State>(current_scope);
  if (!state) return make();
  const uint64_t held = state->held.fetch_add(bytes) + bytes;
  if (held > state->limit) {
    state->held -= bytes;
    throw IOError(state->describe(held - bytes, bytes, state->limit));
  }
  for (uint64_t p = state->peak.load(); held > p && !state->peak.compare_exchange_weak(p, held);) {
  }
  std::shared_ptr<Buffer> b;
  try {
    b = make();
  } catch (...) {
    state->held -= bytes;
    throw;
  }
  // The caller's handle shares only the pointer with `b`: when its last copy
  // goes, `b` is given back (to the pool, or freed) and so are the bytes.
  Buffer* p = b.get();
  return std::shared_ptr<Buffer>(p, [state, b = std::move(b), bytes](Buffer*) mutable {
    b.reset();
    state->held -= bytes;
  });
}

}  // namespace tl
