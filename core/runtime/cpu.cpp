// The CPU device: kernels rendered to C, compiled by the system compiler into
// a shared library, loaded with dlopen and run over both cores.
#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/runtime/device.h"
#include "core/runtime/kernel_files.h"
#include "core/runtime/registry.h"
#include "core/runtime/scratch.h"
#include "core/runtime/thread_pool.h"
#include "core/runtime/together.h"

namespace tl {

namespace {

// Freed blocks kept for the next allocation of the same size. A model's warm
// run allocates the same intermediates every time; without this each one is a
// fresh mmap whose pages fault in and are zeroed by the kernel, which cost
// more than some of the kernels that fill them. Blocks are not cleared: every
// kernel writes its whole output (the golden tests would see stale values).
class BlockPool {
 public:
  static constexpr size_t kMaxKept = size_t{512} << 20;
  unsigned char* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        unsigned char* p = it->second;
        free_.erase(it);
        kept_ -= bytes;
        return p;
      }
    }
    return static_cast<unsigned char*>(::operator new(bytes ? bytes : 1, std::align_val_t(64)));
  }
  void give(unsigned char* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (kept_ + bytes <= kMaxKept) {
        free_.emplace(bytes, p);
        kept_ += bytes;
        return;
      }
    }
    ::operator delete(p, std::align_val_t(64));
  }
  ~BlockPool() {
    for (auto& [bytes, p] : free_) ::operator delete(p, std::align_val_t(64));
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, unsigned char*> free_;
  size_t kept_ = 0;
};

class HostBuffer : public Buffer {
 public:
  HostBuffer(Device* d, size_t bytes, std::shared_ptr<BlockPool> pool)
      : Buffer(d, bytes), data(pool->take(bytes)), pool_(std::move(pool)) {}
  // A part of `whole` (Device::view): its memory stays whole's.
  HostBuffer(Device* d, std::shared_ptr<Buffer> whole, size_t offset, size_t bytes)
      : Buffer(d, bytes), data(static_cast<HostBuffer&>(*whole).data + offset), whole_(std::move(whole)) {}
  ~HostBuffer() override {
    if (pool_) pool_->give(data, bytes());
  }
  unsigned char* data;

 private:
  std::shared_ptr<BlockPool> pool_;
  std::shared_ptr<Buffer> whole_;
};

using KernelFn = void (*)(int, int, void**);

class CpuProgram : public Program {
 public:
  CpuProgram(void* handle, KernelFn fn, ThreadPool& pool) : handle_(handle), fn_(fn), pool_(pool) {}
  ~CpuProgram() override { dlclose(handle_); }
  double launch(const LaunchArgs& args) override {
    if (!args.ints.empty()) throw std::logic_error("a C kernel takes no integer arguments");
    std::vector<void*> ptrs;
    for (auto* b : args.buffers) ptrs.push_back(static_cast<HostBuffer*>(b)->data);
    void** raw = ptrs.data();
    auto t0 = std::chrono::steady_clock::now();
    // local[0] > 0: the kernel's units may be run a few at a time by any
    // thread (ThreadPool::parallel_for's grain).
    pool_.parallel_for(args.global[0], [&](int64_t s, int64_t e) { fn_(int(s), int(e), raw); }, args.local[0]);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  void* handle_;
  KernelFn fn_;
  ThreadPool& pool_;
};

// Runs a shell command, returning its exit status and everything it printed.
int run_capture(const std::string& cmd, std::string& output) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), got);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

class CpuDevice : public Device {
 public:
  CpuDevice() : pool_(default_thread_count()) {
    keep_freed_memory();
    info_.name = "cpu";
    info_.kind = "CPU";
    info_.description = cpu_model();
    info_.vendor = "host";
    info_.platform = "C via the system compiler";
    info_.compute_units = int(pool_.size());
    info_.global_memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
    info_.fp64 = true;
    info_.language_version = "C11";
    info_.gemm_template = "gemm_cpu.c";
    info_.preferred_vector_width = 8;  // AVX2: eight floats
    find_compiler();
    dialect_.name = "c";
    dialect_.source_extension = ".c";
    dialect_.preamble = "#include <math.h>\n" + embedded_kernel("c_math.h");
    dialect_.math_f32.exp = "tl_expf";
    dialect_.kernel_prefix = "void";
    dialect_.buffers_in_array = true;
    dialect_.restrict_kw = "restrict";
    dialect_.parallel_open = "for (int gid = start; gid < end; ++gid) {";
    dialect_.independent_loop = "#pragma omp simd";
    dialect_.reordered_sum_loop = "#pragma omp simd reduction(+:acc)";
    dialect_.reordered_max_loop = "#pragma omp simd reduction(max:acc) reduction(|:any_nan)";
  }

  const DeviceInfo& info() const override { return info_; }
  const Dialect& dialect() const override { return dialect_; }

  std::shared_ptr<Buffer> allocate(size_t bytes) override { return std::make_shared<HostBuffer>(this, bytes, blocks_); }
  std::shared_ptr<Buffer> view(const std::shared_ptr<Buffer>& whole, size_t offset, size_t bytes) override {
    if (!whole || whole->device() != this || offset > whole->bytes() || bytes > whole->bytes() - offset)
      throw std::logic_error("cpu: a view outside its buffer");
    return std::make_shared<HostBuffer>(this, whole, offset, bytes);
  }
  bool makes_views() const override { return true; }
  void copy_in(Buffer& dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(static_cast<HostBuffer&>(dst).data, src, bytes);
  }
  void copy_out(const Buffer& src, void* dst, size_t bytes) override {
    if (bytes) std::memcpy(dst, static_cast<const HostBuffer&>(src).data, bytes);
  }

  // No contraction of a*b+c into fma: the scheduler recomputes fused values
  // in more than one kernel (max-pool's backward compares the recomputed
  // input with the stored max), and both must round the same way. The GEMM
  // template asks for fma itself. No trapping math: no kernel reads the
  // floating-point flags, and with them GCC keeps a loop whose selects guard
  // arithmetic (the activations' clamps) scalar where no masked vector
  // operations exist: on AVX2 every exp-based activation ran a float at a time.
  std::string build_options() const override {
    return "-O3 -march=native -std=gnu11 -fPIC -shared -fno-math-errno -fno-trapping-math -ffp-contract=off -fopenmp-simd -Wall -Wno-unused-variable";
  }

  // The GEMM library takes its scratch (packed panels, phased images,
  // Winograd's V and M: up to a few MB) from malloc on every call, on every
  // thread. By default glibc may give the freed top of a thread's heap back
  // to the system (its thresholds adapt to the blocks freed), and the next
  // call then faults it in again, page by page: with 2269ea7's scratch sizes
  // ResNet-50 took 675 faults per run and 19.4-20.6 ms, against 24 and
  // 18.4-18.5 ms with these settings (alternating, 4 rounds). Freed memory
  // up to 64 MB is kept; blocks up to 32 MB come from the heap, not mmap.
  static void keep_freed_memory() {
#if defined(__GLIBC__)
    static std::once_flag once;
    std::call_once(once, [] {
      mallopt(M_MMAP_THRESHOLD, 32 << 20);
      mallopt(M_TRIM_THRESHOLD, 64 << 20);
    });
#endif
  }

  // source -> a shared library's bytes, compiled in a private temp folder.
  // A realize's new kernels are built together (one compiler run per core,
  // realize.cpp): a gcc run costs more in start-up and in reading math.h
  // than most kernels cost to compile. GEMM kernels are small since they
  // call the GEMM library, which is compiled once (load_gemm_library).
  Built build(const std::string& name, const std::string& source) override {
    TempFiles tmp(name);
    Built built;
    auto library = is_gemm_library(name) ? std::future<void>() : gemm_library_beside(source);
    built.binary = compile_library(tmp, source, "kernel " + name, built.log);
    if (library.valid()) library.get();
    built.program = open(name, tmp.stem + ".so", calls_gemm_library(source));
    return built;
  }

  bool builds_together() const override { return true; }

  // Several kernels as one translation unit, into one library.
  BuiltTogether build_together(const std::vector<KernelSource>& kernels) override {
    const std::string source = one_translation_unit(kernels);
    TempFiles tmp("batch");
    BuiltTogether built;
    auto library = gemm_library_beside(source);
    built.binary = compile_library(tmp, source, std::to_string(kernels.size()) + " kernels built together", built.log);
    if (library.valid()) library.get();
    built.programs = open_all(kernels, tmp.stem + ".so", calls_gemm_library(source));
    return built;
  }

  std::vector<std::shared_ptr<Program>> load_together(const std::vector<KernelSource>& kernels,
                                                      const std::string& binary) override {
    TempFiles tmp("batch");
    write_library(tmp, binary);
    return open_all(kernels, tmp.stem + ".so", calls_gemm_library(binary));
  }

  // A library's bytes -> a program: written to a temp file for dlopen, which
  // keeps its mapping after the file is removed.
  std::shared_ptr<Program> load(const std::string& name, const std::string& binary) override {
    TempFiles tmp(name);
    write_library(tmp, binary);
    return open(name, tmp.stem + ".so", calls_gemm_library(binary));
  }

 private:
  // This process's temp folder, removed with whatever is left in it when the
  // process exits (by the process that made it: not by a forked child).
  struct ProcessTempDir {
    std::filesystem::path path;
    pid_t owner = ::getpid();
    ProcessTempDir() {
      std::error_code ec;
      path = std::filesystem::temp_directory_path(ec) / ("tinylens-" + std::to_string(owner));
    }
    ~ProcessTempDir() {
      std::error_code ec;
      if (::getpid() == owner) std::filesystem::remove_all(path, ec);
    }
  };

  // Unique file names in this process's temp folder, removed when done.
  struct TempFiles {
    std::string stem;
    explicit TempFiles(const std::string& name) {
      static ProcessTempDir dir;
      static std::atomic<int> counter{0};
      std::error_code ec;
      std::filesystem::create_directories(dir.path, ec);  // again, in case a cleaner took it
      stem = (dir.path / (name + "_" + std::to_string(counter++))).string();
    }
    ~TempFiles() {
      std::error_code ec;
      for (const char* ext : {".c", ".so"}) std::filesystem::remove(stem + ext, ec);
    }
  };

  // Compiles `source` into tmp's library and returns its bytes; `what`
  // names the kernels in a CompileError.
  std::string compile_library(const TempFiles& tmp, const std::string& source, const std::string& what,
                              std::string& log) {
    {
      std::ofstream out(tmp.stem + ".c");
      out << source;
      if (!out) throw DeviceError("cpu: cannot write the source of " + what + " to " + tmp.stem + ".c");
    }
    const std::string cmd = compiler_ + " " + build_options() + " -o '" + tmp.stem + ".so' '" + tmp.stem + ".c'";
    const int status = run_capture(cmd, log);
    if (status != 0)
      throw CompileError("cpu: " + what + " failed to compile (" + compiler_ + " exit " + std::to_string(status) +
                             "):\n" + log,
                         source, log);
    std::ifstream so(tmp.stem + ".so", std::ios::binary);
    std::string binary(std::istreambuf_iterator<char>(so), {});
    if (binary.empty()) throw DeviceError("cpu: the compiler wrote no library for " + what);
    return binary;
  }

  static void write_library(const TempFiles& tmp, const std::string& binary) {
    std::ofstream out(tmp.stem + ".so", std::ios::binary);
    out.write(binary.data(), std::streamsize(binary.size()));
    if (!out) throw DeviceError("cpu: cannot write a kernel library to " + tmp.stem + ".so");
  }

  // GEMM kernels call the GEMM library (kernels/gemm_cpu.c): it is compiled
  // once per machine like any kernel (and so kept in the kernel cache) and
  // loaded into the global symbol scope before the first kernel that names
  // its entry point, in its source or in its library's symbol table.
  static bool calls_gemm_library(const std::string& text) {
    return text.find(kGemmCLibraryEntry) != std::string::npos;
  }
  // The library's two halves compile in parallel; the extras are loaded
  // first, into the global scope, where the first half looks them up.
  void load_gemm_library() {
    std::lock_guard<std::mutex> lock(gemm_library_mutex_);
    if (gemm_library_) return;
    auto extras = std::async(std::launch::async, [this] { return compile(kGemmCExtrasEntry, gemm_c_extras_source()); });
    auto library = compile(kGemmCLibraryEntry, gemm_c_library_source());
    gemm_extras_ = extras.get();
    // The first half would quietly fall back to the direct product.
    using MissingFn = const char* (*)();
    auto missing = reinterpret_cast<MissingFn>(dlsym(RTLD_DEFAULT, "tinylens_gemm_missing_extra"));
    if (!missing) throw DeviceError("cpu: the GEMM library has no tinylens_gemm_missing_extra");
    if (const char* fn = missing())
      throw DeviceError(std::string("cpu: the GEMM library's second half has no ") + fn + " in the global scope");
    gemm_library_ = library;
  }
  static bool is_gemm_library(const std::string& name) {
    return name == kGemmCLibraryEntry || name == kGemmCExtrasEntry;
  }
  // A first run's GEMM library compiles on a thread of its own, beside the
  // kernels that call it rather than after them: it is the longest compile
  // of a cold start. No future when nothing waits, or when another thread
  // holds the mutex (it is loading the library: open() waits for it, while
  // this batch compiles); never called for the library's halves (their
  // compile holds the mutex).
  std::future<void> gemm_library_beside(const std::string& source) {
    if (!calls_gemm_library(source)) return {};
    {
      std::unique_lock<std::mutex> lock(gemm_library_mutex_, std::try_to_lock);
      if (!lock.owns_lock() || gemm_library_) return {};
    }
    return std::async(std::launch::async, [this] { load_gemm_library(); });
  }

  // Every kernel of a batch from its one library (dlopen counts the handles).
  std::vector<std::shared_ptr<Program>> open_all(const std::vector<KernelSource>& kernels, const std::string& path,
                                                 bool calls_gemm) {
    std::vector<std::shared_ptr<Program>> programs;
    for (auto& k : kernels) programs.push_back(open(k.name, path, calls_gemm));
    return programs;
  }

  std::shared_ptr<Program> open(const std::string& name, const std::string& path, bool calls_gemm) {
    const bool library = is_gemm_library(name);  // which names itself
    if (calls_gemm && !library) load_gemm_library();
    void* handle = dlopen(path.c_str(), RTLD_NOW | (library ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!handle) {
      const char* why = dlerror();
      throw DeviceError("cpu: cannot load kernel " + name + ": " + (why ? why : "dlopen failed"));
    }
    auto fn = reinterpret_cast<KernelFn>(dlsym(handle, name.c_str()));
    if (!fn) {
      dlclose(handle);
      throw DeviceError("cpu: kernel " + name + " has no entry point named " + name);
    }
    if (library) {  // its calls' scratch comes from each thread's block (core/runtime/scratch.h)
      using InstallFn = void (*)(void* (*)(size_t), void (*)(void*));
      auto install = reinterpret_cast<InstallFn>(dlsym(handle, "tinylens_gemm_scratch"));
      if (!install) {
        dlclose(handle);
        throw DeviceError("cpu: the GEMM library " + name + " has no tinylens_gemm_scratch");
      }
      install(&scratch_take, &scratch_give);
    }
    return std::make_shared<CpuProgram>(handle, fn, pool_);
  }

  void find_compiler() {
    std::vector<std::string> candidates;
    if (const char* cc = std::getenv("CC"); cc && *cc) candidates.push_back(cc);
    for (const char* c : {"cc", "gcc", "clang"}) candidates.push_back(c);
    for (auto& c : candidates) {
      std::string out;
      if (run_capture(c + " --version", out) == 0) {
        compiler_ = c;
        compiler_version_ = first_line(out);
        info_.driver_version = compiler_version_;
        return;
      }
    }
    info_.available = false;
    info_.unavailable_reason = "no C compiler found (tried $CC, cc, gcc, clang); install gcc to run kernels on the CPU";
  }

  DeviceInfo info_;
  Dialect dialect_;
  ThreadPool pool_;
  std::shared_ptr<BlockPool> blocks_ = std::make_shared<BlockPool>();
  std::string compiler_, compiler_version_;
  std::mutex gemm_library_mutex_;
  std::shared_ptr<Program> gemm_library_, gemm_extras_;
};

}  // namespace

static DeviceRegistrar registrar("cpu", 0, [] { return std::vector<std::shared_ptr<Device>>{std::make_shared<CpuDevice>()}; });

}  // namespace tl
