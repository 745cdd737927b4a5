#include "core/progress.h"

#include <algorithm>

namespace tl {

namespace {
thread_local const std::atomic<bool>* cancel_flag = nullptr;
thread_local CompileProgress* compile_progress = nullptr;
thread_local FirstLaunches* first_launches = nullptr;
}  // namespace

void set_cancel_flag(const std::atomic<bool>* flag) { cancel_flag = flag; }
bool cancel_requested() { return cancel_flag && cancel_flag->load(); }
const std::atomic<bool>* cancel_flag_of_this_thread() { return cancel_flag; }

CompileProgress::CompileProgress(std::function<void(size_t, size_t)> report)
    : report_(std::move(report)), parent_(compile_progress) {
  compile_progress = this;
}

CompileProgress::~CompileProgress() { compile_progress = parent_; }

void CompileProgress::kernels_found(size_t n) {
  if (!compile_progress || n == 0) return;
  compile_progress->total_ += n;
  if (compile_progress->report_) compile_progress->report_(compile_progress->ready_, compile_progress->total_);
}

// One call per kernel, even when several finished at once, so a listener
// sees every count.
void CompileProgress::kernels_ready(size_t n) {
  for (size_t i = 0; i < n && compile_progress; ++i) {
    CompileProgress& p = *compile_progress;
    p.ready_ = std::min(p.ready_ + 1, p.total_);
    if (p.report_) p.report_(p.ready_, p.total_);
  }
}

FirstLaunches::FirstLaunches() : parent_(first_launches) { first_launches = this; }
FirstLaunches::~FirstLaunches() { first_launches = parent_; }
FirstLaunches* FirstLaunches::innermost() { return first_launches; }

void FirstLaunches::count_the_rest() {
  for (Program* p : waiting) p->awaits_first_launch = false;
  CompileProgress::kernels_ready(waiting.size());
  waiting.clear();
}

void count_first_launch(Program& program) {
  if (!program.awaits_first_launch.load(std::memory_order_relaxed)) return;
  program.awaits_first_launch = false;
  if (first_launches && first_launches->waiting.erase(&program)) CompileProgress::kernels_ready(1);
}

}  // namespace tl
