#include "core/realize.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <optional>
#include <mutex>
#include <climits>
#include <set>
#include <unordered_map>
#include <thread>

#include "core/assemble.h"
#include "core/codegen/render.h"
#include "core/trace.h"
#include "core/error.h"
#include "core/codegen/templates.h"
#include "core/replay.h"
#include "core/runtime/registry.h"
#include "core/runtime/together.h"
#include "core/schedule.h"
#include "core/tune.h"

namespace tl {

namespace {
thread_local RealizeObserver* realize_observer = nullptr;
thread_local RealizeTogether* realize_together = nullptr;

std::mutex memo_mutex;
std::map<std::pair<std::string, std::string>, std::shared_ptr<Program>>& memo() {
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<Program>> m;
  return m;
}

// KernelInfo::origins of a kernel that computes `fused`.
std::vector<KernelInfo::Origin> origins_of(const std::vector<NodeRef>& fused) {
  std::map<int32_t, double> work;  // origin -> FLOPs
  double total = 0;
  for (const auto& n : fused) {
    if (n->op == Op::Const || n->op == Op::Buffer || (n->origin < 0 && is_movement(n->op))) continue;
    const MatmulHint* h = n->matmul.get();
    const double w = h                 ? double(h->batch) * double(h->m) * double(h->n) * double(h->k) * 2
                     : is_reduce(n->op) ? double(numel(n->src[0]->shape))
                     : is_movement(n->op) ? 0.0
                                          : double(numel(n->shape));
    work[n->origin] += w;
    total += w;
  }
  std::vector<KernelInfo::Origin> out;
  if (work.size() == 1 && work.begin()->first < 0) return out;  // no model node: nothing to map to
  for (const auto& [origin, w] : work)
    out.push_back({origin, float(total > 0 ? w / total : 1.0 / double(work.size()))});
  return out;
}

std::shared_ptr<KernelInfo> describe(const KernelPlan& plan, const RenderedKernel& r, const Device& device) {
  auto info = std::make_shared<KernelInfo>();
  info->name = r.name;
  info->device = device.name();
  info->ops = r.ops;
  for (auto& n : plan.fused) info->node_ids.push_back(n->id);
  info->origins = origins_of(plan.fused);
  info->output_node = plan.output->id;
  for (auto& n : plan.inputs) info->input_nodes.push_back(n->id);
  info->output_shape = shape_str(plan.output->shape);
  for (int i = 0; i < 3; ++i) info->global[i] = r.global[i], info->local[i] = r.local[i];
  info->flops = r.flops;
  info->bytes = r.bytes;
  info->source = r.source;
  info->entry = r.entry;
  info->ints = r.ints;
  return info;
}
}  // namespace

RealizeTogether::RealizeTogether() : parent_(realize_together) { realize_together = this; }
RealizeTogether::~RealizeTogether() { realize_together = parent_; }

bool RealizeTogether::collect(const std::vector<NodeRef>& roots, std::function<void()> then) {
  if (!realize_together) return false;
  auto& r = realize_together->roots_;
  r.insert(r.end(), roots.begin(), roots.end());
  if (then) realize_together->then_.push_back(std::move(then));
  return true;
}

void realize_then(const std::vector<NodeRef>& roots, std::function<void()> then) {
  if (RealizeTogether::collect(roots, then)) return;
  realize_nodes(roots);
  then();
}

void RealizeTogether::realize() {
  realize_together = parent_;  // the realize below must run, not collect
  struct Restore {
    RealizeTogether* self;
    ~Restore() { realize_together = self; }
  } restore{this};
  auto roots = std::move(roots_);
  auto then = std::move(then_);
  roots_.clear();
  then_.clear();
  realize_nodes(roots);
  for (auto& f : then) f();
}

RealizeObserver::RealizeObserver(std::function<void(const std::vector<NodeRef>&)> see)
    : see_(std::move(see)), parent_(realize_observer) {
  realize_observer = this;
}

RealizeObserver::~RealizeObserver() { realize_observer = parent_; }

void RealizeObserver::notify(const std::vector<NodeRef>& roots) {
  if (realize_observer && realize_observer->see_) realize_observer->see_(roots);
}

static void remember(Device& device, const std::string& source, std::shared_ptr<Program> program) {
  std::lock_guard lock(memo_mutex);
  memo()[{device.name(), source}] = std::move(program);
}

// Compiles through the in-process memo and the disk cache; `hit` says
// whether nothing new was compiled.
static std::shared_ptr<Program> compile_kernel(Device& device, const std::string& name, const std::string& source,
                                               bool* hit = nullptr) {
  {
    std::lock_guard lock(memo_mutex);
    if (auto it = memo().find({device.name(), source}); it != memo().end()) {
      if (hit) *hit = true;
      return it->second;
    }
  }
  auto program = device.compile(name, source);
  if (hit) *hit = program->cache_hit;
  remember(device, source, program);
  return program;
}

// What a kernel's source depends on, as text: the fused nodes with their
// arguments, their hints (a product's or a pool's window, hint_key) and how
// they connect, the inputs' shapes and types, which input is constant and
// which fused node is a merged pool. Equal signatures render to equal
// source, so a model run a second time skips rendering. The kernel's name
// is not part of it: names are labels (GEMM_..._MAXPOOL_9 is one name for
// every padding of a 3x3 pool).
static std::string plan_signature(const KernelPlan& plan) {
  std::unordered_map<const Node*, int> ref;  // inputs ~i, fused nodes f
  for (size_t i = 0; i < plan.inputs.size(); ++i) ref[plan.inputs[i].get()] = ~int(i);
  std::string sig;
  KeyWriter w{sig};
  w.num(int64_t(plan.kind));
  for (auto& in : plan.inputs) w.shape(*in);
  std::vector<int> ids;
  for (size_t f = 0; f < plan.fused.size(); ++f) {
    const Node& n = *plan.fused[f];
    ids.clear();
    for (auto& src : n.src) ids.push_back(ref.count(src.get()) ? ref[src.get()] : INT_MIN);
    w.node(n, ids);
    w.num(&n == plan.pool.get());
    ref[&n] = int(f);
  }
  if (plan.kind == KernelPlan::Kind::Gemm) {
    const MatmulHint& h = *plan.gemm().matmul;  // its numbers are fused[0]'s, above
    w.num(plan.inputs[0]->realized());  // a constant A or B: render_kernel may read it packed
    w.num(plan.inputs[1]->realized());
    w.num(plan.inputs[1] == h.image);   // B read from a convolution's image
  }
  return sig;
}

// Rendered kernels by device and plan signature (forget_compiled_kernels
// clears them too).
static std::mutex rendered_mutex;
static std::map<std::pair<std::string, std::string>, RenderedKernel> rendered_kernels;

static RenderedKernel render_cached(const KernelPlan& plan, const Device& device) {
  auto key = std::make_pair(device.name(), settings_key() + plan_signature(plan));
  {
    std::lock_guard lock(rendered_mutex);
    if (auto it = rendered_kernels.find(key); it != rendered_kernels.end()) return it->second;
  }
  RenderedKernel r = render_kernel(plan, device);
  std::lock_guard lock(rendered_mutex);
  rendered_kernels.emplace(std::move(key), r);
  return r;
}

// One compiler job: a kernel alone, or several built together (one
// program). A batch that does not compile is built again kernel by kernel,
// so that the error names the broken kernel and carries its own log.
static void compile_job(Device& device, const std::vector<const KernelSource*>& job) {
  if (job.size() > 1) {
    std::vector<KernelSource> batch;
    for (auto* k : job) batch.push_back(*k);
    try {
      auto programs = device.compile_together(with_unique_names(batch));
      for (size_t i = 0; i < job.size(); ++i) remember(device, job[i]->source, programs[i]);
      return;
    } catch (const CompileError&) {
      // built alone below
    }
  }
  std::exception_ptr first;
  for (auto* k : job) {
    try {
      compile_kernel(device, k->name, k->source);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// Runs the jobs side by side, one compiler per core. The realizing thread
// only waits and reports progress, so CompileProgress is told on the thread
// that installed it. The first error is rethrown.
static void compile_in_parallel(Device& device, const std::vector<std::vector<const KernelSource*>>& jobs,
                                const std::function<void(size_t)>& built) {
  if (jobs.size() == 1) {  // no thread for a single job
    compile_job(device, jobs[0]);
    built(jobs[0].size());
    return;
  }
  std::atomic<size_t> next{0};
  std::mutex mutex;  // guards the four below
  std::condition_variable changed;
  size_t compiled = 0;  // kernels, not jobs
  unsigned running = 0;
  std::exception_ptr error;
  const std::atomic<bool>* cancel = cancel_flag_of_this_thread();  // read it on this thread
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      if (cancel && cancel->load()) break;
      std::exception_ptr failed;
      try {
        compile_job(device, jobs[i]);
      } catch (...) {
        failed = std::current_exception();
      }
      std::lock_guard lock(mutex);
      if (failed && !error) error = failed;
      compiled += jobs[i].size();
      changed.notify_one();
    }
    std::lock_guard lock(mutex);
    --running;
    changed.notify_one();
  };
  unsigned n = std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()), unsigned(jobs.size()));
  std::vector<std::jthread> threads;  // joined on every way out of this scope
  {
    std::unique_lock lock(mutex);
    running = n;
    for (unsigned t = 0; t < n; ++t) threads.emplace_back(worker);
    for (size_t reported = 0; running > 0 || reported < compiled;) {
      changed.wait(lock, [&] { return running == 0 || compiled > reported; });
      size_t now = compiled - reported;
      reported = compiled;
      lock.unlock();
      built(now);
      lock.lock();
    }
  }
  if (error) std::rethrow_exception(error);
}

// A device computes float64 only when it reports fp64 (DeviceInfo); elsewhere
// the work is refused, never quietly done in float32.
static void require_dtypes(const KernelPlan& plan, const Device& device) {
  if (device.info().fp64) return;
  for (const auto* nodes : {&plan.fused, &plan.inputs})
    for (const auto& n : *nodes)
      if (n->dtype == DType::f64)
        throw DeviceError("device " + device.name() + " has no fp64 support: it cannot compute " +
                          dtype_name(n->dtype) + " (" + op_name(n->op) + " of shape " + shape_str(n->shape) +
                          "); cast to float32 first or choose a device that reports fp64");
}

bool batching_enabled() {
  return !setting_is_on("TINYLENS_NOBATCH");
}

bool pool_fusion_enabled() {
  return !setting_is_on("TINYLENS_NOPOOLFUSION");
}

void forget_compiled_kernels() {
  {
    std::lock_guard lock(memo_mutex);
    memo().clear();
  }
  std::lock_guard lock(rendered_mutex);
  rendered_kernels.clear();
}

// A cold model run is dominated by compilation (realize.h says how).
size_t compile_new_kernels(Device& device, const std::vector<KernelSource>& kernels) {
  // Where the device builds at first launch, a kernel is ready once launched
  // (FirstLaunches), and so is one that an earlier realize built but never
  // launched (it was cancelled); outside a realize, nothing will launch a
  // kernel: it is ready when built.
  FirstLaunches* first_launches = FirstLaunches::innermost();
  const bool at_launch = device.builds_at_first_launch() && first_launches;
  std::vector<const KernelSource*> fresh;
  std::vector<Program*> unlaunched;
  {
    std::lock_guard lock(memo_mutex);
    std::set<std::string> seen;
    for (auto& k : kernels) {
      if (!seen.insert(k.source).second) continue;
      auto it = memo().find({device.name(), k.source});
      if (it == memo().end()) fresh.push_back(&k);
      else if (at_launch && it->second->awaits_first_launch) unlaunched.push_back(it->second.get());
    }
  }
  CompileProgress::kernels_found(fresh.size() + unlaunched.size());
  if (at_launch) first_launches->waiting.insert(unlaunched.begin(), unlaunched.end());
  if (fresh.empty()) return 0;
  auto built = [&](size_t n) {
    if (!at_launch) CompileProgress::kernels_ready(n);
  };
  struct AwaitLaunches {  // on every way out, also a cancel's
    Device& device;
    const std::vector<const KernelSource*>& fresh;
    bool on;
    ~AwaitLaunches() {
      if (!on) return;
      std::lock_guard lock(memo_mutex);
      for (auto* k : fresh)
        if (auto it = memo().find({device.name(), k->source}); it != memo().end()) {
          it->second->awaits_first_launch = true;
          FirstLaunches::innermost()->waiting.insert(it->second.get());
        }
    }
  } await_launches{device, fresh, at_launch};
  std::vector<const KernelSource*> missing;
  for (auto* k : fresh) {
    if (auto program = device.find_cached(k->name, k->source)) {
      remember(device, k->source, std::move(program));
      built(1);
    } else {
      missing.push_back(k);
    }
  }
  if (missing.empty() || cancel_requested()) return 0;
  // One job per kernel, or, when the device builds kernels together, one
  // batch per core: fewer compiler runs, and every core still busy.
  std::vector<std::vector<const KernelSource*>> jobs;
  if (device.builds_together() && batching_enabled()) {
    size_t parts = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), missing.size());
    for (size_t p = 0; p < parts; ++p)
      jobs.emplace_back(missing.begin() + missing.size() * p / parts, missing.begin() + missing.size() * (p + 1) / parts);
  } else {
    for (auto* k : missing) jobs.push_back({k});
  }
  compile_in_parallel(device, jobs, built);
  return missing.size();
}

// Which outputs the plan keeps, and after which kernel each other one's
// buffer is free for later kernels (Plan::Kernel::keep and frees).
static void plan_buffer_reuse(Plan& result, const std::vector<KernelPlan>& plans, const std::vector<NodeRef>& roots) {
  if (!reuse_enabled()) return;
  std::set<const Node*> root_nodes;
  for (auto& r : roots) root_nodes.insert(r.get());
  std::vector<int> last_reader(plans.size(), -1);
  for (size_t p = 0; p < plans.size(); ++p) {
    const Node& out = *plans[p].output;
    result.kernels[p].keep = root_nodes.count(&out) || out.requires_grad;
    for (int a : result.kernels[p].args)
      if (a >= 0) last_reader[size_t(a)] = int(p);
  }
  for (size_t p = 0; p < plans.size(); ++p)
    if (!result.kernels[p].keep && last_reader[p] >= 0) result.kernels[size_t(last_reader[p])].frees.push_back(int(p));
}

// Schedules, renders and compiles the kernels of one device's graph into a
// plan that run_plan can launch, now and (through the plan cache) again.
static std::shared_ptr<Plan> make_plan(const std::vector<NodeRef>& group, const GraphKey& graph, Device& device,
                                       double& compile_seconds) {
  std::function<bool(const KernelPlan&)> pools;  // none: no pool is merged (TINYLENS_NOPOOLFUSION)
  if (pool_fusion_enabled()) pools = [&](const KernelPlan& p) { return gemm_pools_in_kernel(p, device); };
  std::optional<TraceScope> span(std::in_place, "schedule");
  const auto rows = [&](const KernelPlan& p) { return rows_in_kernel(p, device); };
  auto plans = schedule(group, has_gemm_template(device), gemm_template_gathers(device), pools, rows);
  for (auto& plan : plans) require_dtypes(plan, device);
  std::vector<RenderedKernel> rendered;
  std::vector<KernelSource> sources;
  const bool tune = tune_enabled();  // tuned: every candidate is compiled too (core/tune.h)
  span.emplace("render");
  for (auto& plan : plans) {
    rendered.push_back(render_cached(plan, device));
    sources.push_back({entry_of(rendered.back()), rendered.back().source});
    for (auto& c : tune ? rendered.back().candidates : std::vector<TemplateKernel>{})
      sources.push_back({c.entry.empty() ? rendered.back().name : c.entry, c.source});
  }
  span.emplace(TraceCapture::active() ? "compile " + std::to_string(sources.size()) + " kernels" : std::string());
  double t0 = steady_seconds();
  const size_t built = compile_new_kernels(device, sources);
  // A cancel stopped the compilers: the kernels left are not built one by
  // one below, only to be thrown away.
  if (cancel_requested()) throw Cancelled();
  if (tune && built > 0 && sources.size() > plans.size()) settle_before_tuning();  // some kernel has candidates
  std::vector<TuneOutcome> tuned(plans.size());
  if (tune) TuneSearch::announce(plans, rendered);
  for (size_t p = 0; tune && p < plans.size(); ++p)
    tuned[p] = tune_kernel(device, plans[p], rendered[p], [&](const TemplateKernel& c) {
      return compile_kernel(device, c.entry.empty() ? rendered[p].name : c.entry, c.source);
    });
  compile_seconds = steady_seconds() - t0;  // a search is a one-time cost too, like a compile
  span.reset();
  auto result = std::make_shared<Plan>();
  std::unordered_map<const Node*, int> kernel_of;  // node -> the kernel that computes it
  for (size_t p = 0; p < plans.size(); ++p) {
    const KernelPlan& plan = plans[p];
    const RenderedKernel& r = rendered[p];
    auto info = describe(plan, r, device);
    bool hit = false;
    Plan::Kernel k;
    k.program = compile_kernel(device, entry_of(r), r.source, &hit);
    info->build_log = k.program->build_log;
    info->cache_hit = hit;
    info->tuned = tuned[p].chosen, info->tune_candidates = tuned[p].seconds;
    info->tune_searched = tuned[p].searched;
    k.info = info;
    k.int_bytes = r.int_bytes;
    k.packed = r.packed;
    const Node& out = *plan.output;
    k.bytes = size_t(numel(out.shape)) * dtype_size(out.dtype);
    k.empty = numel(out.shape) == 0;
    k.output = graph.index.at(&out);
    for (auto& in : plan.inputs) k.args.push_back(in->realized() ? graph.index.at(in.get()) : kernel_of.at(in.get()));
    for (auto& f : plan.fused) k.fused.push_back(graph.index.at(f.get()));
    kernel_of[&out] = int(p);
    result->kernels.push_back(std::move(k));
  }
  plan_buffer_reuse(*result, plans, group);
  assemble_concatenations(*result, plans, device);
  return result;
}

static thread_local uint64_t thread_realizes = 0;
uint64_t realizes_on_this_thread() { return thread_realizes; }

void realize_nodes(const std::vector<NodeRef>& roots) {
  double started = steady_seconds();
  std::map<std::string, std::vector<NodeRef>> by_device;
  std::vector<NodeRef> pending;
  for (auto& r : roots)
    if (r && !r->realized()) {
      by_device[r->device].push_back(r);
      pending.push_back(r);
    }
  if (pending.empty()) return;
  ++thread_realizes;
  if (RealizeTogether::collect(pending)) return;
  TraceScope span("realize");
  RealizeObserver::notify(pending);
  bool replay = replay_enabled();
  for (auto& [name, group] : by_device) {
    Device& device = Registry::instance().get_available(name);
    GraphKey graph = graph_key(group, name);
    if (auto plan = replay ? find_plan(graph.text) : nullptr) {
      run_plan(*plan, graph, device, true, 0, started);
    } else {
      double compile_seconds = 0;
      FirstLaunches first_launches_of_this_plan;
      auto fresh = make_plan(group, graph, device, compile_seconds);
      if (replay) remember_plan(graph.text, fresh);
      run_plan(*fresh, graph, device, false, compile_seconds, started);
      first_launches_of_this_plan.count_the_rest();
    }
    started = steady_seconds();  // the next device's wall time starts here
  }
}

}  // namespace tl
