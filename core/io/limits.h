// How much a loader may take for one file: the policy, in one place.
//
// Every loader (ONNX, .pth and its pickle, safetensors, images) asks these
// limits before it allocates or recurses on behalf of a file, so a hostile
// file gets a clear IOError instead of a crash, a hang or a memory bomb. A
// tensor never takes more bytes than the file holds unless the format says so
// (stride 0, shared storage, a declared output size); then the absolute cap
// applies. Images are the exception to the per-byte budget (a 3 MB photo
// decodes to 150 MB of floats): their decoded size is bounded by what the
// format can encode in the file's bytes (image.cpp) and by the absolute cap.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tl::io {

struct LoadLimits {
  // Most bytes one load may allocate, whatever the file. Overridable with
  // TINYLENS_MAX_LOAD_BYTES (a number of bytes, or with a K/M/G suffix).
  uint64_t max_total_bytes = uint64_t(8) << 30;
  // Most bytes one load may allocate per byte of the file, plus a fixed slack
  // for small files (headers, label lists, a model's intermediate shapes).
  uint64_t bytes_per_file_byte = 4;
  uint64_t slack_bytes = uint64_t(64) << 20;
  // Deepest nesting of containers (pickle lists and dicts, JSON arrays, ONNX
  // subgraphs) a loader follows.
  int max_nesting = 200;
  // Most pickle opcodes one .pth record may execute.
  uint64_t max_pickle_ops = uint64_t(1) << 26;
  // Most elements a single tensor may declare (2^40 is beyond any real model).
  uint64_t max_tensor_elements = uint64_t(1) << 36;
  // Most dimensions a single tensor may declare.
  int max_tensor_rank = 64;
  // TINYLENS_TRUST_FILES=1: the user vouches for the files they open (a
  // model whose weights are made by ConstantOfShape, as in VGG-19's ONNX
  // test export, is small on disk and large in memory). The per-file budget
  // is then the absolute cap; every other limit stays.
  bool trust_files = false;
};

// The limits in force: the defaults above, with the environment's override.
const LoadLimits& load_limits();

// The most bytes a load of a file of `file_bytes` may allocate in all.
uint64_t load_budget(uint64_t file_bytes);
uint64_t load_budget(uint64_t file_bytes, const LoadLimits& limits);

// What an error about the budget tells the user to do about it.
std::string budget_remedy();

// Throws IOError("<what> would need N bytes, more than the B allowed for a
// file of F bytes ...") when `bytes` exceeds load_budget(file_bytes).
void check_load_budget(uint64_t bytes, uint64_t file_bytes, const std::string& what);

// How much one run of a model read from a file may compute and hold: a file
// of a few KB can describe a run of 10^13 FLOPs or many GB of intermediates
// (weights made by ConstantOfShape, a chain of huge MatMuls). A run is
// estimated before any kernel launches and refused when it passes these.
struct RunLimits {
  // Most FLOPs one run may take: a time budget of about a minute, at the
  // rate a modest CPU (1e11 FLOP/s) or GPU (1e13) sustains: 6e12 and 6e14.
  // TINYLENS_MAX_RUN_FLOPS (a number, 1e13 or with a K/M/G/T suffix) sets
  // one limit for every device.
  double seconds = 60, cpu_flops_per_second = 1e11, accelerator_flops_per_second = 1e13;
  double max_flops_override = 0;
  double max_flops(bool accelerator) const {
    return max_flops_override > 0 ? max_flops_override
                                  : seconds * (accelerator ? accelerator_flops_per_second : cpu_flops_per_second);
  }
  // Most bytes the values of one run may hold at once: half the machine's
  // memory, or TINYLENS_MAX_RUN_BYTES.
  uint64_t max_bytes = 0;
  // Unless the user trusts the files (TINYLENS_TRUST_FILES=1), a run may hold
  // at most this many times what a load of the file and its inputs may take.
  uint64_t bytes_per_load_byte = 8;
};
const RunLimits& run_limits();

// The most bytes a run may hold for a model of `file_bytes` and inputs of
// `input_bytes` holding `batch` items (the first input's first dimension):
// a batch of B may hold B times what one item may (activations grow with the
// batch, the file's weights do not; a batch of 64 through DenseNet-121 held
// 2.8 GB on a GPU), at most max_bytes.
uint64_t run_byte_budget(uint64_t file_bytes, uint64_t input_bytes, uint64_t batch = 1);
// The most elements one value of such a run may hold: the load budget of the
// file and one item's inputs, 4 bytes an element, times the batch (capped
// by max_tensor_elements).
int64_t value_element_budget(uint64_t file_bytes, uint64_t input_bytes, uint64_t batch = 1);

// Throws IOError("<what> would need ...") naming what the run needs and what
// is allowed, when `flops` or `peak_bytes` passes the run budget of a device
// (an accelerator: a GPU's kind, not a CPU's).
void check_run_budget(double flops, uint64_t peak_bytes, uint64_t file_bytes, uint64_t input_bytes,
                      bool accelerator, const std::string& what, uint64_t batch = 1);
// The error of a run that, while it runs, asks for a buffer of `asked` bytes
// with `held` held, past run_byte_budget's `limit` (RunMemory,
// core/runtime/run_memory.h): what the estimate before it could not see.
std::string run_bytes_exceeded(const std::string& what, uint64_t held, uint64_t asked, uint64_t limit,
                               uint64_t file_bytes, uint64_t input_bytes, uint64_t batch = 1);

// The running total of what one load has allocated on behalf of a file,
// against load_budget(file_bytes): loaders take() before they allocate and
// give() back what they free, so a file that asks for the same bytes many
// times (shared storages, repeated records, a pickle building millions of
// lists) is refused once the total passes the budget.
class LoadBudget {
 public:
  explicit LoadBudget(uint64_t file_bytes) : file_bytes_(file_bytes), budget_(load_budget(file_bytes)) {}
  // Adds `bytes`; throws check_load_budget's IOError naming `what` when the
  // total would pass the budget.
  void take(uint64_t bytes, const std::string& what);
  // Adds `bytes` when they fit and says so; for hot loops that word their own error.
  bool try_take(uint64_t bytes) {
    if (bytes > budget_ - used_) return false;
    used_ += bytes;
    return true;
  }
  void give(uint64_t bytes) { used_ = bytes < used_ ? used_ - bytes : 0; }
  uint64_t used() const { return used_; }
  uint64_t budget() const { return budget_; }
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  uint64_t file_bytes_, budget_, used_ = 0;
};

// a * b, or throws IOError naming `what` when the product overflows 64 bits.
uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what);
// a + b, likewise.
uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what);

// A name that came from a file (a tensor key, a pickle global, a dtype), cut
// to `max_chars` with "..." so an error message stays one readable line.
std::string clip(const std::string& name, size_t max_chars = 80);

// Reads a whole file, refusing one larger than `max_bytes`; `what` names the
// file's role in errors ("ONNX model", "safetensors file").
std::string read_whole_file(const std::string& path, const std::string& what,
                            uint64_t max_bytes = load_limits().max_total_bytes);
// The same into bytes, for the loaders that parse a std::vector<uint8_t>.
std::vector<uint8_t> read_whole_file_bytes(const std::string& path, const std::string& what,
                                           uint64_t max_bytes = load_limits().max_total_bytes);

}  // namespace tl::io
