#include "app/cli_common.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"

using namespace tl;

namespace tlcli {

int positive_option(const Args& a, const std::string& key, int fallback) {
  const std::string text = a.get(key, std::to_string(fallback));
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || v < 1 || v > 1000000)
    throw UsageError("--" + key + " must be a positive integer, got '" + text + "'");
  return int(v);
}

std::vector<std::string> pick_devices(const std::string& spec) {
  std::vector<std::string> out;
  if (spec == "all") {
    for (auto& d : Registry::instance().devices())
      if (d->available()) out.push_back(d->name());
  } else {
    out.push_back(spec.empty() ? default_device() : spec);
  }
  return out;
}

namespace {
std::string kernel_file_stem(size_t index, const std::string& name) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%03zu_", index);
  std::string safe;
  for (char c : name) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return prefix + safe;
}
}  // namespace

void dump_kernels(const std::vector<ProfileRecord>& records, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IOError("--dump-kernels: cannot create " + dir + ": " + ec.message());
  std::vector<const KernelInfo*> seen;
  for (auto& r : records) {
    const KernelInfo* k = r.kernel.get();
    if (!k || std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(k);
    const std::string stem = (fs::path(dir) / kernel_file_stem(seen.size() - 1, k->name)).string();
    std::ofstream src(stem + Registry::instance().get(k->device).dialect().source_extension);
    src << k->source;
    std::ofstream log(stem + ".log");
    log << k->build_log;
    if (!src || !log) throw IOError("--dump-kernels: cannot write " + stem + ".*");
  }
  std::printf("wrote %zu kernels (source and build log) to %s\n", seen.size(), dir.c_str());
}

void check_writable(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw UsageError(what + " needs a file name");
  if (fs::is_directory(path, ec)) throw IOError("cannot write " + what + " to " + path + ": it is a folder");
  const bool existed = fs::exists(path, ec);
  {
    std::ofstream f(path, std::ios::app);
    if (!f) throw IOError("cannot write " + what + " to " + path + ": " + std::strerror(errno));
  }
  if (!existed) fs::remove(path, ec);  // nothing is left behind if the run fails
}

void save_trace(const std::string& path, const TraceDocument& doc) {
  write_trace(path, doc);
  std::printf("wrote the trace (%zu host spans, %zu kernels) to %s: open it in https://ui.perfetto.dev or "
              "chrome://tracing\n",
              doc.host.size(), doc.kernels.size(), path.c_str());
}

void merge_trace(TraceDocument& into, TraceDocument more) {
  if (into.host.empty() && into.kernels.empty()) {
    auto about = std::move(into.about);
    into = std::move(more);
    into.about.insert(into.about.begin(), about.begin(), about.end());
    return;
  }
  into.host.insert(into.host.end(), more.host.begin(), more.host.end());
  into.kernels.insert(into.kernels.end(), more.kernels.begin(), more.kernels.end());
}

}  // namespace tlcli
