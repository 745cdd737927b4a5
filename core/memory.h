// Memory of a run, from its kernel records (ProfileRecord::buffers): each
// value a kernel wrote, the buffer it lived in, its size, its writer and
// readers, its lifetime in launches, which buffers served several values
// (run_plan's reuse), and the memory live at each launch with its peak.
//
// A value lives from its first write to its last read; a kept value (a
// result, or one a gradient flows through) to the end of the run. A buffer
// written again after its value was read holds a new value: that is reuse.
// Pieces of a concatenation assembled in place write one value together.
// Buffers the run only reads (weights, the input) are counted apart: they
// live the whole run, and are not what a schedule changes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/profile.h"

namespace tl {

struct MemoryValue {
  uint64_t buffer = 0;
  size_t bytes = 0;         // of the buffer it lives in: what it holds while live
  size_t value_bytes = 0;   // of the value itself (a reused buffer may be larger)
  std::string device;
  std::vector<size_t> writers, readers;  // record indices
  size_t first = 0, last = 0;            // launches it is live at, inclusive
  bool kept = false;
  int tenant = 0;  // 0: the first value in its buffer this run; 1, 2...: reuse
};

struct MemoryProfile {
  std::vector<MemoryValue> values;
  std::vector<size_t> live_bytes;  // per record: bytes of the values live at that launch
  size_t peak_bytes = 0, peak_launch = 0;
  size_t buffers = 0, buffer_bytes = 0;  // distinct buffers written, and their bytes
  size_t reused_buffers = 0;             // of those, ones that held more than one value
  size_t input_buffers = 0, input_bytes = 0;  // only read: weights and inputs
};
MemoryProfile memory_profile(const std::vector<ProfileRecord>& records);

// The --memory print: the summary, the live memory per launch as a bar, and
// one line per value (size, writer, readers, lifetime, reuse).
std::string format_memory(const MemoryProfile& m, const std::vector<ProfileRecord>& records);

}  // namespace tl
