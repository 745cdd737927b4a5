// The OpenCL device. One Device per (platform, device) pair of the ICD loader.
// The CL handles live in a shared State so that buffers and programs handed
// out stay valid even when the Device object that made them is gone.
#include "core/runtime/opencl.h"

#include <CL/cl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/runtime/registry.h"
#include "core/runtime/together.h"

namespace tl {

std::string cl_error_name(int code) {
  static const struct {
    int code;
    const char* name;
  } names[] = {
      {0, "CL_SUCCESS"},
      {-1, "CL_DEVICE_NOT_FOUND"},
      {-2, "CL_DEVICE_NOT_AVAILABLE"},
      {-3, "CL_COMPILER_NOT_AVAILABLE"},
      {-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
      {-5, "CL_OUT_OF_RESOURCES"},
      {-6, "CL_OUT_OF_HOST_MEMORY"},
      {-7, "CL_PROFILING_INFO_NOT_AVAILABLE"},
      {-8, "CL_MEM_COPY_OVERLAP"},
      {-9, "CL_IMAGE_FORMAT_MISMATCH"},
      {-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
      {-11, "CL_BUILD_PROGRAM_FAILURE"},
      {-12, "CL_MAP_FAILURE"},
      {-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
      {-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
      {-15, "CL_COMPILE_PROGRAM_FAILURE"},
      {-16, "CL_LINKER_NOT_AVAILABLE"},
      {-17, "CL_LINK_PROGRAM_FAILURE"},
      {-18, "CL_DEVICE_PARTITION_FAILED"},
      {-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
      {-30, "CL_INVALID_VALUE"},
      {-31, "CL_INVALID_DEVICE_TYPE"},
      {-32, "CL_INVALID_PLATFORM"},
      {-33, "CL_INVALID_DEVICE"},
      {-34, "CL_INVALID_CONTEXT"},
      {-35, "CL_INVALID_QUEUE_PROPERTIES"},
      {-36, "CL_INVALID_COMMAND_QUEUE"},
      {-37, "CL_INVALID_HOST_PTR"},
      {-38, "CL_INVALID_MEM_OBJECT"},
      {-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
      {-40, "CL_INVALID_IMAGE_SIZE"},
      {-41, "CL_INVALID_SAMPLER"},
      {-42, "CL_INVALID_BINARY"},
      {-43, "CL_INVALID_BUILD_OPTIONS"},
      {-44, "CL_INVALID_PROGRAM"},
      {-45, "CL_INVALID_PROGRAM_EXECUTABLE"},
      {-46, "CL_INVALID_KERNEL_NAME"},
      {-47, "CL_INVALID_KERNEL_DEFINITION"},
      {-48, "CL_INVALID_KERNEL"},
      {-49, "CL_INVALID_ARG_INDEX"},
      {-50, "CL_INVALID_ARG_VALUE"},
      {-51, "CL_INVALID_ARG_SIZE"},
      {-52, "CL_INVALID_KERNEL_ARGS"},
      {-53, "CL_INVALID_WORK_DIMENSION"},
      {-54, "CL_INVALID_WORK_GROUP_SIZE"},
      {-55, "CL_INVALID_WORK_ITEM_SIZE"},
      {-56, "CL_INVALID_GLOBAL_OFFSET"},
      {-57, "CL_INVALID_EVENT_WAIT_LIST"},
      {-58, "CL_INVALID_EVENT"},
      {-59, "CL_INVALID_OPERATION"},
      {-60, "CL_INVALID_GL_OBJECT"},
      {-61, "CL_INVALID_BUFFER_SIZE"},
      {-62, "CL_INVALID_MIP_LEVEL"},
      {-63, "CL_INVALID_GLOBAL_WORK_SIZE"},
      {-64, "CL_INVALID_PROPERTY"},
      {-65, "CL_INVALID_IMAGE_DESCRIPTOR"},
      {-66, "CL_INVALID_COMPILER_OPTIONS"},
      {-67, "CL_INVALID_LINKER_OPTIONS"},
      {-68, "CL_INVALID_DEVICE_PARTITION_COUNT"},
      {-69, "CL_INVALID_PIPE_SIZE"},
      {-70, "CL_INVALID_DEVICE_QUEUE"},
      {-71, "CL_INVALID_SPEC_ID"},
      {-72, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
      {-1001, "CL_PLATFORM_NOT_FOUND_KHR"},
      {-9999, "CL_NV_ILLEGAL_ADDRESS_OR_LAUNCH_FAILURE"},
  };
  for (const auto& n : names)
    if (n.code == code) return n.name;
  return "CL_ERROR(" + std::to_string(code) + ")";
}

const Dialect& opencl_dialect() {
  static const Dialect d = [] {
    Dialect x;
    x.name = "opencl";
    x.source_extension = ".cl";
    x.preamble = "";
    x.kernel_prefix = "__kernel void";
    x.buffers_in_array = false;
    x.global_qualifier = "__global ";
    x.restrict_kw = "restrict";
    x.parallel_open = "int gid = get_global_id(0); if (gid < {n}) {";
    x.parallel_close = "}";
    x.type_names[size_t(DType::boolean)] = "uchar";
    x.infinity = "INFINITY";
    x.nan = "NAN";
    // OpenCL C overloads these for float and double, so no f suffix.
    x.math_f32 = x.math_f64;
    x.fp64_preamble = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    x.local_qualifier = "__local ";
    x.barrier = "barrier(CLK_LOCAL_MEM_FENCE);";
    x.local_id = "get_local_id(0)";
    x.group_id = "get_group_id(0)";
    x.group_size_attribute = "__attribute__((reqd_work_group_size({n},1,1)))";
    return x;
  }();
  return d;
}

namespace {

// "(N bytes)", built without `"(" + std::to_string(n)`, which trips a
// false -Wrestrict in GCC 12.
std::string bytes_text(size_t n) {
  std::string s = "(";
  s += std::to_string(n);
  s += " bytes)";
  return s;
}

// Errors after which the context or the device cannot be trusted any more:
// later commands on the same queue would fail too (or hang), so the device
// reports itself unavailable instead.
bool is_fatal(cl_int err) {
  return err == CL_OUT_OF_RESOURCES || err == CL_DEVICE_NOT_AVAILABLE || err == CL_INVALID_CONTEXT ||
         err == CL_INVALID_COMMAND_QUEUE || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST || err == -9999;
}

// What every buffer and program of one device shares.
struct State {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  uint64_t max_alloc = 0;
  std::string build_options;
  bool driver_keeps_binaries = false;
  DeviceInfo info;
  std::mutex mutex;  // guards info.available / unavailable_reason

  // Launches enqueued and not yet waited for, per enqueuing thread: a
  // thread's finish() fills only its own time slots, so two threads sharing
  // the queue never write into each other's.
  struct Pending {
    cl_event event;
    double* seconds;
    std::string kernel;
  };
  std::mutex pending_mutex;
  std::map<std::thread::id, std::vector<Pending>> pending;

  ~State() {
    if (queue) clReleaseCommandQueue(queue);
    if (context) clReleaseContext(context);
  }

  std::string label() const { return info.name + " (" + info.description + ")"; }

  void mark_unavailable(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!info.available) return;  // keep the first reason: later ones are consequences
    info.available = false;
    info.unavailable_reason = reason;
  }

  void ensure_available() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!info.available) throw DeviceError(info.name + " is unavailable: " + info.unavailable_reason);
  }

  // Throws DeviceError for a failed CL call; fatal errors also retire the device.
  [[noreturn]] void fail(const char* call, cl_int err, const std::string& context_text) {
    std::string message =
        label() + ": " + call + " returned " + cl_error_name(err) + (context_text.empty() ? "" : " " + context_text);
    if (is_fatal(err)) mark_unavailable(message);
    throw DeviceError(message);
  }

  void check(cl_int err, const char* call, const std::string& context_text = "") {
    if (err != CL_SUCCESS) fail(call, err, context_text);
  }
};

class OpenCLBuffer : public Buffer {
 public:
  OpenCLBuffer(Device* device, size_t bytes, std::shared_ptr<State> state, cl_mem mem)
      : Buffer(device, bytes), state(std::move(state)), mem(mem) {}
  ~OpenCLBuffer() override {
    if (mem) clReleaseMemObject(mem);
  }
  std::shared_ptr<State> state;
  cl_mem mem;
};

// Waits for one launch, releases its event and returns its device time from
// the profiling counters; throws DeviceError if it failed.
double wait_for(State& state, cl_event event, const std::string& name) {
  const std::string what = "(kernel '" + name + "')";
  cl_int err = clWaitForEvents(1, &event);
  cl_int status = CL_COMPLETE;
  if (err == CL_SUCCESS)
    err = clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  cl_ulong start = 0, end = 0;
  if (err == CL_SUCCESS && status == CL_COMPLETE) {
    err = clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr);
    if (err == CL_SUCCESS) err = clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr);
  }
  clReleaseEvent(event);
  state.check(err, "clWaitForEvents", what);
  if (status < 0) {
    // A kernel that died on the device: the context is gone on most drivers.
    std::string message = state.label() + ": kernel '" + name + "' failed on the device with " +
                          cl_error_name(status);
    state.mark_unavailable(message);
    throw DeviceError(message);
  }
  return end > start ? static_cast<double>(end - start) * 1e-9 : 0.0;
}

class OpenCLProgram : public Program {
 public:
  OpenCLProgram(std::shared_ptr<State> state, std::string name, cl_program program, cl_kernel kernel)
      : state_(std::move(state)), name_(std::move(name)), program_(program), kernel_(kernel) {
    size_t wg = 0;
    if (clGetKernelWorkGroupInfo(kernel_, state_->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg, nullptr) ==
            CL_SUCCESS &&
        wg > 0)
      kernel_work_group_ = wg;
    else
      kernel_work_group_ = std::max<size_t>(1, state_->info.max_work_group);
    cl_uint n = 0;
    if (clGetKernelInfo(kernel_, CL_KERNEL_NUM_ARGS, sizeof(n), &n, nullptr) == CL_SUCCESS) num_args_ = n;
  }
  ~OpenCLProgram() override {
    clReleaseKernel(kernel_);
    clReleaseProgram(program_);
  }

  // Sets the arguments and enqueues, with an event in *event unless it is
  // null (an untimed launch); false when there is nothing to run.
  bool enqueue_kernel(const LaunchArgs& args, cl_event* event) {
    // clSetKernelArg on one kernel object is not thread-safe.
    std::lock_guard<std::mutex> lock(mutex_);
    state_->ensure_available();
    const std::string what = "(kernel '" + name_ + "')";
    const size_t count = args.buffers.size() + args.ints.size();
    if (num_args_ >= 0 && static_cast<size_t>(num_args_) != count)
      throw DeviceError(state_->label() + ": kernel '" + name_ + "' takes " + std::to_string(num_args_) +
                        " arguments but the launch passes " + std::to_string(args.buffers.size()) + " buffers and " +
                        std::to_string(args.ints.size()) + " integers");
    for (size_t i = 0; i < args.buffers.size(); ++i) {
      auto* b = dynamic_cast<const OpenCLBuffer*>(args.buffers[i]);
      if (!b || b->state != state_)
        throw DeviceError(state_->label() + ": buffer " + std::to_string(i) + " of kernel '" + name_ +
                          "' does not belong to this device");
      state_->check(clSetKernelArg(kernel_, static_cast<cl_uint>(i), sizeof(cl_mem), &b->mem), "clSetKernelArg",
                    what);
    }
    for (size_t i = 0; i < args.ints.size(); ++i) {
      const cl_uint at = static_cast<cl_uint>(args.buffers.size() + i);
      const int64_t v = args.ints[i];
      if (args.int_bytes == 8) {
        const cl_long wide = v;
        state_->check(clSetKernelArg(kernel_, at, sizeof wide, &wide), "clSetKernelArg", what);
      } else {
        if (v < INT32_MIN || v > INT32_MAX)
          throw DeviceError(state_->label() + ": integer argument " + std::to_string(v) + " of kernel '" + name_ +
                            "' does not fit its 32-bit parameter");
        const cl_int narrow = static_cast<cl_int>(v);
        state_->check(clSetKernelArg(kernel_, at, sizeof narrow, &narrow), "clSetKernelArg", what);
      }
    }

    cl_uint dims = 1;
    for (int d = 1; d < 3; ++d)
      if (args.global[d] > 1 || args.local[d] > 1) dims = d + 1;
    for (cl_uint d = 0; d < dims; ++d)
      if (args.global[d] <= 0) return false;  // nothing to compute; CL rejects empty ranges

    size_t local[3] = {1, 1, 1}, global[3] = {1, 1, 1};
    if (args.local[0] == 0) {
      // Spend a budget of up to 256 work-items on the dimensions in order,
      // never more than each dimension needs.
      size_t budget = std::min<size_t>(256, kernel_work_group_);
      for (cl_uint d = 0; d < dims; ++d) {
        size_t want = 1;
        while (want < static_cast<size_t>(args.global[d]) && want * 2 <= budget) want *= 2;
        local[d] = want;
        budget /= want;
      }
    } else {
      size_t total = 1;
      for (cl_uint d = 0; d < dims; ++d) {
        local[d] = args.local[d] > 0 ? static_cast<size_t>(args.local[d]) : 1;
        total *= local[d];
      }
      if (total > kernel_work_group_)
        throw DeviceError(state_->label() + ": kernel '" + name_ + "' asks for a work-group of " +
                          std::to_string(total) + " items; this kernel allows at most " +
                          std::to_string(kernel_work_group_));
    }
    for (cl_uint d = 0; d < dims; ++d) global[d] = (static_cast<size_t>(args.global[d]) + local[d] - 1) / local[d] * local[d];

    state_->check(clEnqueueNDRangeKernel(state_->queue, kernel_, dims, nullptr, global, local, 0, nullptr, event),
                  "clEnqueueNDRangeKernel", what);
    return true;
  }

  void enqueue(const LaunchArgs& args, double* seconds) override {
    // An OpenCL device that is the host's CPU (PoCL) ran EfficientNet-Lite0
    // about 3x slower with 87 launches in flight than with a wait after
    // each (measured on a busy 2-core machine, issue 13): it keeps waiting.
    if (state_->info.kind == "CPU") {
      const double s = launch(args);
      if (seconds) *seconds = s;
      return;
    }
    if (seconds) *seconds = 0;
    cl_event event = nullptr;
    if (!enqueue_kernel(args, seconds ? &event : nullptr)) return;
    std::lock_guard lock(state_->pending_mutex);
    state_->pending[std::this_thread::get_id()].push_back({event, seconds, name_});
  }

  double launch(const LaunchArgs& args) override {
    cl_event event = nullptr;
    return enqueue_kernel(args, &event) ? wait_for(*state_, event, name_) : 0.0;
  }

 private:
  std::shared_ptr<State> state_;
  std::string name_;
  cl_program program_;
  cl_kernel kernel_;
  size_t kernel_work_group_ = 1;
  long num_args_ = -1;
  std::mutex mutex_;
};

// ---- info queries ----

std::string device_string(cl_device_id device, cl_device_info param) {
  size_t size = 0;
  cl_int err = clGetDeviceInfo(device, param, 0, nullptr, &size);
  if (err != CL_SUCCESS) throw DeviceError("clGetDeviceInfo returned " + cl_error_name(err));
  std::string s(size, '\0');
  if (size) err = clGetDeviceInfo(device, param, size, s.data(), nullptr);
  if (err != CL_SUCCESS) throw DeviceError("clGetDeviceInfo returned " + cl_error_name(err));
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

bool is_pocl(const std::string& platform) { return platform == "Portable Computing Language"; }

// PoCL keeps what it builds in its own disk cache unless POCL_KERNEL_CACHE=0.
// Asking it for CL_PROGRAM_BINARIES compiles every kernel's work-group
// function once more, for a launch size that the first launch then compiles
// again: Lite0's first run on PoCL took twice as long with the binaries read.
bool keeps_kernel_cache(const std::string& platform) {
  const char* off = std::getenv("POCL_KERNEL_CACHE");
  return is_pocl(platform) && !(off && std::string(off) == "0");
}

std::string platform_string(cl_platform_id platform, cl_platform_info param) {
  size_t size = 0;
  cl_int err = clGetPlatformInfo(platform, param, 0, nullptr, &size);
  if (err != CL_SUCCESS) throw DeviceError("clGetPlatformInfo returned " + cl_error_name(err));
  std::string s(size, '\0');
  if (size) err = clGetPlatformInfo(platform, param, size, s.data(), nullptr);
  if (err != CL_SUCCESS) throw DeviceError("clGetPlatformInfo returned " + cl_error_name(err));
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

template <class T>
T device_value(cl_device_id device, cl_device_info param) {
  T value{};
  cl_int err = clGetDeviceInfo(device, param, sizeof(T), &value, nullptr);
  if (err != CL_SUCCESS) throw DeviceError("clGetDeviceInfo returned " + cl_error_name(err));
  return value;
}

std::string program_build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS || size == 0)
    return "";
  std::string log(size, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr) != CL_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

// "OpenCL C 1.2 PoCL" -> 120; 0 when it cannot tell.
int language_version_number(const std::string& text) {
  int major = 0, minor = 0;
  if (std::sscanf(text.c_str(), "OpenCL C %d.%d", &major, &minor) == 2) return major * 100 + minor * 10;
  return 0;
}

class OpenCLDevice : public Device {
 public:
  OpenCLDevice(cl_platform_id platform, cl_device_id device, int platform_index, int device_index)
      : state_(std::make_shared<State>()) {
    State& s = *state_;
    s.platform = platform;
    s.device = device;
    s.info.name = "opencl:" + std::to_string(platform_index) + ":" + std::to_string(device_index);
    s.info.kind = "GPU";
    try {
      s.info.platform = platform_string(platform, CL_PLATFORM_NAME);
      s.info.description = device_string(device, CL_DEVICE_NAME);
      s.info.vendor = device_string(device, CL_DEVICE_VENDOR);
      s.info.driver_version = device_string(device, CL_DRIVER_VERSION);
      s.info.language_version = device_string(device, CL_DEVICE_OPENCL_C_VERSION);
      auto type = device_value<cl_device_type>(device, CL_DEVICE_TYPE);
      s.info.kind = (type & CL_DEVICE_TYPE_GPU) ? "GPU" : (type & CL_DEVICE_TYPE_CPU) ? "CPU" : "Accelerator";
      s.info.compute_units = static_cast<int>(device_value<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS));
      s.info.clock_mhz = static_cast<int>(device_value<cl_uint>(device, CL_DEVICE_MAX_CLOCK_FREQUENCY));
      s.info.global_memory = device_value<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
      s.info.local_memory = device_value<cl_ulong>(device, CL_DEVICE_LOCAL_MEM_SIZE);
      s.info.max_work_group = device_value<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      s.max_alloc = device_value<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      std::istringstream ext(device_string(device, CL_DEVICE_EXTENSIONS));
      for (std::string e; ext >> e;) s.info.extensions.push_back(e);
      auto has = [&](const char* e) {
        return std::find(s.info.extensions.begin(), s.info.extensions.end(), e) != s.info.extensions.end();
      };
      s.info.fp16 = has("cl_khr_fp16");
      s.info.fp64 = has("cl_khr_fp64");
      s.info.gemm_template = "gemm.cl";
      s.info.preferred_vector_width = std::max(1, int(device_value<cl_uint>(device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT)));
      s.build_options = opencl_build_options(s.info);
      s.driver_keeps_binaries = keeps_kernel_cache(s.info.platform);

      if (!device_value<cl_bool>(device, CL_DEVICE_AVAILABLE)) {
        s.mark_unavailable("the driver reports the device as not available");
        return;
      }
      if (!device_value<cl_bool>(device, CL_DEVICE_COMPILER_AVAILABLE)) {
        s.mark_unavailable("the driver has no OpenCL C compiler for this device");
        return;
      }
      cl_int err = CL_SUCCESS;
      cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
      s.context = clCreateContext(props, 1, &device, nullptr, nullptr, &err);
      if (err != CL_SUCCESS || !s.context) {
        s.context = nullptr;
        s.mark_unavailable("clCreateContext returned " + cl_error_name(err));
        return;
      }
      s.queue = clCreateCommandQueue(s.context, device, CL_QUEUE_PROFILING_ENABLE, &err);
      if (err != CL_SUCCESS || !s.queue) {
        s.queue = nullptr;
        s.mark_unavailable("clCreateCommandQueue returned " + cl_error_name(err));
      }
    } catch (const std::exception& e) {
      s.mark_unavailable(std::string("querying the device failed: ") + e.what());
    }
  }

  const DeviceInfo& info() const override { return state_->info; }
  const Dialect& dialect() const override { return opencl_dialect(); }

  std::shared_ptr<Buffer> allocate(size_t bytes) override {
    state_->ensure_available();
    if (state_->max_alloc && bytes > state_->max_alloc)
      throw DeviceError(state_->label() + ": cannot allocate " + std::to_string(bytes) +
                        " bytes; the largest buffer this device allows is " + std::to_string(state_->max_alloc));
    cl_int err = CL_SUCCESS;
    // CL rejects size 0; an empty tensor still needs a handle to pass as an argument.
    cl_mem mem = clCreateBuffer(state_->context, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1), nullptr, &err);
    state_->check(err, "clCreateBuffer", bytes_text(bytes));
    return std::make_shared<OpenCLBuffer>(this, bytes, state_, mem);
  }

  void copy_in(Buffer& dst, const void* src, size_t bytes) override {
    auto& b = own(dst, bytes, "copy_in");
    if (bytes == 0) return;
    state_->check(clEnqueueWriteBuffer(state_->queue, b.mem, CL_TRUE, 0, bytes, src, 0, nullptr, nullptr),
                  "clEnqueueWriteBuffer", bytes_text(bytes));
  }

  void copy_out(const Buffer& src, void* dst, size_t bytes) override {
    auto& b = own(src, bytes, "copy_out");
    if (bytes == 0) return;
    state_->check(clEnqueueReadBuffer(state_->queue, b.mem, CL_TRUE, 0, bytes, dst, 0, nullptr, nullptr),
                  "clEnqueueReadBuffer", bytes_text(bytes));
  }

  std::string build_options() const override { return state_->build_options; }

  // One wait for everything this thread enqueued, then each launch's
  // time from its profiling event. Every event is released even when one
  // failed; the first failure is thrown.
  void finish() override {
    std::vector<State::Pending> mine;
    {
      std::lock_guard lock(state_->pending_mutex);
      auto it = state_->pending.find(std::this_thread::get_id());
      if (it == state_->pending.end()) return;
      mine = std::move(it->second);
      state_->pending.erase(it);
    }
    // The queue is in order: when this thread's last launch is done, all of
    // them are. A wait on its event blocks; PoCL's clFinish was measured to
    // slow the kernels down on a busy machine. An untimed last launch has no
    // event: a marker after it stands in.
    if (!mine.back().event) {
      State::Pending marker{nullptr, nullptr, mine.back().kernel};
      cl_int made = clEnqueueMarkerWithWaitList(state_->queue, 0, nullptr, &marker.event);
      if (made != CL_SUCCESS) {
        for (auto& p : mine)
          if (p.event) clReleaseEvent(p.event);
        state_->check(made, "clEnqueueMarkerWithWaitList");
      }
      mine.push_back(marker);
    }
    cl_int err = clWaitForEvents(1, &mine.back().event);
    std::exception_ptr failed;
    for (auto& p : mine) {
      if (!p.event) continue;
      try {
        const double s = wait_for(*state_, p.event, p.kernel);
        if (p.seconds) *p.seconds = s;
      } catch (...) {
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
    state_->check(err, "clWaitForEvents");
  }

  Built build(const std::string& kernel_name, const std::string& source) override {
    State& s = *state_;
    s.ensure_available();
    cl_int err = CL_SUCCESS;
    const char* text = source.c_str();
    size_t length = source.size();
    cl_program program = clCreateProgramWithSource(s.context, 1, &text, &length, &err);
    s.check(err, "clCreateProgramWithSource", "(kernel '" + kernel_name + "')");
    err = clBuildProgram(program, 1, &s.device, s.build_options.c_str(), nullptr, nullptr);
    Built built;
    built.log = program_build_log(program, s.device);
    if (err != CL_SUCCESS) {
      clReleaseProgram(program);
      if (is_fatal(err)) s.fail("clBuildProgram", err, "(kernel '" + kernel_name + "')");
      throw CompileError("OpenCL build of kernel '" + kernel_name + "' failed on " + s.label() + ": " +
                             cl_error_name(err) + (built.log.empty() ? "" : "\n" + built.log),
                         source, built.log);
    }
    built.binary = binary_unless_kept(program);  // empty when the driver has none: then nothing is cached
    built.program = make_program(kernel_name, program);
    return built;
  }

  bool driver_keeps_binaries() const override { return state_->driver_keeps_binaries; }
  // PoCL's clBuildProgram makes LLVM IR; the machine code of each kernel's
  // work-group function is compiled when the kernel is first launched with
  // a work-group size (launches on a CPU device wait, OpenCLProgram::enqueue).
  bool builds_at_first_launch() const override { return is_pocl(state_->info.platform); }

  // All new kernels of a realize in one program: PoCL runs one LLVM build
  // per clBuildProgram, which cost more than the code in most kernels.
  bool builds_together() const override { return true; }

  BuiltTogether build_together(const std::vector<KernelSource>& kernels) override {
    State& s = *state_;
    s.ensure_available();
    const std::string source = one_translation_unit(kernels);
    const std::string what = "(" + std::to_string(kernels.size()) + " kernels in one program)";
    cl_int err = CL_SUCCESS;
    const char* text = source.c_str();
    size_t length = source.size();
    cl_program program = clCreateProgramWithSource(s.context, 1, &text, &length, &err);
    s.check(err, "clCreateProgramWithSource", what);
    err = clBuildProgram(program, 1, &s.device, s.build_options.c_str(), nullptr, nullptr);
    BuiltTogether built;
    built.log = program_build_log(program, s.device);
    if (err != CL_SUCCESS) {
      clReleaseProgram(program);
      if (is_fatal(err)) s.fail("clBuildProgram", err, what);
      throw CompileError("OpenCL build of " + std::to_string(kernels.size()) + " kernels in one program failed on " +
                             s.label() + ": " + cl_error_name(err) + (built.log.empty() ? "" : "\n" + built.log),
                         source, built.log);
    }
    built.binary = binary_unless_kept(program);
    built.programs = kernels_of(program, kernels);
    return built;
  }

  std::vector<std::shared_ptr<Program>> load_together(const std::vector<KernelSource>& kernels,
                                                      const std::string& binary) override {
    return kernels_of(program_from_binary(binary, std::to_string(kernels.size()) + " kernels"), kernels);
  }

  std::shared_ptr<Program> load(const std::string& kernel_name, const std::string& binary) override {
    return make_program(kernel_name, program_from_binary(binary, "kernel '" + kernel_name + "'"));
  }

 private:
  const OpenCLBuffer& own(const Buffer& b, size_t bytes, const char* what) {
    state_->ensure_available();
    auto* cb = dynamic_cast<const OpenCLBuffer*>(&b);
    if (!cb || cb->state != state_)
      throw DeviceError(state_->label() + ": " + what + " with a buffer of another device");
    if (bytes > b.bytes())
      throw DeviceError(state_->label() + ": " + what + " of " + std::to_string(bytes) + " bytes on a buffer of " +
                        std::to_string(b.bytes()) + " bytes");
    return *cb;
  }

  // Takes ownership of a built program.
  std::shared_ptr<Program> make_program(const std::string& kernel_name, cl_program program) {
    cl_int err = CL_SUCCESS;
    cl_kernel kernel = clCreateKernel(program, kernel_name.c_str(), &err);
    if (err != CL_SUCCESS) {
      clReleaseProgram(program);
      throw DeviceError(state_->label() + ": kernel '" + kernel_name + "' not found in its program: " +
                        cl_error_name(err));
    }
    return std::make_shared<OpenCLProgram>(state_, kernel_name, program, kernel);
  }

  // A built program from a binary; `what` names its kernels in errors.
  cl_program program_from_binary(const std::string& binary, const std::string& what) {
    State& s = *state_;
    s.ensure_available();
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(binary.data());
    size_t length = binary.size();
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program program = clCreateProgramWithBinary(s.context, 1, &s.device, &length, &bytes, &status, &err);
    if (err == CL_SUCCESS && status == CL_SUCCESS && program)
      err = clBuildProgram(program, 1, &s.device, s.build_options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS || status != CL_SUCCESS || !program) {
      if (program) clReleaseProgram(program);
      throw DeviceError(s.label() + ": the binary of " + what + " does not load: " +
                        cl_error_name(err != CL_SUCCESS ? err : status));
    }
    return program;
  }

  // One Program per kernel of a shared cl_program; each holds its own
  // reference, and this function gives back the caller's.
  std::vector<std::shared_ptr<Program>> kernels_of(cl_program program, const std::vector<KernelSource>& kernels) {
    std::vector<std::shared_ptr<Program>> out;
    try {
      for (auto& k : kernels) {
        clRetainProgram(program);
        out.push_back(make_program(k.name, program));  // releases its reference when it throws
      }
    } catch (...) {
      clReleaseProgram(program);
      throw;
    }
    clReleaseProgram(program);
    return out;
  }

  std::string binary_unless_kept(cl_program program) const {
    return state_->driver_keeps_binaries ? std::string() : program_binary(program);
  }

  static std::string program_binary(cl_program program) {
    size_t size = 0;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0)
      return "";
    std::string binary(size, '\0');
    unsigned char* ptr = reinterpret_cast<unsigned char*>(binary.data());
    if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) != CL_SUCCESS) return "";
    return binary;
  }

  std::shared_ptr<State> state_;
};

// Platform and device handles of the ICD loader; empty when there is none.
std::vector<cl_platform_id> platforms() {
  cl_uint count = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &count);
  if (err != CL_SUCCESS || count == 0) return {};  // includes CL_PLATFORM_NOT_FOUND_KHR: no ICD installed
  std::vector<cl_platform_id> ids(count);
  if (clGetPlatformIDs(count, ids.data(), nullptr) != CL_SUCCESS) return {};
  return ids;
}

std::vector<cl_device_id> devices_of(cl_platform_id platform) {
  cl_uint count = 0;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0) return {};
  std::vector<cl_device_id> ids(count);
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr) != CL_SUCCESS) return {};
  return ids;
}

}  // namespace

std::string opencl_build_options(const DeviceInfo& info) {
  std::string options;
  if (language_version_number(info.language_version) >= 120) options += "-cl-std=CL1.2";
  // NVIDIA's compiler then writes register and spill counts into the build
  // log, which the kernel inspector shows next to the source.
  if (std::find(info.extensions.begin(), info.extensions.end(), "cl_nv_compiler_options") != info.extensions.end())
    options += options.empty() ? "-cl-nv-verbose" : " -cl-nv-verbose";
  return options;
}

std::shared_ptr<Device> open_opencl_device(int platform, int device) {
  auto ps = platforms();
  if (platform < 0 || platform >= static_cast<int>(ps.size())) return nullptr;
  auto ds = devices_of(ps[platform]);
  if (device < 0 || device >= static_cast<int>(ds.size())) return nullptr;
  return std::make_shared<OpenCLDevice>(ps[platform], ds[device], platform, device);
}

std::vector<std::shared_ptr<Device>> enumerate_opencl_devices() {
  std::vector<std::shared_ptr<Device>> out;
  auto ps = platforms();
  for (size_t p = 0; p < ps.size(); ++p) {
    auto ds = devices_of(ps[p]);  // a platform that errors here lists no devices
    for (size_t d = 0; d < ds.size(); ++d) {
      try {
        out.push_back(std::make_shared<OpenCLDevice>(ps[p], ds[d], static_cast<int>(p), static_cast<int>(d)));
      } catch (const std::exception&) {
        // Only allocation can throw out of the constructor; skip the device.
      }
    }
  }
  return out;
}

static DeviceRegistrar registrar("opencl", 10, enumerate_opencl_devices);

// PoCL sets HWLOC_PLUGINS_PATH (to /dev/null) while it detects a device, on
// whichever thread enumerates the devices: the window's is a worker. A
// setenv that adds a variable may move the environment's array, and a getenv
// on another thread at that moment reads freed memory: test_ui_onnx crashed
// so in CI, in QtTest's watchdog, while the window listed its devices. Added
// here, before main, while no other thread runs, the variable exists when
// PoCL runs, and its setenv only replaces the value in place.
static const bool hwloc_plugins_path_added = ::setenv("HWLOC_PLUGINS_PATH", "/dev/null", 0) == 0;

}  // namespace tl
