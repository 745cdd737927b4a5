// The device interface. Adding an accelerator means one file that implements
// this class and registers it (registry.h), plus its dialect table;
// core/runtime/README.md ("Adding a device") lists what that file writes.
// The slots, in order:
//   info()              facts and capabilities; when the device cannot run here,
//                       available = false and unavailable_reason says why in
//                       words a user can act on ("libcuda.so.1 not found: ...").
//                       Enumeration never throws for a missing driver.
//   allocate/copy_in/   device memory; buffers and programs must stay valid
//   copy_out            after the Device object is gone (share a State).
//   dialect()           the spelling table the renderer reads (core/dialect.h).
//   build()             source -> binary + build log; CompileError on bad source.
//   load()              binary -> Program; DeviceError when the binary is unusable.
//   build_options()     whatever else changes the binary (flags, target arch).
//   build_together()    optional: several kernels -> one binary, one compiler
//   load_together()     run (builds_together() says the device has them).
// Program::launch runs one kernel and returns its device time. Errors after
// which the device cannot be trusted retire it (available = false) instead of
// failing every later call. Caching, scheduling and rendering are shared.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "core/error.h"
#include "core/runtime/buffer_pool.h"

namespace tl {

struct DeviceInfo {
  std::string name;         // registry name: "cpu", "opencl:0:0", "cuda:0", "ane"
  std::string kind;         // "CPU", "GPU", "Accelerator"
  std::string description;  // human name: "NVIDIA H200", "pthread-Intel(R) Xeon(R)"
  std::string vendor, platform, driver_version, language_version;
  int compute_units = 0;
  int clock_mhz = 0;
  uint64_t global_memory = 0, local_memory = 0;
  size_t max_work_group = 1;
  bool fp16 = false, fp64 = false;
  // Capabilities that codegen and realize read (never the device's name).
  std::string gemm_template;       // kernels/ file of its GEMM template ("gemm.cl"); "" = generic kernels only
  int preferred_vector_width = 1;  // floats per vector load the device likes (1 = scalar)
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

  // A buffer derived from this one's contents under `key` (a GEMM's copy of
  // a weight matrix in its micro-kernel's layout), made by `make` on first
  // use and kept as long as this buffer. Sound because a buffer's contents
  // never change while a node has it: every kernel writes a new one, and a
  // buffer released to the pool (buffer_pool.h) forgets what was derived
  // before it is handed out again.
  std::shared_ptr<Buffer> derived(const std::string& key, const std::function<std::shared_ptr<Buffer>()>& make) {
    std::lock_guard lock(derived_mutex_);
    auto& slot = derived_[key];
    if (!slot) slot = make();
    return slot;
  }
  void forget_derived() {
    std::lock_guard lock(derived_mutex_);
    derived_.clear();
  }

 private:
  Device* device_;
  size_t bytes_;
  std::mutex derived_mutex_;
  std::map<std::string, std::shared_ptr<Buffer>> derived_;
};

struct LaunchArgs {
  std::vector<Buffer*> buffers;  // in the kernel's parameter order
  // Integer arguments after the buffers, each `int_bytes` wide (4: int, 8:
  // long) as the kernel declares them: the sizes of a template sized at run
  // time (kernels/gemm.cl). Only an OpenCL program takes them.
  std::vector<int64_t> ints;
  int int_bytes = 4;
  int64_t global[3] = {1, 1, 1};
  // 0 = let the device choose. The C device reads local[0] > 0 as the
  // kernel's leave to have its threads share global[0]'s units a piece of
  // local[0] at a time (ThreadPool::parallel_for's grain).
  int64_t local[3] = {0, 0, 0};
};

// A compiled kernel. launch() may be called from any thread (lock what the
// launch mutates); a launch with an empty range does nothing and returns 0.
class Program {
 public:
  virtual ~Program() = default;
  // Runs the kernel and returns its device time in seconds.
  virtual double launch(const LaunchArgs& args) = 0;
  // Queues the kernel on the device's in-order queue and returns without
  // waiting. By the time Device::finish() returns on this thread, the kernel
  // has run and *seconds holds its device time; `seconds` must stay valid
  // until then. A null `seconds` asks for no time: the device may then skip
  // its timing events. The buffers in `args` must stay alive until finish()
  // too. The default runs it now through launch(): a device without a queue
  // needs nothing more.
  virtual void enqueue(const LaunchArgs& args, double* seconds) {
    const double s = launch(args);
    if (seconds) *seconds = s;
  }
  std::string build_log;  // compiler output, kept even on success
  bool cache_hit = false;  // came from the on-disk cache
  // Built by a realize on a device that finishes builds at first launch
  // (Device::builds_at_first_launch) and not launched yet: compile progress
  // counts it when it is (core/progress.h, CompileProgress).
  std::atomic<bool> awaits_first_launch{false};
};

// What a device's compiler produced for one kernel.
struct Built {
  std::string binary;                // what the disk cache stores (a .so, a CL binary, PTX)
  std::string log;                   // the compiler's output, kept even on success
  std::shared_ptr<Program> program;  // optional: the program already loaded, saves a load()
};

// One kernel of a batch: its name (unique in the batch) and its source.
struct KernelSource {
  std::string name, source;
};

// What a device's compiler produced for several kernels built together.
struct BuiltTogether {
  std::string binary;                                 // one cache entry for them all
  std::string log;                                    // the one build's output
  std::vector<std::shared_ptr<Program>> programs;     // optional: loaded, in the kernels' order
};

class Device {
 public:
  virtual ~Device() = default;
  // Slot: facts. name is the registry name ("cpu", "opencl:0:0", "cuda:0");
  // available/unavailable_reason say whether it can run here and why not;
  // the capability fields (gemm_template, local_memory, fp16/fp64,
  // preferred_vector_width) are what codegen and realize read.
  virtual const DeviceInfo& info() const = 0;
  const std::string& name() const { return info().name; }
  bool available() const { return info().available; }

  // Slot: memory. Buffers stay valid after the Device object is gone.
  virtual std::shared_ptr<Buffer> allocate(size_t bytes) = 0;
  virtual void copy_in(Buffer& dst, const void* src, size_t bytes) = 0;
  virtual void copy_out(const Buffer& src, void* dst, size_t bytes) = 0;
  // Optional slot: bytes [offset, offset + bytes) of `whole` as a buffer of
  // their own, which keeps `whole` alive; a kernel that writes it writes
  // that part of `whole`. A concatenation's inputs are computed straight
  // into its buffer this way (core/assemble.h). nullptr: the device has
  // none, and says so with makes_views().
  virtual std::shared_ptr<Buffer> view(const std::shared_ptr<Buffer>& whole, size_t offset, size_t bytes) {
    (void)whole, (void)offset, (void)bytes;
    return nullptr;
  }
  virtual bool makes_views() const { return false; }

  // Slot: the language. The renderer spells every kernel with this table.
  virtual const Dialect& dialect() const = 0;

  // Slot: source -> binary. Compiles one kernel named `kernel_name`. Throws
  // CompileError(message, source, log) when the source does not compile, and
  // DeviceError when the device cannot compile at all.
  virtual Built build(const std::string& kernel_name, const std::string& source) = 0;
  // Slot: binary -> program. Loads what build() returned (maybe from the disk
  // cache, in another process). Throws DeviceError when the binary is not
  // usable; a cached binary is then built again from source.
  virtual std::shared_ptr<Program> load(const std::string& kernel_name, const std::string& binary) = 0;
  // Everything besides the source, the device description and the driver
  // version that changes the binary (compiler flags): part of the cache key.
  virtual std::string build_options() const { return ""; }
  // Optional slot: the driver keeps its own on-disk cache of what it built
  // (PoCL does), and build() then returns no binary, because asking for one
  // makes such a driver compile every kernel a second time. The disk cache
  // then records only that the source was built, with its log; a warm run
  // builds from source again, which the driver answers from its own cache.
  virtual bool driver_keeps_binaries() const { return false; }
  // Optional slot: the driver finishes a kernel's build when it first
  // launches it, not in build() (PoCL compiles each kernel's work-group
  // function then; issue 45: its build() returned in 1 s of
  // EfficientNet-Lite0's 10 cold seconds). Compile progress then counts a new
  // kernel when its first launch has returned.
  virtual bool builds_at_first_launch() const { return false; }

  // Optional slot: many kernels -> one binary in one compiler run (one
  // OpenCL program, one shared library). A first run compiles dozens of
  // kernels, and a compiler's fixed cost per run dominates small ones.
  // Names are unique in `kernels`. build_together throws CompileError like
  // build() (the caller then builds each kernel alone to name the broken
  // one); load_together returns one Program per kernel, in order. A device
  // that leaves builds_together() false is compiled kernel by kernel.
  virtual bool builds_together() const { return false; }
  virtual BuiltTogether build_together(const std::vector<KernelSource>& kernels);
  virtual std::vector<std::shared_ptr<Program>> load_together(const std::vector<KernelSource>& kernels,
                                                              const std::string& binary);

  // Shared by every device (runtime/cache.cpp): looks the kernel up in the
  // disk cache by hash(source, build_options, device, driver, format
  // version), else build()s it and stores the binary; then load()s it.
  std::shared_ptr<Program> compile(const std::string& kernel_name, const std::string& source);
  // The disk-cache half of compile(): the cached program, or nullptr.
  std::shared_ptr<Program> find_cached(const std::string& kernel_name, const std::string& source);
  // compile() for a batch, through build_together/load_together: one cache
  // entry keyed by all the sources together. Returns one Program per kernel.
  std::vector<std::shared_ptr<Program>> compile_together(const std::vector<KernelSource>& kernels);

  // Waits for every kernel this thread enqueued (Program::enqueue) and fills
  // their times; throws DeviceError if one failed (after waiting for all).
  // A realize calls it once, after its last enqueue, and also on its error
  // paths. The default does nothing: the default enqueue already waited.
  virtual void finish() {}
  // Optional slot: a realize that times nothing may return with its kernels
  // still queued. Only for a device whose every later launch, copy_in,
  // copy_out and free waits for them by itself (one in-order queue that
  // copies join, frees that wait for it); the next read then waits, and
  // reports a kernel's failure. The host builds the next step's graph while
  // the device runs this one (Trainer::train_epoch).
  virtual bool realize_may_return_early() const { return false; }

  // Shared by every device: a buffer for a realize's inputs and results,
  // reused from the ones released earlier when one of that size is free
  // (buffer_pool.h), else allocate()d. A GPU keeps up to a quarter of its
  // memory; a device in host memory an eighth, at most 1 GiB.
  std::shared_ptr<Buffer> acquire(size_t bytes);
  // Frees the buffers kept for reuse (the window calls it when a model is
  // closed: its weights' buffers went back to the pool).
  void release_pooled();

 private:
  std::mutex pool_mutex_;
  std::unique_ptr<BufferPool> pool_;  // made on first use: its size needs info()
};

}  // namespace tl
