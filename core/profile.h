// Inspection data: what each kernel is and how long each launch took.
#pragma once
#include <memory>
#include <mutex>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tl {

// A scheduled kernel, rendered for one device.
struct KernelInfo {
  std::string name;                  // "E_64_32" (elementwise), "R_8_1024" (reduce), "GEMM_256_256_256"
  std::string device;
  std::vector<std::string> ops;      // the primitive ops it fused, in order
  std::vector<uint64_t> node_ids;    // graph nodes computed inside it
  uint64_t output_node = 0;          // the node whose buffer it writes
  std::vector<uint64_t> input_nodes; // realized nodes it reads
  std::string output_shape;
  int64_t global[3] = {1, 1, 1}, local[3] = {0, 0, 0};
  double flops = 0, bytes = 0;       // estimates
  std::string source, build_log;
  // The function's name in `source` when it is not `name`: a GEMM sized at
  // run time (kernels/gemm.cl) shares one kernel, named after its tiles,
  // with every GEMM it fits; `ints` are its sizes, passed at launch.
  std::string entry;
  std::vector<int64_t> ints;
  bool cache_hit = false;
  // Set when the tuner (core/tune.h) chose this kernel's rendering: the
  // chosen candidate's label ("split=cols kc=576"), every candidate's label
  // and best time in seconds (the chosen one among them), and whether this
  // run searched or read the choice from the kernel cache.
  std::string tuned;
  std::vector<std::pair<std::string, double>> tune_candidates;
  bool tune_searched = false;
  // A concatenation that its inputs' kernels wrote in place: not launched.
  bool assembled = false;
  // The model's own nodes this kernel computes (Node::origin: ONNX node
  // indices, ascending; -1: nodes made outside any, such as a classifier's
  // reshape), each with its share of the kernel's work: the FLOPs of the
  // primitive nodes it fused that came from it (a product 2*m*n*k, an
  // elementwise op one per element, a reduction one per input element) over
  // the kernel's. The shares sum to 1 (equal shares when nothing computes);
  // a view a node became (a Reshape read in place) is listed with share 0,
  // a constant not at all. Set when the kernel is planned: a replay copies it.
  struct Origin {
    int32_t node = -1;
    float share = 0;
  };
  std::vector<Origin> origins;
};
// "tuned: kc=576 412.0 us (searched; default 530.1, split=cols 611.0, kc=128 498.2)",
// or "" for a kernel the tuner did not choose.
std::string format_tune_line(const KernelInfo& k);

struct ProfileRecord {
  std::shared_ptr<const KernelInfo> kernel;
  double seconds = 0;
  bool replayed = false;  // launched from a remembered plan (see replay.h): nothing was scheduled or rendered
  // Set on the first record of each realize: that realize's wall time, from
  // the call to the return of its single wait, compiles excluded. The sum of
  // these minus the kernels' sum is the host overhead (scheduling, rendering,
  // allocation, launching, waiting); compile_seconds is kept apart.
  double realize_wall = 0, compile_seconds = 0;
  // When run_plan queued the launch (steady_seconds, below) and how long
  // the enqueue took; 0 without a timed capture.
  double enqueued = 0, enqueue_seconds = 0;
  // The device buffers the launch used (core/memory.h): ids are the buffers'
  // addresses, a concatenation assembled in place names the buffer it is a
  // part of; `kept`: the output outlives the run (a root or a value a
  // gradient flows through). Filled while a timed capture is alive.
  struct Buffers {
    uint64_t output = 0;
    size_t output_bytes = 0, value_bytes = 0;  // the buffer's size; of it, what the kernel's output takes
    bool kept = false;
    std::vector<std::pair<uint64_t, size_t>> inputs;  // id, bytes
  } buffers;
  double gflops() const { return seconds > 0 ? kernel->flops / seconds * 1e-9 : 0; }
  double gbps() const { return seconds > 0 ? kernel->bytes / seconds * 1e-9 : 0; }
};
// How the record's kernel ran: "replayed", "planned", or "assembled in
// place" (a concatenation its inputs' kernels wrote; KernelInfo::assembled).
const char* run_label(const ProfileRecord& r);

// Collects the launches made on this thread while it is alive (nestable).
// An untimed capture counts the launches but leaves their seconds at 0: the
// devices then skip their per-launch timing events (a training step that
// only counts its kernels launches each of them faster on a GPU). It names
// each launch's kernel, but a replayed launch keeps the node ids of the
// realize that planned it: only a timed capture renumbers them.
class ProfileCapture {
 public:
  explicit ProfileCapture(bool timed = true);
  ~ProfileCapture();
  ProfileCapture(const ProfileCapture&) = delete;
  ProfileCapture& operator=(const ProfileCapture&) = delete;
  const std::vector<ProfileRecord>& records() const { return records_; }
  double total_seconds() const;
  static void add(const ProfileRecord& r);  // called by the executor
  static bool active();                     // some capture is alive on this thread
  static bool timed();                      // ... and one of them wants device times

 private:
  std::vector<ProfileRecord> records_;
  bool timed_;
  ProfileCapture* parent_;
};

// Wall time of the realizes that made `records` and what of it was not kernels.
struct ProfileTotals {
  size_t kernels = 0, replayed = 0;
  double kernel_seconds = 0, wall_seconds = 0, compile_seconds = 0;
  double host_overhead() const { return wall_seconds > kernel_seconds ? wall_seconds - kernel_seconds : 0; }
};

// Seconds on the steady clock: what a realize's wall and compile times are
// measured in (realize.cpp, replay.cpp, jit.cpp).
double steady_seconds();
ProfileTotals profile_totals(const std::vector<ProfileRecord>& records);
// "87 kernels (87 replayed): wall 12.1 ms = kernels 9.8 ms + host overhead 2.3 ms"
std::string format_profile_totals(const ProfileTotals& t);

// One line per kernel: name, launch size, time, GFLOP/s, GB/s, replayed,
// and under a tuned kernel its format_tune_line; then the totals line.
std::string format_profile_table(const std::vector<ProfileRecord>& records);

}  // namespace tl
