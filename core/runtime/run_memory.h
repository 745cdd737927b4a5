// A bound on the device memory one run holds at once, checked as its buffers
// are made. The run budget (core/io/limits.h) is checked before a run from an
// estimate, which cannot see past a shape that depends on computed values,
// nor the buffers a realize keeps for reuse; this is the guard behind it.
//
// While a RunMemory lives, every Device::acquire on its thread is charged to
// it: a buffer that would take the bytes held past the limit is refused
// (IOError, worded by the creator) before it is allocated, and a buffer given
// back returns its bytes, also after the scope has ended. A scope made while
// another lives on the thread is inert: the outer one bounds both.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tl {

class Buffer;

class RunMemory {
 public:
  // describe(held, asked, limit): the error's text when a buffer of `asked`
  // bytes would take `held` past `limit`; called only while the scope lives.
  using Describe = std::function<std::string(uint64_t held, uint64_t asked, uint64_t limit)>;
  RunMemory(uint64_t limit, Describe describe);
  ~RunMemory();
  RunMemory(const RunMemory&) = delete;
  RunMemory& operator=(const RunMemory&) = delete;

  bool bounding() const { return state_ != nullptr; }  // false when inert
  // The most bytes held at once since the scope began (0 when inert).
  uint64_t peak_bytes() const;

  // For Device::acquire: charges the calling thread's scope, if any, with a
  // buffer of `bytes` made by `make`, or throws before calling it.
  static std::shared_ptr<Buffer> charge(size_t bytes, const std::function<std::shared_ptr<Buffer>()>& make);

 private:
  struct State {
    uint64_t limit = 0;
    Describe describe;
    std::atomic<uint64_t> held{0}, peak{0};
  };
  std::shared_ptr<State> state_;
};

}  // namespace tl
