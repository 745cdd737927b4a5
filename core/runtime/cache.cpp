#include "cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../io/limits.h"
#include "device.h"

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

std::optional<std::string> cache_read(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    return io::read_whole_file(path, "cached kernel");
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

std::shared_ptr<Program> Device::compile(const std::string& kernel_name, const std::string& source) {
  if (!available()) throw DeviceError(name() + ": " + info().unavailable_reason);
  const DeviceInfo& i = info();
  const std::string path = cache_path(
      cache_key(source, build_options(), i.platform + " | " + i.description, i.driver_version), ".bin");
  std::string binary, log;
  if (auto data = cache_read(path); data && unpack_entry(*data, binary, log)) {
    try {
      auto program = load(kernel_name, binary);
      program->build_log = log;  // the log of the original build, warnings included
      program->cache_hit = true;
      return program;
    } catch (const DeviceError&) {
      if (!available()) throw;  // the device died; not the entry's fault
      // a damaged or foreign entry: build again and overwrite it
    }
  }
  Built built = build(kernel_name, source);
  auto program = built.program ? built.program : load(kernel_name, built.binary);
  program->build_log = built.log;
  program->cache_hit = false;
  if (!built.binary.empty()) cache_write(path, pack_entry(built.binary, built.log));  // best effort
  return program;
}

}  // namespace tl
