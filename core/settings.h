// Every TINYLENS_* environment variable, in one table: its name, its
// default, what it does and which files read it. The core reads a setting
// only through setting_value and its two helpers below, whose argument must
// name a row of the table (a name that is not there does not compile);
// `tinylens-cli env` prints the table with the values set now, and the
// READMEs list it (tests/test_settings checks both against the table, and
// that every TINYLENS_ name in the source tree is a row).
//
// Settings are read when they are used, not once at start: a test may set
// one between two realizes. The ones that change what a graph schedules,
// renders or tunes to are part of the cache keys (settings_key), so a value
// changed while a process runs is never answered from work done under the
// old one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tl {

struct Setting {
  const char* name;
  const char* fallback;  // the default, in words
  const char* effect;    // what a value does
  const char* read_in;   // the files that read it, separated by ", "
  bool keyed = false;    // part of settings_key()
  bool tests = false;    // read by the tests and scripts, not by the programs
};

// The keyed settings come first, in the order settings_key() has always
// joined them (a new one goes last among them).
inline constexpr Setting kSettings[] = {
    {"TINYLENS_NOPOOLFUSION", "unset: fused",
     "1: a convolution and the max pool that alone reads it run as two kernels, to compare", "core/realize.cpp",
     true},
    {"TINYLENS_NOREUSE", "unset: reused",
     "1: every kernel's output gets its own buffer and is kept, instead of serving later kernels of the run",
     "core/replay.cpp", true},
    {"TINYLENS_TUNE", "unset: off",
     "1: time a few renderings of each new kernel and keep the fastest in the kernel cache (--tune); "
     "retune: search again (--retune)",
     "core/tune.cpp, app/cli.cpp", true},
    {"TINYLENS_GEMM", "unset",
     "tiled: the GPU's local-memory GEMM template on an OpenCL CPU device (PoCL) too, as CI tests it",
     "core/codegen/gemm_opencl.cpp", true},
    {"TINYLENS_REDUCE", "unset: grouped where it pays",
     "serial: every reduction one work-item per output, never a work-group in local memory",
     "core/codegen/render.cpp", true},
    {"TINYLENS_CUDA_TILE", "unset: chosen by shape", "TMxTNxTKxWMxWN: the CUDA GEMM's tile, for benchmarking",
     "core/codegen/gemm_cuda.cpp", true},
    {"TINYLENS_CUDA_PLANES", "unset: chosen by shape",
     "TWxTYxR: kernels/depthwise.cu's blocks (depthwise convolutions, max pools); rRtT: its rule with R rows "
     "a thread, T threads at most; for benchmarking",
     "core/codegen/gemm_cuda.cpp", true},
    {"TINYLENS_CUDA_MATH", "tensor cores in float32 accuracy (3xTF32) on sm_80 and later",
     "fp32: the CUDA GEMM's sums as float32 multiply-adds on every GPU, to compare", "core/codegen/gemm_cuda.cpp",
     true},
    {"TINYLENS_NOREPLAY", "unset: replayed",
     "1: every realize schedules and renders afresh, and no Jit captures, instead of replaying a known graph's plan",
     "core/replay.cpp"},
    {"TINYLENS_NOBATCH", "unset: batched",
     "1: kernels compile one by one, not in one compiler run per core where the device can", "core/realize.cpp"},
    {"TINYLENS_NOPREBUILT", "unset: read",
     "1: ignore the CPU GEMM library the build precompiled (build/prebuilt-cache)", "core/runtime/cache.cpp"},
    {"TINYLENS_THREADS", "the cores the process may use", "N: the CPU device's threads",
     "core/runtime/thread_pool.cpp"},
    {"TINYLENS_POOL_MB", "1/4 of a GPU's memory; 1/8 of the host's, at most 1 GiB",
     "N: megabytes of released buffers each device keeps to hand out again; 0: none", "core/runtime/buffer_pool.cpp"},
    {"TINYLENS_DEPTHWISE", "guarded on a GPU, else padded",
     "guarded or padded: the form of every depthwise convolution", "core/depthwise.cpp"},
    {"TINYLENS_NOFOLD", "unset: folded",
     "1: an ONNX model's batch norms are not folded into its convolutions when it loads", "core/io/onnx/fold.cpp"},
    {"TINYLENS_MAX_LOAD_BYTES", "8G", "the most bytes one file's load may allocate (a number, or with K, M or G)",
     "core/io/limits.cpp"},
    {"TINYLENS_TRUST_FILES", "unset",
     "1: a file's load and run budgets are the absolute caps, not a multiple of its size; other limits stay",
     "core/io/limits.cpp"},
    {"TINYLENS_MAX_RUN_BYTES", "half the machine's memory", "the most bytes one model run may hold at once",
     "core/io/limits.cpp"},
    {"TINYLENS_MAX_RUN_FLOPS", "6e12 on a CPU, 6e14 on a GPU",
     "the most FLOPs one model run may take (a number, or with K, M, G or T)", "core/io/limits.cpp"},
    {"TINYLENS_MODELS", "beside the build, then the install's share/tinylens/models",
     "a folder searched first for the model files", "core/models/classifier.cpp"},
    // Read by the test suites and scripts.
    {"TINYLENS_STRICT", "unset", "1: a test that finds a dependency missing fails instead of skipping (scripts/test)",
     "tests/testing.h, scripts/test", false, true},
    {"TINYLENS_TEST_DEVICES", "every available device", "a,b: the devices the suites run on", "tests/testing.h",
     false, true},
    {"TINYLENS_SANITIZED", "unset", "1: the sanitized pass (scripts/test); slow suites run a subset",
     "tests/test_onnx_zoo.cpp, tests/test_train.cpp, scripts/test", false, true},
    {"TINYLENS_TEST_CACHE", "a fresh temporary folder", "the kernel cache folder scripts/test runs with",
     "scripts/test", false, true},
    {"TINYLENS_FUZZ_SECONDS", "30", "how long scripts/test fuzzes each loader", "scripts/test", false, true},
    {"TINYLENS_UI_TEST_KEEP_CACHE", "unset: an empty cache",
     "set: the window's test starts from the user's kernel cache", "tests/test_ui_window.cpp", false, true},
    {"TINYLENS_ZOO_SEED", "the clock", "N: the order test_onnx_zoo runs the zoo in, to repeat one",
     "tests/test_onnx_zoo.cpp", false, true},
    {"TINYLENS_ZOO_MODELS", "all", "a,b: the zoo models test_onnx_zoo runs", "tests/test_onnx_zoo.cpp", false, true},
    {"TINYLENS_ZOO_DIR", "resources/onnx-zoo", "another zoo for test_onnx_zoo", "tests/test_onnx_zoo.cpp", false,
     true},
    {"TINYLENS_ZOO_IMAGE", "OpenCV's squirrel sample", "the image export_zoo.py feeds each model",
     "scripts/export_zoo.py", false, true},
    {"TINYLENS_ZOO_DYNAMIC_BATCH", "0", "1: export_zoo.py leaves the batch dimension free (bench-gpu's batch 64)",
     "scripts/export_zoo.py, scripts/bench-gpu", false, true},
    {"TINYLENS_FRESH_CACHE", "/var/cache/tinylens-fresh", "where scripts/check-fresh keeps its Debian root",
     "scripts/check-fresh", false, true},
};

// A setting's name, checked against the table while compiling.
class SettingName {
 public:
  // Implicit, so that a call reads setting_value("TINYLENS_TUNE").
  consteval SettingName(const char* name) : name_(name) {
    bool found = false;
    for (const Setting& s : kSettings) found = found || std::string_view(s.name) == name;
    if (!found) throw "not a row of kSettings (core/settings.h): add it there";
  }
  const char* c_str() const { return name_; }

 private:
  const char* name_;
};

// The variable's value now, or nullptr when it is not set.
const char* setting_value(SettingName name);
// Set to something other than "" and "0".
bool setting_is_on(SettingName name);
// Set to exactly `value`.
bool setting_equals(SettingName name, std::string_view value);

// The keyed settings' values (unset as empty), each ended by a NUL, and
// after settings_changed() its count: part of the rendered-kernel and
// replay keys (core/README.md, Caches).
std::string settings_key();

// A setting's value on this thread only, while alive, in place of the
// environment's (setting_value and settings_key read it): the window's
// worker runs with TINYLENS_TUNE=1 once tuned from the window, and a tuner
// search (tune.h) with TINYLENS_NOREPLAY=1. Nest them; end them in reverse.
class SettingOverride {
 public:
  SettingOverride(SettingName name, std::string value);
  ~SettingOverride();
  SettingOverride(const SettingOverride&) = delete;
  SettingOverride& operator=(const SettingOverride&) = delete;
};

// Counts the changes of what settings mean that their values in the
// environment do not show: an override made or ended, settings_changed().
// A Jit replays a capture only under the count it was captured at.
uint64_t settings_generation();
// Says that work done under the settings now is stale though their values
// did not change (new tuning choices were stored): settings_key changes.
void settings_changed();

// Every setting of the programs (or, with `tests`, of the tests and scripts)
// as rows of a Markdown table: name, default, what it does. The READMEs hold
// this text.
std::string settings_markdown(bool tests);
// Every setting with its value in this environment, its default, what it
// does and where it is read: `tinylens-cli env`.
std::string settings_report();

}  // namespace tl
