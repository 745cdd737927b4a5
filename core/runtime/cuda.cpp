// The CUDA device: kernels compiled at run time by NVRTC to a cubin for the
// GPU's architecture, loaded and launched through the CUDA driver API, timed
// with CUDA events. libcuda.so.1 and libnvrtc.so are opened with dlopen when
// the devices are enumerated, so the build needs only the toolkit's headers;
// on a machine without a driver "cuda:0" is listed as unavailable with why.
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <map>
#include <mutex>
#include <thread>

#include "core/runtime/cuda_dialect.h"
#include "core/runtime/registry.h"

namespace tl {

namespace {

// ---- the two libraries, resolved once ----

#define TL_STR2(x) #x
#define TL_STR(x) TL_STR2(x)  // expands cuda.h's renames first: cuMemAlloc -> "cuMemAlloc_v2"
#define TL_CU_FUNCS(X)                                                                                         \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceTotalMem)  \
  X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuMemAlloc) X(cuMemFree)          \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoH) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleGetFunction)       \
  X(cuModuleUnload) X(cuLaunchKernel) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)                 \
  X(cuEventElapsedTime) X(cuEventDestroy) X(cuGetErrorName)
#define TL_NVRTC_FUNCS(X)                                                                                      \
  X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcDestroyProgram)               \
  X(nvrtcGetErrorString)

struct Api {
#define TL_DECLARE(f) decltype(&::f) f = nullptr;
  TL_CU_FUNCS(TL_DECLARE)
  TL_NVRTC_FUNCS(TL_DECLARE)
#undef TL_DECLARE
  std::string cuda_missing, nvrtc_missing;  // why a library is not usable; "" when it is

  static const Api& get() {
    static const Api api;
    return api;
  }

 private:
  Api() {
    void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu) cuda_missing = "libcuda.so.1 not found: no NVIDIA driver";
    void* rtc = nullptr;
    for (const char* lib : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
      if (!rtc) rtc = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!rtc) nvrtc_missing = "libnvrtc.so not found: install the CUDA toolkit's NVRTC";
    auto resolve = [](void* lib, const char* symbol, std::string& missing) -> void* {
      void* p = lib ? dlsym(lib, symbol) : nullptr;
      if (lib && !p && missing.empty()) missing = std::string(symbol) + " missing from the library: too old a driver";
      return p;
    };
#define TL_RESOLVE_CU(f) f = reinterpret_cast<decltype(f)>(resolve(cu, TL_STR(f), cuda_missing));
#define TL_RESOLVE_RTC(f) f = reinterpret_cast<decltype(f)>(resolve(rtc, TL_STR(f), nvrtc_missing));
    TL_CU_FUNCS(TL_RESOLVE_CU)
    TL_NVRTC_FUNCS(TL_RESOLVE_RTC)
#undef TL_RESOLVE_CU
#undef TL_RESOLVE_RTC
  }
};

std::string cu_error(CUresult r) {
  const char* name = nullptr;
  const Api& api = Api::get();
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  return name ? name : "CUDA error " + std::to_string(int(r));
}

// What every buffer and program of one device shares; outlives the Device.
struct State {
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::string arch;  // "sm_90"
  DeviceInfo info;
  std::mutex mutex;  // guards info.available / unavailable_reason

  std::string label() const { return info.name + " (" + info.description + ")"; }
  void ensure_available() {
    std::lock_guard lock(mutex);
    if (!info.available) throw DeviceError(info.name + " is unavailable: " + info.unavailable_reason);
  }
  // Errors after which the context is gone (a kernel that faulted): the
  // device then reports itself unavailable rather than fail every call.
  void check(CUresult r, const char* call, const std::string& what = "") {
    if (r == CUDA_SUCCESS) return;
    std::string message = label() + ": " + call + " returned " + cu_error(r) + (what.empty() ? "" : " " + what);
    if (r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
        r == CUDA_ERROR_MISALIGNED_ADDRESS || r == CUDA_ERROR_HARDWARE_STACK_ERROR || r == CUDA_ERROR_ECC_UNCORRECTABLE) {
      std::lock_guard lock(mutex);
      if (info.available) info.available = false, info.unavailable_reason = message;
    }
    throw DeviceError(message);
  }
  // The driver keeps a current context per thread; compiles and launches
  // arrive on worker threads too.
  void bind() { check(Api::get().cuCtxSetCurrent(context), "cuCtxSetCurrent"); }

  // Launches queued on the default stream and not yet waited for, per
  // enqueuing thread, each between two events when it is timed (events are
  // reused); an untimed launch has none, and a run of them keeps only the
  // last (to name it in an error): a realize that times nothing does not
  // wait (realize_may_return_early), so its launches must not pile up.
  struct Pending { CUevent start, stop; double* seconds; std::string kernel; };
  std::mutex queue_mutex;  // guards pending and spare
  std::map<std::thread::id, std::vector<Pending>> pending;
  std::vector<CUevent> spare;

  CUevent event() {
    std::lock_guard lock(queue_mutex);
    CUevent e = nullptr;
    if (spare.empty()) check(Api::get().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    else e = spare.back(), spare.pop_back();
    return e;
  }
  // One wait on this thread's last launch (the stream is in order), then
  // every launch's time; the first failure is thrown after all are read.
  void finish_thread() {
    std::vector<Pending> mine;
    {
      std::lock_guard lock(queue_mutex);
      auto it = pending.find(std::this_thread::get_id());
      if (it == pending.end()) return;
      mine = std::move(it->second);
      pending.erase(it);
    }
    const Api& api = Api::get();
    std::string kernel = mine.back().kernel;
    CUresult failed = CUDA_SUCCESS;
    if (mine.back().stop) {
      failed = api.cuEventSynchronize(mine.back().stop);
    } else {  // the last launch was untimed: an event after it to wait on
      CUevent after = event();
      failed = api.cuEventRecord(after, nullptr);
      if (failed == CUDA_SUCCESS) failed = api.cuEventSynchronize(after);
      std::lock_guard lock(queue_mutex);
      spare.push_back(after);
    }
    for (auto& p : mine) {
      if (!p.stop) continue;
      float ms = 0;
      CUresult r = api.cuEventElapsedTime(&ms, p.start, p.stop);
      if (r != CUDA_SUCCESS && failed == CUDA_SUCCESS) failed = r, kernel = p.kernel;
      *p.seconds = double(ms) * 1e-3;
      std::lock_guard lock(queue_mutex);
      spare.push_back(p.start), spare.push_back(p.stop);
    }
    check(failed, "cuEventSynchronize", "(kernel '" + kernel + "')");
  }
  ~State() {
    if (!context || Api::get().cuCtxSetCurrent(context) != CUDA_SUCCESS) return;
    for (CUevent e : spare) Api::get().cuEventDestroy(e);
  }
};

class CudaBuffer : public Buffer {
 public:
  CudaBuffer(Device* d, size_t bytes, std::shared_ptr<State> state) : Buffer(d, bytes), state(std::move(state)) {
    this->state->bind();
    this->state->check(Api::get().cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)), "cuMemAlloc",
                       "(" + std::to_string(bytes) + " bytes)");
  }
  // A kernel still queued may use the memory (a realize need not wait):
  // the stream drains first, as cuMemFree does not promise to.
  ~CudaBuffer() override {
    if (ptr && Api::get().cuCtxSetCurrent(state->context) == CUDA_SUCCESS) {
      Api::get().cuCtxSynchronize();
      Api::get().cuMemFree(ptr);
    }
  }
  std::shared_ptr<State> state;
  CUdeviceptr ptr = 0;
};

class CudaProgram : public Program {
 public:
  CudaProgram(std::shared_ptr<State> state, std::string name, CUmodule module, CUfunction fn)
      : state_(std::move(state)), name_(std::move(name)), module_(module), fn_(fn) {}
  ~CudaProgram() override {
    if (Api::get().cuCtxSetCurrent(state_->context) == CUDA_SUCCESS) Api::get().cuModuleUnload(module_);
  }

  double launch(const LaunchArgs& args) override {
    double seconds = 0;
    enqueue(args, &seconds);
    state_->finish_thread();
    return seconds;
  }

  void enqueue(const LaunchArgs& args, double* seconds) override {
    const Api& api = Api::get();
    if (seconds) *seconds = 0;
    if (!args.ints.empty()) throw std::logic_error("a CUDA kernel here takes no integer arguments");
    state_->ensure_available();
    state_->bind();
    // Reused per thread: a training step launches 166 kernels, and two
    // allocations each showed in its host time.
    static thread_local std::vector<CUdeviceptr> ptrs;
    static thread_local std::vector<void*> params;
    ptrs.clear(), params.clear();
    for (size_t i = 0; i < args.buffers.size(); ++i) {
      auto* b = dynamic_cast<const CudaBuffer*>(args.buffers[i]);
      if (!b || b->state != state_)
        throw DeviceError(state_->label() + ": buffer " + std::to_string(i) + " of kernel '" + name_ +
                          "' does not belong to this device");
      ptrs.push_back(b->ptr);
    }
    for (auto& p : ptrs) params.push_back(&p);
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
    for (int d = 0; d < 3; ++d) {
      if (args.global[d] <= 0) return;  // nothing to compute
      int64_t local = args.local[d] > 0 ? args.local[d] : d == 0 ? std::min<int64_t>(256, args.global[0]) : 1;
      block[d] = unsigned(local);
      grid[d] = unsigned((args.global[d] + local - 1) / local);
    }
    State::Pending p{nullptr, nullptr, seconds, name_};
    if (seconds) p.start = state_->event(), p.stop = state_->event();
    CUresult r = CUDA_SUCCESS;
    {
      // Queued under the lock, so this thread's launches sit in `pending` in
      // the order the stream runs them.
      std::lock_guard lock(state_->queue_mutex);
      if (p.start) r = api.cuEventRecord(p.start, nullptr);
      if (r == CUDA_SUCCESS)
        r = api.cuLaunchKernel(fn_, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, nullptr,
                               params.data(), nullptr);
      if (r == CUDA_SUCCESS && p.stop) r = api.cuEventRecord(p.stop, nullptr);
      if (r == CUDA_SUCCESS) {
        auto& mine = state_->pending[std::this_thread::get_id()];
        if (!p.start && !mine.empty() && !mine.back().start) mine.back() = std::move(p);
        else mine.push_back(std::move(p));
      } else if (p.start) {
        state_->spare.push_back(p.start), state_->spare.push_back(p.stop);
      }
    }
    if (r != CUDA_SUCCESS) state_->check(r, "cuLaunchKernel", "(kernel '" + name_ + "')");
  }

 private:
  std::shared_ptr<State> state_;
  std::string name_;
  CUmodule module_;
  CUfunction fn_;
};

class CudaDevice : public Device {
 public:
  // An unavailable device: only its name and the reason.
  CudaDevice(int index, const std::string& reason) : state_(std::make_shared<State>()) {
    describe(index);
    state_->info.available = false;
    state_->info.unavailable_reason = reason;
  }

  CudaDevice(int index, CUdevice device) : state_(std::make_shared<State>()) {
    const Api& api = Api::get();
    State& s = *state_;
    describe(index);
    s.device = device;
    char name[256] = {0};
    api.cuDeviceGetName(name, sizeof name, device);
    s.info.description = name;
    auto attribute = [&](CUdevice_attribute a) {
      int v = 0;
      api.cuDeviceGetAttribute(&v, a, device);
      return v;
    };
    int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    s.arch = "sm_" + std::to_string(major * 10 + minor);
    // TF32 mma.sync (Ampere on): kernels/gemm.cu's tensor-core form.
    if (major >= 8) s.info.extensions.push_back("mma_tf32");
    s.info.compute_units = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    s.info.clock_mhz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000;
    s.info.local_memory = uint64_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
    s.info.max_work_group = size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    size_t total = 0;
    api.cuDeviceTotalMem(&total, device);
    s.info.global_memory = total;
    int driver = 0, rtc_major = 0, rtc_minor = 0;
    api.cuDriverGetVersion(&driver);
    api.nvrtcVersion(&rtc_major, &rtc_minor);
    s.info.driver_version = "CUDA driver " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) +
                            ", NVRTC " + std::to_string(rtc_major) + "." + std::to_string(rtc_minor);
    s.info.language_version = "CUDA C++ for " + s.arch;
    CUresult r = api.cuDevicePrimaryCtxRetain(&s.context, device);
    if (r != CUDA_SUCCESS) {
      s.info.available = false;
      s.info.unavailable_reason = "cuDevicePrimaryCtxRetain returned " + cu_error(r);
    }
  }

  const DeviceInfo& info() const override { return state_->info; }
  const Dialect& dialect() const override { return cuda_dialect(); }

  std::shared_ptr<Buffer> allocate(size_t bytes) override {
    state_->ensure_available();
    return std::make_shared<CudaBuffer>(this, bytes, state_);
  }
  void copy_in(Buffer& dst, const void* src, size_t bytes) override {
    auto& b = own(dst, bytes, "copy_in");
    // Queued behind the kernels on the default stream, so it may overwrite a
    // pooled buffer a queued kernel still reads. From pageable memory the
    // driver stages `src` before it returns, and does not wait for them.
    if (bytes) state_->check(Api::get().cuMemcpyHtoDAsync(b.ptr, src, bytes, nullptr), "cuMemcpyHtoDAsync");
  }
  void copy_out(const Buffer& src, void* dst, size_t bytes) override {
    auto& b = own(src, bytes, "copy_out");
    if (bytes) state_->check(Api::get().cuMemcpyDtoH(dst, b.ptr, bytes), "cuMemcpyDtoH");
  }

  // -fmad=false: the scheduler recomputes fused values in more than one
  // kernel, and both copies must round the same way (as -ffp-contract=off on
  // the CPU device).
  std::string build_options() const override { return "--gpu-architecture=" + arch() + " --fmad=false"; }

  void finish() override { state_->finish_thread(); }
  // One in-order stream that copies join, and frees that drain it first.
  bool realize_may_return_early() const override { return true; }

  // source -> a cubin for this GPU (PTX for compute_75 where there is no GPU,
  // so that NVRTC can still check kernels on a machine without a driver).
  Built build(const std::string& name, const std::string& source) override {
    const Api& api = Api::get();
    if (!api.nvrtc_missing.empty()) throw DeviceError(state_->info.name + ": " + api.nvrtc_missing);
    nvrtcProgram prog = nullptr;
    nvrtcResult r = api.nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
    if (r != NVRTC_SUCCESS) throw DeviceError(state_->label() + ": nvrtcCreateProgram: " + api.nvrtcGetErrorString(r));
    std::string arch_option = "--gpu-architecture=" + arch();
    const char* options[] = {arch_option.c_str(), "--fmad=false"};
    r = api.nvrtcCompileProgram(prog, 2, options);
    Built built;
    size_t size = 0;
    if (api.nvrtcGetProgramLogSize(prog, &size) == NVRTC_SUCCESS && size > 1) {
      built.log.resize(size);
      api.nvrtcGetProgramLog(prog, built.log.data());
      while (!built.log.empty() && (built.log.back() == '\0' || built.log.back() == '\n')) built.log.pop_back();
    }
    if (r != NVRTC_SUCCESS) {
      api.nvrtcDestroyProgram(&prog);
      throw CompileError(state_->info.name + ": NVRTC could not compile kernel '" + name + "': " +
                             api.nvrtcGetErrorString(r) + (built.log.empty() ? "" : "\n" + built.log),
                         source, built.log);
    }
    const bool cubin = arch().rfind("sm_", 0) == 0;
    if ((cubin ? api.nvrtcGetCUBINSize(prog, &size) : api.nvrtcGetPTXSize(prog, &size)) == NVRTC_SUCCESS) {
      built.binary.resize(size);
      cubin ? api.nvrtcGetCUBIN(prog, built.binary.data()) : api.nvrtcGetPTX(prog, built.binary.data());
    }
    api.nvrtcDestroyProgram(&prog);
    if (built.binary.empty()) throw DeviceError(state_->label() + ": NVRTC returned no code for kernel '" + name + "'");
    return built;
  }

  std::shared_ptr<Program> load(const std::string& name, const std::string& binary) override {
    const Api& api = Api::get();
    state_->ensure_available();
    state_->bind();
    CUmodule module = nullptr;
    state_->check(api.cuModuleLoadData(&module, binary.data()), "cuModuleLoadData", "(kernel '" + name + "')");
    CUfunction fn = nullptr;
    CUresult r = api.cuModuleGetFunction(&fn, module, name.c_str());
    if (r != CUDA_SUCCESS) {
      api.cuModuleUnload(module);
      state_->check(r, "cuModuleGetFunction", "(kernel '" + name + "')");
    }
    return std::make_shared<CudaProgram>(state_, name, module, fn);
  }

 private:
  void describe(int index) {
    DeviceInfo& i = state_->info;
    i.name = "cuda:" + std::to_string(index);
    i.kind = "GPU";
    i.description = "NVIDIA GPU";
    i.vendor = "NVIDIA";
    i.platform = "CUDA driver API + NVRTC";
    i.fp16 = i.fp64 = true;
    i.preferred_vector_width = 4;
    i.gemm_template = "gemm.cu";
  }
  std::string arch() const { return state_->arch.empty() ? "compute_75" : state_->arch; }

  const CudaBuffer& own(const Buffer& b, size_t bytes, const char* what) {
    state_->ensure_available();
    state_->bind();
    auto* cb = dynamic_cast<const CudaBuffer*>(&b);
    if (!cb || cb->state != state_) throw DeviceError(state_->label() + ": " + what + " with a buffer of another device");
    if (bytes > b.bytes())
      throw DeviceError(state_->label() + ": " + what + " of " + std::to_string(bytes) + " bytes on a buffer of " +
                        std::to_string(b.bytes()) + " bytes");
    return *cb;
  }

  std::shared_ptr<State> state_;
};

std::vector<std::shared_ptr<Device>> enumerate_cuda_devices() {
  const Api& api = Api::get();
  std::string missing = !api.cuda_missing.empty() ? api.cuda_missing : api.nvrtc_missing;
  if (!missing.empty()) return {std::make_shared<CudaDevice>(0, missing)};
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS)
    return {std::make_shared<CudaDevice>(0, "cuInit returned " + cu_error(r) + ": the driver sees no usable GPU")};
  int count = 0;
  api.cuDeviceGetCount(&count);
  if (count == 0) return {std::make_shared<CudaDevice>(0, "the NVIDIA driver reports no GPU")};
  std::vector<std::shared_ptr<Device>> out;
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    if (CUresult r = api.cuDeviceGet(&device, i); r != CUDA_SUCCESS)
      out.push_back(std::make_shared<CudaDevice>(i, "cuDeviceGet returned " + cu_error(r)));
    else
      out.push_back(std::make_shared<CudaDevice>(i, device));
  }
  return out;
}

DeviceRegistrar registrar("cuda", 20, enumerate_cuda_devices);

}  // namespace

}  // namespace tl
