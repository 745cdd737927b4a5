#include "core/replay.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <list>
#include <mutex>

#include "core/progress.h"
#include "core/settings.h"
#include "core/trace.h"

namespace tl {

void KeyWriter::real(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  num(int64_t(bits));
}

void KeyWriter::text(const std::string& s) {
  num(int64_t(s.size()));
  out += s;
}

void KeyWriter::shape(const Node& n) {
  num(int64_t(n.dtype));
  num(int64_t(n.shape.size()));
  for (auto d : n.shape) num(d);
}

void KeyWriter::node(const Node& n, const std::vector<int>& ids) {
  num(int64_t(n.op));
  num(n.requires_grad);  // the scheduler fuses a GEMM's epilogue only where no gradient flows
  shape(n);
  num(int64_t(n.arg.size()));
  for (auto a : n.arg) num(a);
  real(n.value);
  num(int64_t(n.src.size()));
  for (int id : ids) num(id);
  if (n.matmul)
    for (int64_t v : hint_key(*n.matmul)) num(v);
}

namespace {

// Edges the walk follows: every source, a GEMM's operands and the image a
// convolution's B may be gathered from (which device has a GEMM template,
// and whether it gathers, decides which the scheduler uses; the key covers
// all). Counted and indexed rather than listed: the walk asks for
// them at every step, and a list allocated each time cost more than the rest
// of the key.
size_t edge_count(const Node& n) { return n.src.size() + (n.matmul ? (n.matmul->image ? 3 : 2) : 0); }
const NodeRef& edge(const Node& n, size_t i) {
  if (i < n.src.size()) return n.src[i];
  i -= n.src.size();
  return i == 0 ? n.matmul->a : i == 1 ? n.matmul->b : n.matmul->image;
}

}  // namespace

GraphKey graph_key(const std::vector<NodeRef>& roots, const std::string& device) {
  // Sized like this thread's last key: a training step's is 170 KB over 1600
  // nodes, and growing it there cost a tenth of the walk.
  static thread_local size_t last_text = 64 * 1024, last_index = 1024;
  GraphKey g;
  g.text.reserve(last_text);
  g.index.reserve(last_index);
  KeyWriter w{g.text};
  w.text(device);
  w.text(settings_key());  // what schedules, renders and tunes it (settings.h)
  auto id_of = [&](const NodeRef& n) -> int {
    if (auto it = g.index.find(n.get()); it != g.index.end()) return it->second;
    int id = ~int(g.inputs.size());  // only realized nodes are met here unvisited
    g.index[n.get()] = id;
    g.inputs.push_back(n);
    w.num(-1);
    w.shape(*n);
    w.text(n->buffer->device()->name());
    return id;
  };
  // Iterative post-order walk: model graphs are too deep for recursion.
  std::vector<std::pair<NodeRef, size_t>> stack;
  std::vector<int> ids;
  for (auto& root : roots) {
    if (root->realized() || g.index.count(root.get())) continue;
    g.index[root.get()] = 0;  // marks "on the stack"; renumbered when finished
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      const size_t count = edge_count(*n);
      if (i < count) {
        const NodeRef& s = edge(*n, i++);
        if (!s->realized() && !g.index.count(s.get())) {
          g.index[s.get()] = 0;
          stack.push_back({s, 0});
        }
        continue;
      }
      ids.clear();
      for (size_t e = 0; e < count; ++e) {
        const NodeRef& s = edge(*n, e);
        ids.push_back(s->realized() ? id_of(s) : g.index.at(s.get()));
      }
      w.node(*n, ids);
      g.index[n.get()] = int(g.nodes.size());
      g.nodes.push_back(n);
      stack.pop_back();
    }
  }
  w.num(-2);
  for (auto& root : roots) w.num(root->realized() ? -1 : g.index.at(root.get()));
  last_text = g.text.size() + 64, last_index = g.index.size();
  return g;
}

namespace {

// Waits for the device's queue on every way out of run_plan: kernels already
// enqueued write into buffers and time slots that must outlive them.
struct QueueWait {
  Device& device;
  bool done = false;
  void finish() {
    done = true;
    device.finish();
  }
  ~QueueWait() {
    if (done) return;
    try {
      device.finish();
    } catch (...) {  // the error that brought us here is the one to report
    }
  }
};

std::shared_ptr<const KernelInfo> renumbered(const Plan::Kernel& k, const GraphKey& g) {
  auto info = std::make_shared<KernelInfo>(*k.info);
  info->cache_hit = true;  // nothing was compiled for this launch
  info->node_ids.clear();
  for (int f : k.fused) info->node_ids.push_back(g.nodes[size_t(f)]->id);
  info->output_node = g.nodes[size_t(k.output)]->id;
  info->input_nodes.clear();
  for (int a : k.args)
    if (a < 0) info->input_nodes.push_back(g.inputs[size_t(~a)]->id);
  return info;
}

// The buffer a kernel keeps its packed copy of `source` in (PackedOperand):
// made on first use with a zeroed header, which tells the kernel to fill it;
// it lives as long as `source`, whose buffer owns it.
Buffer* packed_copy(Buffer& source, const PackedOperand& p, Device& device) {
  const size_t bytes = size_t(p.bytes);
  return source
      .derived(p.key,
               [&] {
                 auto b = device.allocate(bytes);
                 static const unsigned char zeros[64] = {};
                 device.copy_in(*b, zeros, std::min(sizeof zeros, bytes));
                 return b;
               })
      .get();
}

// What launch i of `plan` writes and reads, by buffer: a part of an
// assembled concatenation is named by the buffer it is a part of.
ProfileRecord::Buffers buffers_used(const Plan& plan, size_t i, const std::vector<std::shared_ptr<Buffer>>& out,
                                    const LaunchArgs& args) {
  auto whole = [&](size_t k) {
    while (plan.kernels[k].into >= 0) k = size_t(plan.kernels[k].into);
    return k;
  };
  ProfileRecord::Buffers b;
  const size_t root = whole(i);
  b.output = reinterpret_cast<uintptr_t>(out[root].get());
  b.output_bytes = out[root]->bytes(), b.value_bytes = plan.kernels[root].bytes;
  b.kept = plan.kernels[root].keep;
  const auto& a = plan.kernels[i].args;
  for (size_t j = 0; j < a.size() && j + 1 < args.buffers.size(); ++j) {
    const Buffer* buffer = args.buffers[j + 1];
    if (a[j] >= 0) {
      const size_t from = whole(size_t(a[j]));
      b.inputs.push_back({reinterpret_cast<uintptr_t>(out[from].get()), out[from]->bytes()});
    } else {
      b.inputs.push_back({reinterpret_cast<uintptr_t>(buffer), buffer->bytes()});
    }
  }
  return b;
}

}  // namespace

void run_plan(const Plan& plan, const GraphKey& graph, Device& device, bool replayed, double compile_seconds,
              double started) {
  const size_t n = plan.kernels.size();
  std::vector<std::shared_ptr<Buffer>> out(n);
  std::vector<double> seconds(n, 0.0);
  const bool timed = ProfileCapture::timed();
  // Only a timed capture (a trace, a kernel table) pays for these: a
  // training step that only counts its launches does not.
  std::vector<std::pair<double, double>> queued(timed ? n : 0);  // enqueue time, duration
  std::vector<ProfileRecord::Buffers> used(queued.size());                          // for core/memory.h
  {
    QueueWait wait{device};
    LaunchArgs args;
    // Buffers of outputs that no later kernel reads (Plan::Kernel::frees),
    // by size. The queue runs kernels in order, so a later kernel may write
    // one as soon as the last reader is enqueued. Only outputs that are not
    // kept take one (a kept node's buffer must be its own size): the
    // smallest that fits, however much larger, so a large buffer keeps
    // serving and stays in the cache (SqueezeNet 3.08 -> 2.97 ms, Lite0's
    // export 5.8 -> 5.4 ms against taking one at most twice the size).
    std::multimap<size_t, std::shared_ptr<Buffer>> spare;
    auto output_buffer = [&](const Plan::Kernel& k) {
      if (!k.keep)
        if (auto it = spare.lower_bound(k.bytes); it != spare.end()) {
          auto b = std::move(it->second);
          spare.erase(it);
          b->forget_derived();
          return b;
        }
      return device.acquire(k.bytes);
    };
    // A kernel's output, made when it runs or when the first of an assembled
    // concatenation's pieces does: a part of a later concatenation's buffer
    // (Plan::Kernel::into, which may itself be a part of another), or a
    // buffer of its own.
    std::function<const std::shared_ptr<Buffer>&(size_t)> output_of = [&](size_t i) -> const std::shared_ptr<Buffer>& {
      if (!out[i]) {
        const Plan::Kernel& k = plan.kernels[i];
        out[i] = k.into >= 0 ? device.view(output_of(size_t(k.into)), k.into_offset, k.bytes) : output_buffer(k);
      }
      return out[i];
    };
    for (size_t i = 0; i < n; ++i) {
      if (cancel_requested()) throw Cancelled();
      const Plan::Kernel& k = plan.kernels[i];
      output_of(i);
      if (!k.info->assembled) {  // else its inputs' kernels wrote it
        args.buffers.assign(1, out[i].get());
        for (int a : k.args) {
          Buffer* b = a >= 0 ? out[size_t(a)].get() : graph.inputs[size_t(~a)]->buffer.get();
          if (b->device() != &device)
            throw DeviceError("kernel " + k.info->name + " on " + device.name() + " reads a tensor that lives on " +
                              b->device()->name() + "; use .to(\"" + device.name() + "\") first");
          args.buffers.push_back(b);
        }
        const size_t operands = args.buffers.size();
        for (const auto& p : k.packed)
          args.buffers.push_back(packed_copy(*args.buffers.at(std::min(size_t(p.operand), operands - 1)), p, device));
        if (!used.empty()) used[i] = buffers_used(plan, i, out, args);
        for (int d = 0; d < 3; ++d) args.global[d] = k.info->global[d], args.local[d] = k.info->local[d];
        args.ints = k.info->ints, args.int_bytes = k.int_bytes;
        if (!k.empty) {
          const double t = queued.empty() ? 0 : steady_seconds();
          k.program->enqueue(args, timed ? &seconds[i] : nullptr);
          if (!queued.empty()) queued[i] = {t, steady_seconds() - t};
          count_first_launch(*k.program);  // compile progress, where builds end at first launch
        }
      }
      for (int f : k.frees) {
        std::shared_ptr<Buffer>& freed = out[size_t(f)];
        if (plan.kernels[size_t(f)].into >= 0) freed.reset();  // a part of a live buffer: it serves no other kernel
        else spare.emplace(freed->bytes(), std::move(freed));
      }
    }
    if (timed || !device.realize_may_return_early()) {
      TraceScope span("wait");
      wait.finish();
    }
    else wait.done = true;  // the next read waits (Device::realize_may_return_early)
  }
  if (ProfileCapture::active()) {
    for (size_t i = 0; i < n; ++i) {
      ProfileRecord record;
      // Renumbering copies the info (its source too): only a timed capture
      // pays for it (ProfileCapture; 0.1 ms of a training step on the H200).
      record.kernel = replayed && timed ? renumbered(plan.kernels[i], graph) : plan.kernels[i].info;
      record.seconds = seconds[i];
      record.replayed = replayed;
      if (timed) {
        record.enqueued = queued[i].first, record.enqueue_seconds = queued[i].second;
        record.buffers = used[i];
      }
      if (i == 0) record.realize_wall = steady_seconds() - started, record.compile_seconds = compile_seconds;
      ProfileCapture::add(record);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!plan.kernels[i].keep) continue;
    Node& node = *graph.nodes[size_t(plan.kernels[i].output)];
    node.buffer = std::move(out[i]);
    // A realized node that no gradient will flow through forgets how it was
    // made, so long-running loops do not keep every step's graph alive.
    if (!node.requires_grad) {
      node.src.clear();
      node.matmul.reset();
    }
  }
}

bool replay_enabled() {
  return !setting_is_on("TINYLENS_NOREPLAY");
}

bool reuse_enabled() {
  return !setting_is_on("TINYLENS_NOREUSE");
}

namespace {
struct PlanCache {
  std::mutex mutex;
  std::list<std::pair<std::string, std::shared_ptr<const Plan>>> lru;  // most recent first
  std::unordered_map<std::string_view, decltype(lru)::iterator> index;  // views into lru's keys
};
PlanCache& plan_cache() {
  static PlanCache c;
  return c;
}
}  // namespace

std::shared_ptr<const Plan> find_plan(const std::string& key) {
  auto& c = plan_cache();
  std::lock_guard lock(c.mutex);
  auto it = c.index.find(key);
  if (it == c.index.end()) return nullptr;
  c.lru.splice(c.lru.begin(), c.lru, it->second);
  return it->second->second;
}

void remember_plan(const std::string& key, std::shared_ptr<const Plan> plan) {
  auto& c = plan_cache();
  std::lock_guard lock(c.mutex);
  if (auto it = c.index.find(key); it != c.index.end()) {
    it->second->second = std::move(plan);
    c.lru.splice(c.lru.begin(), c.lru, it->second);
    return;
  }
  c.lru.emplace_front(key, std::move(plan));
  c.index.emplace(c.lru.front().first, c.lru.begin());
  if (c.lru.size() > kMaxPlans) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
}

}  // namespace tl
