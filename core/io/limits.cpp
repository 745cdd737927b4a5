#include "core/io/limits.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/settings.h"

namespace tl::io {

namespace {

// "8G", "512M", "1048576": bytes, or 0 when the text is not such a number.
uint64_t parse_bytes(const char* text) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return 0;
  uint64_t scale = 1;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K': scale = uint64_t(1) << 10; ++end; break;
    case 'M': scale = uint64_t(1) << 20; ++end; break;
    case 'G': scale = uint64_t(1) << 30; ++end; break;
    default: break;
  }
  if (*end || v > UINT64_MAX / scale) return 0;
  return uint64_t(v) * scale;
}

RunLimits make_run_limits() {
  RunLimits l;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  l.max_bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : uint64_t(8) << 30;
  if (const char* env = setting_value("TINYLENS_MAX_RUN_BYTES"); env && *env)
    if (uint64_t v = parse_bytes(env)) l.max_bytes = v;
  if (const char* env = setting_value("TINYLENS_MAX_RUN_FLOPS"); env && *env) {
    char* end = nullptr;
    double v = std::strtod(env, &end);
    const std::string unit = end ? end : "";
    const double scale = unit == "K" ? 1e3 : unit == "M" ? 1e6 : unit == "G" ? 1e9 : unit == "T" ? 1e12 : 1;
    if (end != env && std::isfinite(v) && v > 0 && (unit.empty() || scale > 1)) l.max_flops_override = v * scale;
  }
  return l;
}

// "1.5 GB", "12 MB", "3.2 TFLOP": a size for a message.
std::string human(double v, const char* unit) {
  const char* prefix[] = {"", "K", "M", "G", "T", "P"};
  int k = 0;
  while (v >= 1000 && k < 5) v /= 1000, ++k;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", v, prefix[k], unit);
  return buf;
}

// " a run may hold ...": where a run's byte budget comes from and how to lift it.
std::string run_bytes_allowed(uint64_t budget, uint64_t file_bytes, uint64_t input_bytes, uint64_t batch) {
  const RunLimits& r = run_limits();
  return " a run may hold" +
         (load_limits().trust_files || budget == r.max_bytes
              ? std::string(" (half this machine's memory; TINYLENS_MAX_RUN_BYTES)")
              : " for a file of " + std::to_string(file_bytes) + " bytes and inputs of " +
                    std::to_string(input_bytes) + (batch > 1 ? " (a batch of " + std::to_string(batch) + ")" : "") +
                    " (for a model you trust, TINYLENS_TRUST_FILES=1 allows up to " +
                    human(double(r.max_bytes), "B") + ", TINYLENS_MAX_RUN_BYTES)");
}

}  // namespace

const RunLimits& run_limits() {
  static const RunLimits limits = make_run_limits();
  return limits;
}

uint64_t run_byte_budget(uint64_t file_bytes, uint64_t input_bytes, uint64_t batch) {
  const RunLimits& r = run_limits();
  if (load_limits().trust_files) return r.max_bytes;
  batch = std::max<uint64_t>(batch, 1);
  const uint64_t item = input_bytes / batch;
  const uint64_t load = load_budget(file_bytes > UINT64_MAX - item ? UINT64_MAX : file_bytes + item);
  const uint64_t relative = load > UINT64_MAX / r.bytes_per_load_byte ? UINT64_MAX : load * r.bytes_per_load_byte;
  return relative > r.max_bytes / batch ? r.max_bytes : relative * batch;
}

int64_t value_element_budget(uint64_t file_bytes, uint64_t input_bytes, uint64_t batch) {
  batch = std::max<uint64_t>(batch, 1);
  const uint64_t item = input_bytes / batch, cap = uint64_t(load_limits().max_tensor_elements);
  const uint64_t one = load_budget(file_bytes > UINT64_MAX - item ? UINT64_MAX : file_bytes + item) / 4;
  return int64_t(one > cap / batch ? cap : one * batch);
}

void check_run_budget(double flops, uint64_t peak_bytes, uint64_t file_bytes, uint64_t input_bytes,
                      bool accelerator, const std::string& what, uint64_t batch) {
  const RunLimits& r = run_limits();
  if (flops > r.max_flops(accelerator))
    throw IOError(what + " would need " + human(flops, "FLOP") + " of arithmetic, more than the " +
                  human(r.max_flops(accelerator), "FLOP") + " a run may take on this " +
                  (accelerator ? "accelerator" : "CPU device") +
                  " (about a minute; TINYLENS_MAX_RUN_FLOPS raises it for a model you trust)");
  const uint64_t budget = run_byte_budget(file_bytes, input_bytes, batch);
  if (peak_bytes > budget)
    throw IOError(what + " would need " + human(double(peak_bytes), "B") + " of values at once, more than the " +
                  human(double(budget), "B") + run_bytes_allowed(budget, file_bytes, input_bytes, batch));
}

std::string run_bytes_exceeded(const std::string& what, uint64_t held, uint64_t asked, uint64_t limit,
                               uint64_t file_bytes, uint64_t input_bytes, uint64_t batch) {
  return what + " holds " + human(double(held), "B") + " of device buffers and asked for " +
         human(double(asked), "B") + " more while it ran, past the " + human(double(limit), "B") +
         run_bytes_allowed(limit, file_bytes, input_bytes, batch) +
         "; the estimate before the run could not see this far (shapes that depend on computed values, or "
         "buffers inside the run's kernels)";
}

namespace {

LoadLimits make_limits() {
  LoadLimits l;
  if (const char* env = setting_value("TINYLENS_MAX_LOAD_BYTES"); env && *env)
    if (uint64_t v = parse_bytes(env)) l.max_total_bytes = v;
  if (setting_is_on("TINYLENS_TRUST_FILES")) l.trust_files = true;
  return l;
}

}  // namespace

const LoadLimits& load_limits() {
  static const LoadLimits limits = make_limits();
  return limits;
}

uint64_t load_budget(uint64_t file_bytes) { return load_budget(file_bytes, load_limits()); }

uint64_t load_budget(uint64_t file_bytes, const LoadLimits& l) {
  if (l.trust_files) return l.max_total_bytes;
  uint64_t relative = file_bytes > (UINT64_MAX - l.slack_bytes) / l.bytes_per_file_byte
                          ? UINT64_MAX
                          : file_bytes * l.bytes_per_file_byte + l.slack_bytes;
  return relative < l.max_total_bytes ? relative : l.max_total_bytes;
}

std::string budget_remedy() {
  return "the file does not hold that much data; for a file you trust, TINYLENS_TRUST_FILES=1 allows up to the "
         "absolute cap, " +
         std::to_string(load_limits().max_total_bytes) + " bytes (TINYLENS_MAX_LOAD_BYTES)";
}

void check_load_budget(uint64_t bytes, uint64_t file_bytes, const std::string& what) {
  const uint64_t budget = load_budget(file_bytes);
  if (bytes <= budget) return;
  throw IOError(what + " would need " + std::to_string(bytes) + " bytes, more than the " + std::to_string(budget) +
                " allowed for a file of " + std::to_string(file_bytes) +
                " bytes (" + budget_remedy() + ")");
}

void LoadBudget::take(uint64_t bytes, const std::string& what) {
  if (try_take(bytes)) return;
  throw IOError(what + " would need " + std::to_string(bytes) + " bytes, more than the " +
                std::to_string(budget_ - used_) + " left of the " + std::to_string(budget_) +
                " allowed for a file of " + std::to_string(file_bytes_) +
                " bytes (" + budget_remedy() + ")");
}

std::string clip(const std::string& name, size_t max_chars) {
  return name.size() <= max_chars ? name : name.substr(0, max_chars) + "...";
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what) {
  if (a != 0 && b > UINT64_MAX / a) throw IOError(what + ": size overflows (" + std::to_string(a) + " x " +
                                                  std::to_string(b) + ")");
  return a * b;
}

uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what) {
  if (b > UINT64_MAX - a) throw IOError(what + ": size overflows (" + std::to_string(a) + " + " +
                                        std::to_string(b) + ")");
  return a + b;
}

namespace {

template <class Bytes>
Bytes read_file_into(const std::string& path, const std::string& what, uint64_t max_bytes) {
  // Only a regular file: a FIFO would block the read forever, a directory
  // reports a size of 2^63, a device never ends.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw IOError("cannot open " + what + " " + path + ": no such file");
  if (!std::filesystem::is_regular_file(status))
    throw IOError("cannot open " + what + " " + path + ": not a regular file (" +
                  (std::filesystem::is_directory(status) ? "a folder" : "a pipe, socket or device") + ")");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IOError("cannot open " + what + " " + path);
  const std::streamoff size = in.tellg();
  if (size < 0) throw IOError("cannot read " + what + " " + path);
  if (uint64_t(size) > max_bytes)
    throw IOError(what + " " + path + " is " + std::to_string(size) + " bytes, more than the " +
                  std::to_string(max_bytes) + " a load may take (TINYLENS_MAX_LOAD_BYTES)");
  Bytes bytes(size_t(size), 0);
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) throw IOError("cannot read " + what + " " + path);
  return bytes;
}

}  // namespace

std::string read_whole_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  return read_file_into<std::string>(path, what, max_bytes);
}

std::vector<uint8_t> read_whole_file_bytes(const std::string& path, const std::string& what, uint64_t max_bytes) {
  return read_file_into<std::vector<uint8_t>>(path, what, max_bytes);
}

}  // namespace tl::io
