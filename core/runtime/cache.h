// On-disk cache of compiled kernels, shared by every device.
// key = hash(source, options, device name, driver version, format version);
// writes go to a temp file renamed into place; any failure means "miss".
#pragma once
#include <optional>
#include <string>

namespace tl {

std::string cache_directory();  // $XDG_CACHE_HOME/tinylens or ~/.cache/tinylens
std::string cache_key(const std::string& source, const std::string& options, const std::string& device,
                      const std::string& driver);
std::string cache_path(const std::string& key, const std::string& extension);
std::optional<std::string> cache_read(const std::string& path);
bool cache_write(const std::string& path, const std::string& data);  // atomic

}  // namespace tl
