// Replay: a realize remembers what it did, so the same work on new data
// costs only its kernels.
//
// The plan. A realize on one device turns its unrealized graph into kernels
// (schedule, render, compile) and then launches them. Everything in that
// first part depends only on the graph's *structure*, never on the values in
// its input buffers. A Plan is the result of that first part: for each kernel
// the compiled program, its launch sizes, its output size, which node of the
// graph receives the output, and where each argument comes from (an input
// buffer of the graph, or the output of an earlier kernel of the plan).
//
// The key. GraphKey walks the unrealized graph from the roots (sources and a
// GEMM's operands, stopping at realized nodes) and writes down everything a
// kernel's source or the scheduler's choices could depend on: each node's op,
// dtype, shape, arguments, constant value (constants are baked into kernels),
// how nodes connect (sharing included), the GEMM descriptions, which roots
// were asked for, and for each realized input its dtype, shape and device.
// Two graphs with equal keys schedule to the same kernels; the key of a
// realize that changes any of these (a new batch size, a new constant) is a
// new key and is planned afresh.
//
// When it replays. realize_nodes looks the key up in a small LRU cache of
// plans (kMaxPlans, shared by all threads). On a hit it binds the plan's
// inputs to this graph's realized buffers (the new image, this step's
// weights), allocates fresh output buffers (earlier results are never
// overwritten) and launches: no scheduling, rendering or compile-cache
// lookups. A plan holds programs, never buffers, so nothing it keeps can
// outlive the data it was made for. TINYLENS_NOREPLAY=1 turns replay off.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/codegen/templates.h"
#include "core/ops.h"
#include "core/profile.h"
#include "core/runtime/device.h"

namespace tl {

// A binary key: fixed-width numbers appended raw, fast to build and compared
// byte for byte. graph_key writes the graph's, realize the rendered kernels'.
struct KeyWriter {
  std::string& out;
  void num(int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void real(double v);
  void text(const std::string& s);
  void shape(const Node& n);  // dtype and shape
  // Everything of `n` a kernel made of it reads: op, gradient flag, dtype,
  // shape, arguments, value, the caller's numbers of its sources and other
  // edges (`ids`), and its hint's numbers (hint_key).
  void node(const Node& n, const std::vector<int>& ids);
};

// The unrealized graph under some roots, numbered in a fixed order.
struct GraphKey {
  std::string text;               // the key (binary; compared exactly, not by hash)
  std::vector<NodeRef> nodes;     // unrealized nodes, sources first
  std::vector<NodeRef> inputs;    // realized nodes the graph reads, in walk order
  std::unordered_map<const Node*, int> index;  // node -> position in `nodes` or ~position in `inputs`
};
GraphKey graph_key(const std::vector<NodeRef>& roots, const std::string& device);

struct Plan {
  struct Kernel {
    std::shared_ptr<Program> program;
    std::shared_ptr<const KernelInfo> info;  // its launch sizes and integer arguments too
    int int_bytes = 4;                        // of info->ints (LaunchArgs::int_bytes)
    size_t bytes = 0;         // of the output buffer
    bool empty = false;       // zero elements: allocated but not launched
    int output = 0;           // position in GraphKey::nodes of the node it computes
    std::vector<int> args;    // per input argument: >= 0 an earlier kernel's output, < 0 ~position in GraphKey::inputs
    std::vector<int> fused;   // positions in GraphKey::nodes, to renumber KernelInfo::node_ids on replay
    // One more buffer follows the inputs for each, derived from the buffer
    // of the operand it copies (PackedOperand).
    std::vector<PackedOperand> packed;
    // Whether the output node gets its buffer when the plan has run: a root
    // of the realize, or a node a gradient may flow through. Any other
    // output is read only by later kernels of the plan, and is left
    // unrealized (it keeps its sources, so reading it later computes it).
    bool keep = true;
    // Earlier kernels (not kept) whose outputs no kernel after this one
    // reads: once it is launched their buffers serve later kernels of the
    // same run, so a run's working set is its live tensors, not all of them.
    std::vector<int> frees;
    // >= 0: this kernel's output is bytes [into_offset, into_offset + bytes)
    // of that later kernel's buffer (Device::view): a concatenation that its
    // inputs' kernels assemble in place (info->assembled), allocated by the
    // first of them and not launched. That kernel may be a part of another
    // in turn: views nest.
    int into = -1;
    size_t into_offset = 0;
  };
  std::vector<Kernel> kernels;
};

// Launches `plan` on `graph` with one wait at the end, then gives each output
// node its buffer. Nothing is attached unless every kernel was queued, so a
// cancel or failure leaves the graph as it was. Profile records say
// `replayed`. When nothing is timed on a device that allows it
// (Device::realize_may_return_early) the wait is left to the next read.
void run_plan(const Plan& plan, const GraphKey& graph, Device& device, bool replayed, double compile_seconds,
              double started);

bool replay_enabled();  // false when TINYLENS_NOREPLAY=1
// false when TINYLENS_NOREUSE=1: every kernel's output gets its own buffer
// and every output node keeps it (Plan::Kernel::keep and frees), to compare.
bool reuse_enabled();
std::shared_ptr<const Plan> find_plan(const std::string& key);
void remember_plan(const std::string& key, std::shared_ptr<const Plan> plan);
constexpr size_t kMaxPlans = 48;

}  // namespace tl
