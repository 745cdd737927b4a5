#include "core/tune.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>

#include "core/realize.h"
#include "core/runtime/cache.h"

namespace tl {

namespace {
std::atomic<size_t> search_count{0};
std::mutex clock_mutex;
TuneClock& installed_clock() {
  static TuneClock clock;
  return clock;
}

constexpr const char* kMagic = "tinylens-tune-1";
// Timed launches per candidate (the best counts). On a busy machine one
// launch in a few loses a scheduler slice (milliseconds), so a candidate
// is dropped as too slow only after three of them.
constexpr int kRounds = 5;
constexpr double kGiveUpRatio = 1.5;
// Another candidate replaces the default only when it is this much faster:
// on a busy machine smaller differences are mostly noise, and the default
// is what an untuned run computes.
constexpr double kMargin = 0.97;

// The cache entry's key: the default source and the candidates' labels, so
// that a renderer offering other candidates searches again.
std::string entry_text(const std::vector<TemplateKernel>& all) {
  std::string text = "tune\n" + all.front().source;
  for (auto& c : all) text += '\0' + c.label;
  return text;
}

bool read_choice(const std::string& path, const std::vector<TemplateKernel>& all, TuneOutcome& out) {
  auto data = cache_read(path);
  if (!data) return false;
  std::istringstream in(*data);
  std::string line;
  if (!std::getline(in, line) || line != kMagic || !std::getline(in, out.chosen)) return false;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return false;
    out.seconds.emplace_back(line.substr(tab + 1), std::strtod(line.c_str(), nullptr));
  }
  return std::any_of(all.begin(), all.end(), [&](const TemplateKernel& c) { return c.label == out.chosen; });
}

void write_choice(const std::string& path, const TuneOutcome& t) {
  std::string text = std::string(kMagic) + "\n" + t.chosen + "\n";
  char num[32];
  for (auto& [label, seconds] : t.seconds) {
    std::snprintf(num, sizeof num, "%.9g", seconds);
    text += std::string(num) + "\t" + label + "\n";
  }
  cache_write(path, text);  // best effort, like compiled kernels
}

// A zero-filled buffer of `bytes` (at least one float) on `device`.
std::shared_ptr<Buffer> scratch(Device& device, size_t bytes) {
  bytes = std::max<size_t>(bytes, 64);
  auto b = device.allocate(bytes);
  std::vector<char> zeros(bytes, 0);
  device.copy_in(*b, zeros.data(), bytes);
  return b;
}

// Times every candidate on scratch buffers of the kernel's sizes: one
// launch each first (it fills a packed copy, as a first call does), then
// kRounds rounds over the candidates still in the race, interleaved so that
// a change in the machine's load falls on all of them alike; the best of a
// candidate's launches counts, the one least disturbed by other work.
std::vector<double> time_candidates(Device& device, const KernelPlan& plan, const std::vector<TemplateKernel>& all,
                                    const std::vector<std::shared_ptr<Program>>& programs) {
  TuneClock clock;
  {
    std::lock_guard lock(clock_mutex);
    clock = installed_clock();
  }
  std::vector<std::shared_ptr<Buffer>> keep;
  LaunchArgs common;
  const Node& out = *plan.output;
  keep.push_back(scratch(device, size_t(numel(out.shape)) * dtype_size(out.dtype)));
  for (auto& in : plan.inputs) keep.push_back(scratch(device, size_t(numel(in->shape)) * dtype_size(in->dtype)));
  for (auto& b : keep) common.buffers.push_back(b.get());
  std::vector<LaunchArgs> args(all.size(), common);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].packed_bytes > 0) {
      keep.push_back(scratch(device, size_t(all[i].packed_bytes)));
      args[i].buffers.push_back(keep.back().get());
    }
    for (int d = 0; d < 3; ++d) args[i].global[d] = all[i].global[d], args[i].local[d] = all[i].local[d];
    programs[i]->launch(args[i]);
  }
  std::vector<double> best(all.size(), std::numeric_limits<double>::infinity());
  for (int round = 0; round < kRounds; ++round) {
    const double fastest = *std::min_element(best.begin(), best.end());
    for (size_t i = 0; i < all.size(); ++i) {
      if (cancel_requested()) throw Cancelled();
      if (round > 2 && best[i] > kGiveUpRatio * fastest) continue;
      const double measured = programs[i]->launch(args[i]);
      best[i] = std::min(best[i], clock ? clock(all[i].label, measured) : measured);
    }
  }
  return best;
}
}  // namespace

bool tune_enabled() {
  const char* v = std::getenv("TINYLENS_TUNE");
  return v && *v && std::strcmp(v, "0") != 0;
}

bool retune_requested() {
  const char* v = std::getenv("TINYLENS_TUNE");
  return v && std::strcmp(v, "retune") == 0;
}

void set_tune_clock(TuneClock clock) {
  std::lock_guard lock(clock_mutex);
  installed_clock() = std::move(clock);
}

size_t tune_searches() { return search_count.load(); }

std::vector<TemplateKernel> tune_candidates(const RenderedKernel& r) {
  if (r.candidates.empty()) return {};
  TemplateKernel base;
  base.source = r.source;
  base.label = "default";
  for (int d = 0; d < 3; ++d) base.global[d] = r.global[d], base.local[d] = r.local[d];
  base.packed_bytes = r.packed_bytes, base.packed_key = r.packed_key;
  std::vector<TemplateKernel> all{base};
  all.insert(all.end(), r.candidates.begin(), r.candidates.end());
  return all;
}

TuneOutcome tune_kernel(Device& device, const KernelPlan& plan, RenderedKernel& r,
                        const std::function<std::shared_ptr<Program>(const std::string& source)>& program_of) {
  TuneOutcome t;
  const auto all = tune_candidates(r);
  if (all.empty() || numel(plan.output->shape) == 0) return t;
  const std::string path = device_cache_path(device, entry_text(all), ".tune");
  if (retune_requested() || !read_choice(path, all, t)) {
    t = TuneOutcome{};
    t.searched = true;
    ++search_count;
    std::vector<std::shared_ptr<Program>> programs;
    for (auto& c : all) programs.push_back(program_of(c.source));
    const auto best = time_candidates(device, plan, all, programs);
    size_t pick = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      t.seconds.emplace_back(all[i].label, best[i]);
      if (best[i] < best[pick] * (pick == 0 ? kMargin : 1.0)) pick = i;
    }
    t.chosen = all[pick].label;
    write_choice(path, t);
  }
  for (auto& c : all)
    if (c.label == t.chosen) {
      r.source = c.source;
      for (int d = 0; d < 3; ++d) r.global[d] = c.global[d], r.local[d] = c.local[d];
      r.packed_bytes = c.packed_bytes, r.packed_key = c.packed_key;
    }
  r.candidates.clear();
  return t;
}

}  // namespace tl
