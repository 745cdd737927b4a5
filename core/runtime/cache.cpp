#include "core/runtime/cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "core/io/limits.h"
#include "core/runtime/device.h"
#include "core/settings.h"

namespace tl {

namespace fs = std::filesystem;

// Bumped whenever the renderer or a cached format changes meaning.
static const char* kFormatVersion = "tinylens-cache-2";

std::string cache_directory() {
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    base = x;
  else if (const char* h = std::getenv("HOME"); h && *h)
    base = std::string(h) + "/.cache";
  else
    base = "/tmp";
  return base + "/tinylens";
}

// 64-bit FNV-1a twice with different seeds: short, stable across runs, and
// collisions are as unlikely as anyone here will care about.
static uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string cache_key(const std::string& source, const std::string& options, const std::string& device,
                      const std::string& driver) {
  std::string all = std::string(kFormatVersion) + '\0' + source + '\0' + options + '\0' + device + '\0' + driver;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)fnv1a(all, 14695981039346656037ull),
                (unsigned long long)fnv1a(all, 0x9e3779b97f4a7c15ull));
  return buf;
}

std::string cache_path(const std::string& key, const std::string& extension) {
  return cache_directory() + "/" + key.substr(0, 2) + "/" + key + extension;
}

std::string prebuilt_cache_directory() {
  if (setting_is_on("TINYLENS_NOPREBUILT")) return "";
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (exe.parent_path() / "prebuilt-cache" / "tinylens").string();
}

std::optional<std::string> cache_read(const std::string& path) {
  std::error_code ec;
  std::string found = path;
  if (!fs::exists(path, ec)) {
    // An entry the build compiled (the GEMM library) is read from beside
    // the executable; what is built at run time goes to the user's cache.
    const std::string user = cache_directory(), prebuilt = prebuilt_cache_directory();
    if (prebuilt.empty() || path.compare(0, user.size(), user) != 0) return std::nullopt;
    found = prebuilt + path.substr(user.size());
    if (!fs::exists(found, ec)) return std::nullopt;
  }
  try {
    return io::read_whole_file(found, "cached kernel");
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

bool cache_write(const std::string& path, const std::string& data) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return false;
    out.write(data.data(), std::streamsize(data.size()));
    if (!out) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

static const char kEntryMagic[8] = {'T', 'L', 'K', 'B', 'I', 'N', '0', '2'};

std::string pack_entry(const std::string& binary, const std::string& log) {
  std::string out(kEntryMagic, sizeof(kEntryMagic));
  uint64_t n = binary.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + binary + log;
}

bool unpack_entry(const std::string& data, std::string& binary, std::string& log) {
  if (data.size() < 16 || std::memcmp(data.data(), kEntryMagic, sizeof(kEntryMagic)) != 0) return false;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(data[8 + i])) << (8 * i);
  if (n == 0 || n > data.size() - 16) return false;
  binary = data.substr(16, n);
  log = data.substr(16 + n);
  return true;
}

namespace {
std::atomic<size_t> compiler_run_count{0};

// The binary of an entry whose binary the driver keeps in its own cache
// (Device::driver_keeps_binaries): a warm run builds the source again.
const std::string kDriverKeepsBinary = "tinylens: built from source; the driver keeps the binary";

// What an entry stores for a build: its binary, the marker above, or
// nothing (not cached).
std::string stored_binary(const Device& device, const std::string& binary) {
  return binary.empty() && device.driver_keeps_binaries() ? kDriverKeepsBinary : binary;
}

std::string entry_path(const Device& device, const std::string& text, const char* extension) {
  const DeviceInfo& i = device.info();
  return cache_path(cache_key(text, device.build_options(), i.platform + " | " + i.description, i.driver_version),
                    extension);
}
}  // namespace

std::string device_cache_path(const Device& device, const std::string& text, const char* extension) {
  return entry_path(device, text, extension);
}

size_t compiler_runs() { return compiler_run_count.load(); }

std::string batch_text(const std::vector<KernelSource>& kernels) {
  std::string text;
  for (auto& k : kernels) text += k.name + '\0' + k.source + '\0';
  return text;
}

std::shared_ptr<Program> Device::find_cached(const std::string& kernel_name, const std::string& source) {
  if (!available()) throw DeviceError(name() + ": " + info().unavailable_reason);
  std::string binary, log;
  auto data = cache_read(entry_path(*this, source, ".bin"));
  if (!data || !unpack_entry(*data, binary, log)) return nullptr;
  try {
    std::shared_ptr<Program> program;
    if (binary == kDriverKeepsBinary && driver_keeps_binaries()) {
      Built built = build(kernel_name, source);  // answered by the driver's cache
      program = built.program ? built.program : load(kernel_name, built.binary);
    } else {
      program = load(kernel_name, binary);
    }
    program->build_log = log;  // the log of the original build, warnings included
    program->cache_hit = true;
    return program;
  } catch (const DeviceError&) {
    if (!available()) throw;  // the device died; not the entry's fault
    return nullptr;           // a damaged or foreign entry: built again and overwritten
  }
}

std::shared_ptr<Program> Device::compile(const std::string& kernel_name, const std::string& source) {
  if (auto program = find_cached(kernel_name, source)) return program;
  ++compiler_run_count;
  Built built = build(kernel_name, source);
  auto program = built.program ? built.program : load(kernel_name, built.binary);
  program->build_log = built.log;
  program->cache_hit = false;
  if (std::string stored = stored_binary(*this, built.binary); !stored.empty())
    cache_write(entry_path(*this, source, ".bin"), pack_entry(stored, built.log));  // best effort
  return program;
}

BuiltTogether Device::build_together(const std::vector<KernelSource>&) {
  throw std::logic_error(name() + ": build_together called on a device that builds kernel by kernel");
}

std::vector<std::shared_ptr<Program>> Device::load_together(const std::vector<KernelSource>&, const std::string&) {
  throw std::logic_error(name() + ": load_together called on a device that builds kernel by kernel");
}

// A batch's entry has its own extension, so that it can never be mistaken
// for a single kernel's.
std::vector<std::shared_ptr<Program>> Device::compile_together(const std::vector<KernelSource>& kernels) {
  if (!available()) throw DeviceError(name() + ": " + info().unavailable_reason);
  const std::string path = entry_path(*this, batch_text(kernels), ".batch");
  std::string binary, log;
  std::vector<std::shared_ptr<Program>> programs;
  bool hit = false;
  if (auto data = cache_read(path); data && unpack_entry(*data, binary, log)) {
    try {
      programs = binary == kDriverKeepsBinary && driver_keeps_binaries() ? build_together(kernels).programs
                                                                         : load_together(kernels, binary);
      hit = true;
    } catch (const DeviceError&) {
      if (!available()) throw;
    }
  }
  if (!hit) {
    ++compiler_run_count;
    BuiltTogether built = build_together(kernels);
    programs = built.programs.empty() ? load_together(kernels, built.binary) : std::move(built.programs);
    log = built.log;
    if (std::string stored = stored_binary(*this, built.binary); !stored.empty())
      cache_write(path, pack_entry(stored, built.log));  // best effort
  }
  if (programs.size() != kernels.size())
    throw DeviceError(name() + ": a batch of " + std::to_string(kernels.size()) + " kernels loaded as " +
                      std::to_string(programs.size()) + " programs");
  for (auto& p : programs) {
    p->build_log = log;
    p->cache_hit = hit;
  }
  return programs;
}

}  // namespace tl
