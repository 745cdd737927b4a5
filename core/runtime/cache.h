// On-disk cache of compiled kernels, shared by every device through
// Device::compile (defined in cache.cpp): a device supplies only build()
// (source -> binary) and load() (binary -> program).
// key = hash(source, options, device name, driver version, format version);
// writes go to a temp file renamed into place; any failure means "miss".
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace tl {

struct KernelSource;
class Device;

std::string cache_directory();  // $XDG_CACHE_HOME/tinylens or ~/.cache/tinylens
// Entries compiled by the build (CMakeLists.txt: the GEMM library, which every
// model on the CPU device needs and which takes most of a first run's
// compile time): prebuilt-cache/tinylens beside the executable, laid out as
// cache_directory() and read after it; "" when TINYLENS_NOPREBUILT is set.
std::string prebuilt_cache_directory();
std::string cache_key(const std::string& source, const std::string& options, const std::string& device,
                      const std::string& driver);
std::string cache_path(const std::string& key, const std::string& extension);
// nullopt when missing or unreadable, under cache_directory() and under
// prebuilt_cache_directory() for a path in cache_directory().
std::optional<std::string> cache_read(const std::string& path);
bool cache_write(const std::string& path, const std::string& data);  // atomic
// Where an entry about `text` on `device` lives: keyed like a compiled
// kernel (build options, device, driver), so other entries, such as the
// tuner's choices (core/tune.cpp, extension ".tune"), follow the same rules.
std::string device_cache_path(const Device& device, const std::string& text, const char* extension);

// One cache entry: magic, binary size, binary, build log. unpack_entry
// returns false for anything that is not a whole entry.
std::string pack_entry(const std::string& binary, const std::string& log);
bool unpack_entry(const std::string& data, std::string& binary, std::string& log);

// How many times a device's compiler ran in this process (build() and
// build_together() calls through Device::compile*): tests check that a warm
// disk cache compiles nothing, by count rather than by time.
size_t compiler_runs();

// The text whose hash keys a batch's cache entry: every kernel's name and
// source, in order.
std::string batch_text(const std::vector<KernelSource>& kernels);

}  // namespace tl
