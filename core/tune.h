// The kernel autotuner, in tinygrad's spirit but small: a device's renderer
// offers a few renderings of a kernel (RenderedKernel::candidates: for the C
// device's GEMMs, which side the threads split and the library's cache
// blocks; for the GPU templates, the other tile sizes that fit); on the
// kernel's first use the tuner launches each on the real device, with the
// kernel's real sizes, and keeps the fastest. The choice is stored in the
// kernel cache (".tune" entries, runtime/cache.h), so a warm run reads it
// instead of searching again.
//
// Off unless TINYLENS_TUNE is set to something other than "0" (the CLI's
// --tune sets it; scripts/bench turns it on). TINYLENS_TUNE=retune (the
// CLI's --retune) searches every kernel again and replaces the stored
// choice: after a driver update, or when the first search ran on a busy
// machine. Off means no search and no
// stored choice is read either: every kernel is its default rendering, so an
// untuned run computes exactly what it always did. Candidates agree up to
// float rounding (another K block sums in another order).
//
// Candidates run on scratch buffers of the kernel's sizes (zeros), never on
// the realize's own, so which candidate ran can never change a result and
// in-place or aliased outputs are safe. Every candidate of a tuned kernel is
// compiled with the plan (the same list cold and warm, so a warm run finds
// the same batches in the disk cache).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/codegen/render.h"
#include "core/schedule.h"
#include "core/settings.h"

namespace tl {

bool tune_enabled();
bool retune_requested();  // TINYLENS_TUNE=retune

struct TuneOutcome {
  std::string chosen;  // the chosen candidate's label; "" when the kernel has no candidates
  std::vector<std::pair<std::string, double>> seconds;  // every candidate's label and best time
  bool searched = false;  // false: read from the kernel cache
};

// Maps a candidate's measured launch time to the time the tuner compares.
// Tests install a fake clock so that which candidate wins is deterministic;
// nullptr (the default) compares the device's own times.
using TuneClock = std::function<double(const std::string& label, double measured_seconds)>;
void set_tune_clock(TuneClock clock);

// What a tuned realize calls after it has built kernels and before it times
// any: it keeps the host busy for a while first (tune.cpp says why), unless
// a tune clock is installed.
void settle_before_tuning();

// Searches run in this process (tests check that a stored choice is read,
// not searched again, by count rather than by time).
size_t tune_searches();

// How many copies of a kernel's weights (the inputs realized before it, and
// its packed copy of A) the tuner's timed launches rotate over: 1 below an
// L2's size or above a large last-level cache's, else enough (up to 8) that
// the others pass 32 MiB through the cache between two reads of one, so each
// candidate is timed reading its weights from memory, as in a model.
int tune_weight_copies(size_t weight_bytes);

// A search its caller asks for (the window's Re-tune): while alive on this
// thread, tuning is on and every realize plans afresh (TINYLENS_NOREPLAY=1
// for this thread: no plan or Jit capture is replayed or remembered), so
// each kernel of what runs meanwhile passes through tune_kernel. Those that
// `selects` picks (by the kernel's name and output shape) are searched again;
// the others keep their stored choice, or their default rendering when none
// is stored (not searched). `progress(done, total)` is told on this thread:
// when a realize finds kernels to search (total grows; a model realizes in
// pieces) and after each search. The choices are stored by commit() alone:
// a search cancelled (the cancel flag is checked between candidates'
// launches) or failed leaves every stored choice as it was. After a commit,
// tuned runs plan again (settings_changed), so they read the new choices.
class TuneSearch {
 public:
  using Selector = std::function<bool(const std::string& kernel, const Shape& output_shape)>;
  using Progress = std::function<void(size_t done, size_t total)>;
  TuneSearch(Selector selects, Progress progress);
  ~TuneSearch();
  TuneSearch(const TuneSearch&) = delete;
  TuneSearch& operator=(const TuneSearch&) = delete;
  void commit();
  size_t searched() const { return done_; }
  static TuneSearch* innermost();  // on this thread; nullptr when none

  // Called by realize before it tunes `plans`: the ones this search times.
  static void announce(const std::vector<KernelPlan>& plans, const std::vector<RenderedKernel>& rendered);

 private:
  friend TuneOutcome tune_kernel(Device&, const KernelPlan&, RenderedKernel&,
                                 const std::function<std::shared_ptr<Program>(const TemplateKernel&)>&);
  bool selects(const RenderedKernel& r, const KernelPlan& plan) const;
  SettingOverride no_replay_;
  Selector selects_;
  Progress progress_;
  TuneSearch* parent_;
  size_t done_ = 0, total_ = 0;
  std::vector<std::pair<std::string, TuneOutcome>> pending_;  // cache path, choice
};

// Every rendering of `r` the tuner may choose: the default first, then its
// candidates. What a tuned plan compiles.
std::vector<TemplateKernel> tune_candidates(const RenderedKernel& r);

// Chooses r's rendering among tune_candidates(r): the stored choice, else the
// fastest on `device` (and stores it). Rewrites r's source, entry, integer
// arguments, launch size and packed copy with the chosen candidate's.
// `program_of` returns a candidate's compiled program.
TuneOutcome tune_kernel(Device& device, const KernelPlan& plan, RenderedKernel& r,
                        const std::function<std::shared_ptr<Program>(const TemplateKernel&)>& program_of);

}  // namespace tl
