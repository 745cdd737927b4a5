#include "core/tune.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <sstream>

#include "core/progress.h"
#include "core/runtime/cache.h"
#include "core/settings.h"

namespace tl {

namespace {
std::atomic<size_t> search_count{0};
std::mutex clock_mutex;
TuneClock& installed_clock() {  // under clock_mutex
  static TuneClock clock;
  return clock;
}
TuneClock current_clock() {
  std::lock_guard lock(clock_mutex);
  return installed_clock();
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
// In a model a kernel's weights come from memory: the other layers' traffic
// has evicted them since the last inference. Timed back to back on one
// buffer they would stay in cache, and a candidate that is fast only from
// cache would win (Lite0's 1000 x 1280 classifier split over rows: 107 us
// tuned, 474 us in the model, against the default's 131 and 295). So once
// the weights reach an L2's size, successive timed launches (of any
// candidate) read the next of several copies, so that between two reads of
// one copy the others pass through the cache: kEvictBytes, a large
// last-level cache, when there are enough of them. Weights larger than that
// stream from memory anyway, and stay one copy; so do the inputs the
// realize computes, which are in cache in the model too.
constexpr size_t kRotateFrom = size_t(1) << 20;
constexpr size_t kEvictBytes = size_t(32) << 20;
constexpr size_t kMaxCopies = 8;

// The cache entry's key: the default source and the candidates' labels, so
// that a renderer offering other candidates searches again.
std::string entry_text(const std::vector<TemplateKernel>& all) {
  std::string text = "tune\n" + all.front().source;
  for (auto& c : all) text += '\0' + c.label;
  // A template sized at run time is one source for many shapes: its sizes
  // are part of what was tuned.
  for (int64_t v : all.front().ints) text += ',' + std::to_string(v);
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

size_t bytes_of(const Node& n) { return size_t(numel(n.shape)) * dtype_size(n.dtype); }

// Times every candidate on scratch buffers of the kernel's sizes: one
// launch on each copy of the weights first (it fills a packed copy, as a
// first call does), then kRounds rounds over the candidates still in the
// race, interleaved so that a change in the machine's load falls on all of
// them alike; the best of a candidate's launches counts, the one least
// disturbed by other work. Successive launches take the next copy.
std::vector<double> time_candidates(Device& device, const KernelPlan& plan, const std::vector<TemplateKernel>& all,
                                    const std::vector<std::shared_ptr<Program>>& programs) {
  const TuneClock clock = current_clock();
  size_t weights = 0, packed = 0;
  for (auto& in : plan.inputs)
    if (in->realized()) weights += bytes_of(*in);
  for (auto& c : all) {
    size_t bytes = 0;
    for (const auto& p : c.packed) bytes += size_t(std::max<int64_t>(0, p.bytes));
    packed = std::max(packed, bytes);
  }
  const int copies = tune_weight_copies(weights + packed);
  std::vector<std::shared_ptr<Buffer>> keep;
  auto fresh = [&](size_t bytes) {
    keep.push_back(scratch(device, bytes));
    return keep.back().get();
  };
  Buffer* out = fresh(bytes_of(*plan.output));
  std::vector<Buffer*> shared;  // inputs computed by this realize: one copy
  for (auto& in : plan.inputs) shared.push_back(in->realized() ? nullptr : fresh(bytes_of(*in)));
  // args[copy][candidate]
  std::vector<std::vector<LaunchArgs>> args(size_t(copies), std::vector<LaunchArgs>(all.size()));
  for (auto& per_copy : args) {
    LaunchArgs common;
    common.buffers.push_back(out);
    for (size_t j = 0; j < plan.inputs.size(); ++j)
      common.buffers.push_back(shared[j] ? shared[j] : fresh(bytes_of(*plan.inputs[j])));
    for (size_t i = 0; i < all.size(); ++i) {
      per_copy[i] = common;
      for (const auto& p : all[i].packed) per_copy[i].buffers.push_back(fresh(size_t(p.bytes)));
      for (int d = 0; d < 3; ++d) per_copy[i].global[d] = all[i].global[d], per_copy[i].local[d] = all[i].local[d];
      per_copy[i].ints = all[i].ints, per_copy[i].int_bytes = all[i].int_bytes;
      programs[i]->launch(per_copy[i]);
    }
  }
  std::vector<double> best(all.size(), std::numeric_limits<double>::infinity());
  size_t launches = 0;
  for (int round = 0; round < kRounds; ++round) {
    const double fastest = *std::min_element(best.begin(), best.end());
    for (size_t i = 0; i < all.size(); ++i) {
      if (cancel_requested()) throw Cancelled();
      if (round > 2 && best[i] > kGiveUpRatio * fastest) continue;
      const double measured = programs[i]->launch(args[launches++ % args.size()][i]);
      best[i] = std::min(best[i], clock ? clock(all[i].label, measured) : measured);
    }
  }
  return best;
}
}  // namespace

// Right after a first run's compilers exit, the kernels of the 2-vCPU
// test machine ran at about half speed for a few hundred milliseconds
// (SqueezeNet's first GEMMs were timed at 265 us instead of 130-140, and a
// 16-row GEMM's two-thread rendering at 44 us instead of 17, so a
// one-thread rendering won that is 1.8x slower in the model). Waiting
// 100 ms asleep did not end it; 300 ms busy did. The cause is outside the
// process; the tuner lets it pass rather than store wrong choices.
constexpr auto kSettle = std::chrono::milliseconds(300);

void settle_before_tuning() {
  if (current_clock()) return;  // a test's clock decides, not the times
  const auto until = std::chrono::steady_clock::now() + kSettle;
  while (std::chrono::steady_clock::now() < until)
    if (cancel_requested()) throw Cancelled();
}

namespace {
thread_local TuneSearch* innermost_search = nullptr;
}

TuneSearch::TuneSearch(Selector selects, Progress progress)
    : no_replay_("TINYLENS_NOREPLAY", "1"),
      selects_(std::move(selects)),
      progress_(std::move(progress)),
      parent_(innermost_search) {
  innermost_search = this;
}
TuneSearch::~TuneSearch() { innermost_search = parent_; }
TuneSearch* TuneSearch::innermost() { return innermost_search; }

bool TuneSearch::selects(const RenderedKernel& r, const KernelPlan& plan) const {
  return !selects_ || selects_(r.name, plan.output->shape);
}

void TuneSearch::announce(const std::vector<KernelPlan>& plans, const std::vector<RenderedKernel>& rendered) {
  TuneSearch* s = innermost_search;
  if (!s) return;
  size_t n = 0;
  for (size_t p = 0; p < plans.size(); ++p)
    n += !rendered[p].candidates.empty() && numel(plans[p].output->shape) > 0 && s->selects(rendered[p], plans[p]);
  if (n == 0) return;
  s->total_ += n;
  if (s->progress_) s->progress_(s->done_, s->total_);
}

void TuneSearch::commit() {
  for (const auto& [path, choice] : pending_) write_choice(path, choice);
  pending_.clear();
  settings_changed();
}

bool tune_enabled() {
  return innermost_search || setting_is_on("TINYLENS_TUNE");
}

bool retune_requested() {
  return setting_equals("TINYLENS_TUNE", "retune");
}

void set_tune_clock(TuneClock clock) {
  std::lock_guard lock(clock_mutex);
  installed_clock() = std::move(clock);
}

size_t tune_searches() { return search_count.load(); }

int tune_weight_copies(size_t bytes) {
  if (bytes < kRotateFrom || bytes >= kEvictBytes) return 1;
  return int(std::min<size_t>(kEvictBytes / bytes + 1, kMaxCopies));
}

std::vector<TemplateKernel> tune_candidates(const RenderedKernel& r) {
  if (r.candidates.empty()) return {};
  std::vector<TemplateKernel> all{r};
  all.front().candidates.clear();
  all.front().label = "default";
  all.insert(all.end(), r.candidates.begin(), r.candidates.end());
  return all;
}

TuneOutcome tune_kernel(Device& device, const KernelPlan& plan, RenderedKernel& r,
                        const std::function<std::shared_ptr<Program>(const TemplateKernel&)>& program_of) {
  TuneOutcome t;
  const auto all = tune_candidates(r);
  if (all.empty() || numel(plan.output->shape) == 0) return t;
  const std::string path = device_cache_path(device, entry_text(all), ".tune");
  TuneSearch* search = innermost_search;
  const bool again = search ? search->selects(r, plan) : retune_requested();
  bool known = false;
  if (!again && search)  // a choice this search made but has not stored yet
    for (const auto& [p, choice] : search->pending_)
      if (p == path) t = choice, known = true;
  if (!again && !known) known = read_choice(path, all, t);
  if (!known && search && !again) {  // left out of the search, never tuned: the default
    r.candidates.clear();
    return TuneOutcome{};
  }
  if (!known) {
    t = TuneOutcome{};
    t.searched = true;
    ++search_count;
    std::vector<std::shared_ptr<Program>> programs;
    for (auto& c : all) programs.push_back(program_of(c));
    const auto best = time_candidates(device, plan, all, programs);
    size_t pick = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      t.seconds.emplace_back(all[i].label, best[i]);
      if (best[i] < best[pick] * (pick == 0 ? kMargin : 1.0)) pick = i;
    }
    t.chosen = all[pick].label;
    if (search) {
      search->pending_.emplace_back(path, t);
      ++search->done_;
      if (search->progress_) search->progress_(search->done_, search->total_);
    } else {
      write_choice(path, t);
    }
  }
  for (auto& c : all)
    if (c.label == t.chosen) static_cast<TemplateKernel&>(r) = c;  // with no candidates
  return t;
}

}  // namespace tl
