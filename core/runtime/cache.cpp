#include "cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace tl {

namespace fs = std::filesystem;

// Bumped whenever the renderer or a cached format changes meaning.
static const char* kFormatVersion = "tinylens-cache-1";

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
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return std::nullopt;
  return ss.str();
}

bool cache_write(const std::string& path, const std::string& data) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::rand());
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

}  // namespace tl
