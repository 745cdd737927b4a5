// The device interface. Adding an accelerator means implementing this class
// (facts, buffers, a renderer dialect, a compiler and a launcher), nothing more.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../codegen/dialect.h"
#include "../error.h"

namespace tl {

struct DeviceInfo {
  std::string name;         // registry name: "cpu", "opencl:0:0", "ane"
  std::string kind;         // "CPU", "GPU", "Accelerator"
  std::string description;  // human name: "NVIDIA H200", "pthread-Intel(R) Xeon(R)"
  std::string vendor, platform, driver_version, language_version;
  int compute_units = 0;
  int clock_mhz = 0;
  uint64_t global_memory = 0, local_memory = 0;
  size_t max_work_group = 1;
  bool fp16 = false, fp64 = false;
  std::vector<std::string> extensions;
  bool available = true;
  std::string unavailable_reason;  // set when !available
};

class Device;

// Device memory. Row-major storage of `bytes` bytes.
class Buffer {
 public:
  Buffer(Device* device, size_t bytes) : device_(device), bytes_(bytes) {}
  virtual ~Buffer() = default;
  Device* device() const { return device_; }
  size_t bytes() const { return bytes_; }

 private:
  Device* device_;
  size_t bytes_;
};

struct LaunchArgs {
  std::vector<Buffer*> buffers;  // in the kernel's parameter order
  int64_t global[3] = {1, 1, 1};
  int64_t local[3] = {0, 0, 0};  // 0 = let the device choose
};

// A compiled kernel.
class Program {
 public:
  virtual ~Program() = default;
  // Runs the kernel and returns its device time in seconds.
  virtual double launch(const LaunchArgs& args) = 0;
  // Queues the kernel on the device's in-order queue and returns without
  // waiting. By the time Device::finish() returns on this thread, the kernel
  // has run and *seconds holds its device time; `seconds` must stay valid
  // until then. The buffers in `args` must stay alive until finish() too.
  // The default runs it now through launch(): a device without a queue
  // needs nothing more.
  virtual void enqueue(const LaunchArgs& args, double* seconds) { *seconds = launch(args); }
  std::string build_log;  // compiler output, kept even on success
  bool cache_hit = false;  // came from the on-disk cache
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  const std::string& name() const { return info().name; }
  bool available() const { return info().available; }

  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual void copy_in(Buffer& dst, const void* src, size_t bytes) = 0;
  virtual void copy_out(const Buffer& src, void* dst, size_t bytes) = 0;

  virtual const Dialect& dialect() const = 0;
  // Compiles one kernel. Throws CompileError carrying source and log.
  virtual std::shared_ptr<Program> compile(const std::string& kernel_name, const std::string& source) = 0;

  // Waits for every kernel this thread enqueued (Program::enqueue) and fills
  // their times; throws DeviceError if one failed (after waiting for all).
  // A realize calls it once, after its last enqueue, and also on its error
  // paths. The default does nothing: the default enqueue already waited.
  virtual void finish() {}
};

}  // namespace tl
