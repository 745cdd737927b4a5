// tinylens-cli: the command-line twin of the window. No Qt, so it also runs on
// headless GPU machines.
#include <algorithm>
#include <functional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/ops.h"
#include "core/io/image.h"
#include "core/models/classifier.h"
#include "core/memory.h"
#include "core/profile.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/settings.h"
#include "core/tensor.h"
#include "core/trace.h"
#ifdef TL_HAVE_ONNX
#include "core/io/onnx.h"
#include "app/onnx_conformance.h"
#endif
#include "app/cli_common.h"
#include "app/train_command.h"

using namespace tl;

int cmd_selftest(const std::string& device, const std::string& golden_path, bool verbose);  // selftest.cpp
int cmd_inspect(const std::vector<std::string>& args);                                      // inspect.cpp
int cmd_bench_reduce(const std::vector<std::string>& devices, int64_t batch, int repeat);      // bench_reduce.cpp
namespace tlcli {
int cmd_bench_model(const Args& a);   // bench_commands.cpp
int cmd_bench_onnx(const Args& a);    // bench_commands.cpp
int cmd_bench_matmul(const Args& a);  // bench_commands.cpp
int cmd_report(const Args& a);        // report_command.cpp
}  // namespace tlcli
using tlcli::Args;
using tlcli::UsageError;
using tlcli::positive_option;
using tlcli::pick_devices;
using tlcli::dump_kernels;
using tlcli::cmd_bench_model;
using tlcli::cmd_bench_onnx;
using tlcli::cmd_bench_matmul;
using tlcli::cmd_report;

namespace {

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1ull << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  return buf;
}

int cmd_devices(const Args&) {
  for (auto& d : Registry::instance().devices()) {
    auto& i = d->info();
    std::printf("%-14s %-11s %s\n", i.name.c_str(), i.kind.c_str(), i.description.c_str());
    if (!i.platform.empty()) std::printf("    platform: %s, vendor: %s\n", i.platform.c_str(), i.vendor.c_str());
    if (!i.driver_version.empty()) std::printf("    driver: %s\n", i.driver_version.c_str());
    if (!i.language_version.empty()) std::printf("    language: %s\n", i.language_version.c_str());
    if (i.compute_units)
      std::printf("    compute units: %d, clock: %d MHz, global memory: %s, local memory: %s, max work-group: %zu\n",
                  i.compute_units, i.clock_mhz, human_bytes(i.global_memory).c_str(),
                  human_bytes(i.local_memory).c_str(), i.max_work_group);
    std::printf("    fp16: %s, fp64: %s, vector width: %d, GEMM template: %s\n", i.fp16 ? "yes" : "no",
                i.fp64 ? "yes" : "no", i.preferred_vector_width, i.gemm_template.empty() ? "none" : i.gemm_template.c_str());
    std::printf("    %s\n", i.available ? "available" : ("unavailable: " + i.unavailable_reason).c_str());
  }
  return 0;
}

int cmd_ops(const Args&) {
  for (auto& o : primitive_ops()) std::printf("%-12s %s\n", o.name, o.meaning);
  std::printf("%zu primitive ops\n", primitive_ops().size());
  return 0;
}

int cmd_env(const Args& a) {
  const std::string text = a.has("markdown") ? settings_markdown(false) + "\n" + settings_markdown(true) : settings_report();
  std::fputs(text.c_str(), stdout);
  return 0;
}

int cmd_demo(const Args& a) {
  // A tiny two-layer network on random data: matmul, bias, GELU, softmax.
  const std::string device = a.get("device") == "all" ? "" : a.get("device");
  Generator gen(1);
  Tensor x = Tensor::randn({64, 256}, gen, device);
  Tensor w1 = Tensor::randn({512, 256}, gen, device) * 0.05;
  Tensor w2 = Tensor::randn({10, 512}, gen, device) * 0.05;
  ProfileCapture cap;
  Tensor p = x.linear(w1).gelu().linear(w2).softmax(-1);
  auto v = p.to_vector();
  double row0 = 0;
  for (int j = 0; j < 10; ++j) row0 += v[j];
  std::printf("demo on %s: softmax(gelu(x @ w1.T) @ w2.T) for x %s; row 0 sums to %.6f; p[0][0..3] = %.5f %.5f %.5f\n",
              p.device().c_str(), shape_str(x.shape()).c_str(), row0, v[0], v[1], v[2]);
  std::printf("%s", format_profile_table(cap.records()).c_str());  // with or without --profile
  return 0;
}

// Errors from the loaders may span lines (a checkpoint's list of bad keys);
// the CLI promises one line per failure.
std::string one_line(const std::string& message) {
  std::string out;
  const size_t end = message.find_last_not_of(" \n") + 1;  // a build log's final newline adds nothing
  for (size_t i = 0; i < end; ++i) {
    if (message[i] != '\n') {
      out += message[i];
      continue;
    }
    while (i + 1 < end && message[i + 1] == ' ') ++i;
    out += out.empty() || out.back() == ':' ? " " : "; ";
  }
  return out;
}

int cmd_classify(const Args& a) {
  const std::vector<std::string>& images = a.words;
  const int runs = positive_option(a, "runs", 3);
  const std::string device = a.get("device").empty() ? default_device() : a.get("device");
  Registry::instance().get_available(device);
  if (a.has("trace")) tlcli::check_writable(a.get("trace"), "the trace");
  std::optional<TraceCapture> trace;  // the cold run and every warm run of every image
  if (a.has("trace")) trace.emplace();
  std::optional<TraceScope> phase(std::in_place, "load model");
  auto model = load_classifier(a.get("model", "efficientnet-lite0"));
  for (auto& path : images) {
    phase.emplace("load image");
    Image image = load_image(path);
    phase.reset();
    ClassifyResult r = classify(*model, image, device, 5, runs);
    std::printf("%s (%dx%d) on %s: cold %.1f ms, warm %.1f ms (median of %d)\n", path.c_str(), image.width,
                image.height, r.device.c_str(), r.cold_seconds * 1e3, r.warm_seconds * 1e3, runs);
    for (auto& p : r.top) std::printf("  %6.2f%%  %-4d %s\n", p.probability * 100.0, p.index, p.label.c_str());
    if (a.has("profile")) std::printf("%s", format_profile_table(r.records).c_str());
    if (a.has("memory")) std::printf("%s", format_memory(memory_profile(r.records), r.records).c_str());
    if (a.has("dump-kernels")) dump_kernels(r.records, a.get("dump-kernels"));
  }
  if (a.has("trace")) {
    TraceDocument doc = trace_document(*trace);
    doc.about = {{"command", "classify"}, {"model", a.get("model", "efficientnet-lite0")}, {"device", device}};
    tlcli::save_trace(a.get("trace"), doc);
  }
  return 0;
}

int cmd_bench_reduce_args(const Args& a) {
  return cmd_bench_reduce(pick_devices(a.get("device")), positive_option(a, "batch", 1),
                          positive_option(a, "repeat", 20));
}

int cmd_train(const Args& a) {
  tlcli::TrainConfig config;
  try {
    config = tlcli::parse_train_options(a.options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());  // only bad option values reach here
  }
  return tlcli::run_training(config, stdout);
}

// ONNX conformance: one line per case folder, then the counts.
int cmd_onnx_test(const Args& a) {
#ifdef TL_HAVE_ONNX
  const std::string device = a.get("device", default_device());
  std::map<std::string, std::string> expected;
  if (a.has("expected")) expected = read_onnx_expected_failures(a.get("expected"));
  int pass = 0, fail = 0, unsupported = 0, xfail = 0, float_cases = 0, float_pass = 0, absent = 0;
  std::map<std::string, int> missing_ops;
  std::vector<OnnxCaseResult> results;
  // --shuffle SEED and --rounds N: every case of every DIR in one process,
  // N times, each round in another seeded order, as the window runs model
  // after model: a kernel or plan cached under an incomplete key answers
  // the next model wrong, and only some orders show it.
  const int rounds = positive_option(a, "rounds", 1);
  const bool shuffled = a.has("shuffle");
  const int seed = shuffled ? positive_option(a, "shuffle", 1) : 0;
  std::vector<std::string> cases;
  for (const auto& folder : a.words) {
    std::vector<std::string> link_only;
    auto dirs = onnx_case_dirs(folder, &link_only);
    for (const auto& dir : link_only) {
      // The onnx wheel's real-model cases are a data.json with a URL: the model
      // and its test data are not in the wheel, and this tool downloads nothing.
      std::string url = onnx_case_link(dir);
      std::printf("%-11s %s (only a download link in the folder: %s)\n", "absent",
                  std::filesystem::path(dir).filename().string().c_str(), url.empty() ? "(no url)" : url.c_str());
      ++absent;
    }
    cases.insert(cases.end(), dirs.begin(), dirs.end());
  }
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> dirs = cases;
    if (shuffled) std::shuffle(dirs.begin(), dirs.end(), std::mt19937(uint32_t(seed + round)));
    if (shuffled || rounds > 1) {
      std::printf("round %d of %d%s:", round + 1, rounds, shuffled ? (", order of seed " + std::to_string(seed + round)).c_str() : "");
      for (const auto& dir : dirs) std::printf(" %s", std::filesystem::path(dir).filename().string().c_str());
      std::printf("\n");
    }
    for (const auto& dir : dirs) {
      OnnxCaseResult r = run_onnx_case(dir, device, expected);
      switch (r.status) {
        case OnnxCaseResult::Status::Pass: ++pass; break;
        case OnnxCaseResult::Status::Fail: ++fail; break;
        case OnnxCaseResult::Status::Unsupported: ++unsupported; ++missing_ops[r.op]; break;
        case OnnxCaseResult::Status::ExpectedFailure: ++xfail; break;
      }
      if (r.float_inputs) {
        ++float_cases;
        float_pass += r.status == OnnxCaseResult::Status::Pass;
      }
      std::string what = r.status == OnnxCaseResult::Status::Unsupported ? r.op : r.detail;
      std::printf("%-11s %s%s%s%s\n", onnx_status_name(r.status), r.name.c_str(), what.empty() ? "" : " (",
                  one_line(what).c_str(), what.empty() ? "" : ")");
      std::fflush(stdout);
      results.push_back(std::move(r));
    }
  }
  std::printf("\n%d passed, %d failed, %d unsupported, %d expected failures on %s\n", pass, fail, unsupported, xfail,
              device.c_str());
  std::printf("float32-input cases: %d of %d pass (%.1f%%)\n", float_pass, float_cases,
              float_cases ? 100.0 * float_pass / float_cases : 0.0);
  if (absent) std::printf("%d cases absent (download links only; nothing was run for them)\n", absent);
  if (!missing_ops.empty()) {
    std::printf("unsupported:");
    for (auto& [op, n] : missing_ops) std::printf(" %s (%d)", op.c_str(), n);
    std::printf("\n");
  }
  std::printf("%s\n", onnx_table_coverage(results).c_str());
  return fail ? 1 : 0;
#else
  (void)a;
  throw std::runtime_error("this build has no ONNX support (libonnx-dev / protobuf were missing at configure time)");
#endif
}

// The op table of the ONNX runtime: one line per op.
int cmd_onnx_ops(const Args&) {
#ifdef TL_HAVE_ONNX
  for (const auto& op : onnx_supported_ops()) {
    std::string opsets = std::to_string(op.since) + (op.until == INT64_MAX ? "+" : "-" + std::to_string(op.until));
    std::printf("%-26s opset %-6s %-7s %s\n", op.name.c_str(), opsets.c_str(), op.host ? "host" : "device",
                op.types.c_str());
  }
  return 0;
#else
  throw std::runtime_error("this build has no ONNX support (libonnx-dev / protobuf were missing at configure time)");
#endif
}

int cmd_inspect_args(const Args& a) { return cmd_inspect(a.words); }

int cmd_selftest_args(const Args& a) {
  const std::string golden = a.get("golden", std::string(TL_SOURCE_DIR) + "/tests/data/golden/ops.bin");
  return cmd_selftest(a.get("device", "cpu"), golden, a.has("verbose"));
}

// ---- the command table: each command declares its arguments and options;
// that gives its --help, the top usage and the check of unknown options ----

struct Option {
  std::string name;   // without the leading dashes
  std::string value;  // what its value looks like ("N", "PATH"); empty for a flag
  std::string help;   // what it does, and its default
};

struct Command {
  std::string name;       // "classify", or "bench matmul" for a sub-command
  std::string arguments;  // e.g. "IMAGE...": one or more are needed; empty: none are taken
  std::string summary;    // one line, for the top usage
  std::string details;    // more for its own --help; may be empty
  std::vector<Option> options;
  int (*run)(const Args&);
};

Option model_option() {
  return {"model", "NAME|PATH",
          "efficientnet-lite0, or a .pth, .safetensors or .onnx file (default efficientnet-lite0)"};
}
Option device_option(bool all) {
  return {"device", all ? "NAME|all" : "NAME",
          std::string("the device to run on (default cpu; `tinylens-cli devices` lists them") +
              (all ? "; all: each available one)" : ")")};
}
const Option kProfile = {"profile", "", "print the kernel table: each kernel's time, GFLOP/s and GB/s"};
const Option kMemory = {"memory", "",
                        "print the run's memory: the live bytes at each launch and their peak, and each value's size, "
                        "writer, readers, lifetime and buffer reuse"};
const Option kTrace = {"trace", "FILE",
                       "write the run as a Trace Event Format JSON (host phases, each kernel on its device's track) "
                       "that ui.perfetto.dev and chrome://tracing open"};
const Option kTune = {"tune", "",
                      "time a few renderings of each new kernel and keep the fastest in the kernel cache "
                      "(as TINYLENS_TUNE=1; core/tune.h)"};
const Option kRetune = {"retune", "",
                        "like --tune, but search every kernel again and replace the choice stored in the kernel cache "
                        "(as TINYLENS_TUNE=retune)"};

std::vector<Option> train_options() {
  std::vector<Option> out;
  for (auto& o : tlcli::train_options()) out.push_back({o.name, o.value ? o.value : "", o.help});
  return out;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"devices", "", "list every device and its facts",
       "Names, kinds, memory, compute units, fp16/fp64, and why a device is unavailable.", {}, cmd_devices},
      {"ops", "", "list the primitive ops", "The op set every computation lowers to, one per line.", {}, cmd_ops},
      {"env", "", "list the TINYLENS_* settings with their values here",
       "Each variable's value in this environment, its default, what it does and where it is read\n"
       "(the table of core/settings.h).",
       {{"markdown", "", "print the programs' and then the tests' table as README.md and tests/README.md hold them"}},
       cmd_env},
      {"demo", "", "a small real computation with its kernel table",
       "softmax(gelu(x @ w1.T) @ w2.T) on random data; prints a few values and the kernel table.\n"
       "This is what runs when no command is given.",
       {device_option(false),
        {"profile", "", "accepted for symmetry: demo always prints its kernel table"},
        kTune,
        kRetune},
       cmd_demo},
      {"selftest", "", "the op suite on one device vs golden data and the CPU device",
       "Runs every golden op case on the device and compares it with the PyTorch/NumPy reference\n"
       "and with the CPU device; prints the failures and a count per family. Exits 1 when a case fails.",
       {device_option(false),
        {"golden", "FILE", "the golden data (default tests/data/golden/ops.bin of the source tree)"},
        {"verbose", "", "print the passing cases too"}},
       cmd_selftest_args},
      {"bench matmul", "", "time an N x N matmul on one device or all",
       "Prints the best wall time and kernel time of R runs after one that compiles, in ms and GFLOP/s.\n"
       "With --m and --k, times (M x K) @ (K x N), the left operand a realized constant like a layer's weights.",
       {{"n", "N", "the matrix size, or the product's columns (default 1024)"},
        {"m", "M", "the product's rows (default N)"},
        {"k", "K", "the inner size (default N)"},
        device_option(true),
        {"repeat", "R", "timed runs after the first (default 5)"},
        kTune,
        kRetune},
       cmd_bench_matmul},
      {"bench model", "", "time a model's cold and warm runs on one device or all",
       "Prints the cold run (compiles) and the median of the warm runs, GFLOP/s and the kernel count.",
       {model_option(),
        device_option(true),
        {"runs", "N", "warm runs (default 10)"},
        {"batch", "N", "images per run: the input image repeated (default 1)"},
        {"image", "PATH", "the input image (default the OpenCV squirrel sample; a synthetic one if it is missing)"},
        kProfile,
        kTrace,
        kMemory,
        kTune,
        kRetune},
       cmd_bench_model},
      {"bench reduce", "", "time large reductions (softmax, global pooling, bias gradient) on one device or all",
       "Prints the best wall time and kernel time of R runs after one that compiles, and whether the reduction\n"
       "kernels took the work-group form. TINYLENS_REDUCE=serial renders them one work-item per output instead.",
       {device_option(true), {"batch", "B", "the batch size (default 1)"}, {"repeat", "R", "timed runs after the first (default 20)"}},
       cmd_bench_reduce_args},
      {"bench onnx", "MODEL.onnx", "time any ONNX model on one device or all",
       "Random inputs of the declared shapes (a dynamic first dimension taken as --batch, others as 1); outputs are read\n"
       "back to the host.\n"
       "Prints the cold run (compiles), the median of the warm runs and the fastest; scripts/bench onnx runs ONNX Runtime "
       "beside it.",
       {device_option(true),
        {"runs", "N", "warm runs (default 10)"},
        {"batch", "N", "the size of a dynamic first input dimension (default 1)"},
        kProfile,
        kTrace,
        kMemory,
        kTune,
        kRetune,
        {"dump-kernels", "DIR", "write each kernel's source and build log into DIR"}},
       cmd_bench_onnx},
      {"classify", "IMAGE...", "classify images and print the top-5 with timings",
       "For each image: the top-5 classes with their probabilities, and the cold and warm run times.",
       {device_option(false),
        model_option(),
        {"runs", "N", "warm runs per image; their median is printed (default 3)"},
        kProfile,
        kTrace,
        kMemory,
        kTune,
        kRetune,
        {"dump-kernels", "DIR", "write each kernel's source and build log into DIR"}},
       cmd_classify},
      {"report", "IMAGE", "classify an image and write a self-contained HTML report",
       "The model, the image, each device's predictions and timings, the kernel table, the trace's summary,\n"
       "a comparison when several devices ran, and the machine: one HTML file, charts inline, that opens offline.",
       {model_option(),
        device_option(true),
        {"output", "FILE", "where to write the HTML (also -o FILE)"},
        {"runs", "N", "warm runs per device; their median is reported (default 3)"},
        kTune,
        kRetune},
       cmd_report},
      {"onnx-test", "DIR...", "run ONNX backend test cases (model.onnx + test_data_set_*)",
       "Each DIR is a case folder or a folder of case folders; prints one line per case, then the counts.\n"
       "Exits 1 when a case fails that is not an expected failure.",
       {device_option(false),
        {"expected", "FILE", "expected failures: one case folder name per line, then why"},
        {"shuffle", "SEED", "run the cases of all DIRs in one order drawn from SEED (round r: SEED + r - 1)"},
        {"rounds", "N", "run every case N times in this process, each round in its own order (default 1)"},
        kTune,
        kRetune},
       cmd_onnx_test},
      {"onnx-ops", "", "list the ONNX ops this build runs: name, opsets, device or host, input types",
       "One line per op of the runtime's op table (core/io/onnx/registry.h), sorted by name.", {}, cmd_onnx_ops},
      {"inspect", "MODEL", "what opening MODEL shows: format, inputs/outputs, ops, parameters, FLOPs",
       "MODEL is a .onnx, .pth or .safetensors file, or efficientnet-lite0. The window opens files through the\n"
       "same code, so a hostile file can be tried here without a display. Exits 1 with one line when it cannot be opened.",
       {}, cmd_inspect_args},
      {"train", "", "train a digits/MNIST classifier and save it",
       "Prints one line per epoch. The defaults are the recipe that reaches 98% on the digits split in 5 epochs.",
       train_options(), cmd_train},
  };
  return table;
}

const Command* find_command(const std::string& name) {
  for (auto& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

// The sub-commands of a group ("bench" -> matmul, model); empty if `group` is none.
std::vector<const Command*> sub_commands(const std::string& group) {
  std::vector<const Command*> out;
  for (auto& c : commands())
    if (c.name.rfind(group + " ", 0) == 0) out.push_back(&c);
  return out;
}

// Which options take a value, over every command: an option is read the same
// way before and after the command's name.
bool takes_value(const std::string& name) {
  for (auto& c : commands())
    for (auto& o : c.options)
      if (o.name == name) return !o.value.empty();
  return false;
}

std::string two_columns(const std::string& left, const std::string& right) {
  std::string line = "  " + left;
  line += line.size() < 28 ? std::string(30 - line.size(), ' ') : "\n" + std::string(30, ' ');
  return line + right + "\n";
}

std::string top_usage() {
  std::string u =
      "usage: tinylens-cli [COMMAND] [ARGS] [OPTIONS]\n"
      "       tinylens-cli COMMAND --help    (or: tinylens-cli help COMMAND)\n"
      "       tinylens-cli --version\n"
      "Options may come before or after the command; without a command, demo runs.\n"
      "commands:\n";
  for (auto& c : commands()) u += two_columns(c.name + (c.arguments.empty() ? "" : " " + c.arguments), c.summary);
  u += "exit status: 0 done, 1 runtime error (one line on stderr), 2 usage error (the usage on stderr)\n";
  return u;
}

std::string command_usage(const Command& c) {
  std::string u = "usage: tinylens-cli " + c.name + (c.arguments.empty() ? "" : " " + c.arguments) +
                  (c.options.empty() ? "" : " [OPTIONS]") + "\n";
  u += char(std::toupper(static_cast<unsigned char>(c.summary[0]))) + c.summary.substr(1) + ".\n";
  if (!c.details.empty()) u += c.details + "\n";
  u += "options:\n";
  for (auto& o : c.options) u += two_columns("--" + o.name + (o.value.empty() ? "" : " " + o.value), o.help);
  u += two_columns("--help", "print this help");
  return u;
}

std::string group_usage(const std::string& group) {
  std::string u = "usage: tinylens-cli " + group + " SUB-COMMAND [OPTIONS]\nsub-commands:\n";
  for (auto* c : sub_commands(group)) u += two_columns(c->name.substr(group.size() + 1), c->summary);
  u += "`tinylens-cli " + group + " SUB-COMMAND --help` lists its options.\n";
  return u;
}

struct CommandLine {
  std::vector<std::string> words;  // the command's name, then its arguments
  std::map<std::string, std::string> options;
  std::string problem;  // the first malformed option, if any
};

CommandLine split_command_line(int argc, char** argv) {
  CommandLine cl;
  auto complain = [&](const std::string& p) {
    if (cl.problem.empty()) cl.problem = p;
  };
  bool only_words = false;  // after "--"
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (only_words || s.size() < 2 || s[0] != '-') {
      cl.words.push_back(s);
    } else if (s == "--") {
      only_words = true;
    } else if (s == "-h") {
      cl.options["help"] = "1";
    } else if (s == "-o") {  // report's --output
      if (i + 1 < argc) cl.options["output"] = argv[++i];
      else complain("option -o needs a value");
    } else if (s[1] != '-') {
      complain("unknown option '" + s + "'");
    } else {
      std::string key = s.substr(2), value = "1";
      const auto eq = key.find('=');
      if (eq != std::string::npos) value = key.substr(eq + 1), key.resize(eq);
      if (takes_value(key) && eq == std::string::npos) {
        if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) value = argv[++i];
        else complain("option --" + key + " needs a value");
      } else if (!takes_value(key) && eq != std::string::npos) {
        complain("option --" + key + " takes no value");
      }
      cl.options[key] = value;
    }
  }
  return cl;
}

// While a realize compiles new kernels for more than a second, a bar on
// stderr redrawn in place; cleared when the kernels are done. Only for a
// terminal: scripts and logs see no carriage returns.
class CompileBar {
 public:
  CompileBar() : progress_([this](size_t compiled, size_t total) { update(compiled, total); }) {}
  ~CompileBar() { clear(); }
  CompileBar(const CompileBar&) = delete;
  CompileBar& operator=(const CompileBar&) = delete;

 private:
  void update(size_t compiled, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (compiled == 0) started_ = now;
    if (compiled >= total) return clear();
    if (now - started_ < std::chrono::seconds(1)) return;
    constexpr size_t width = 30;
    std::string bar(width * compiled / total, '=');
    bar += '>';
    bar.resize(width, ' ');
    char line[128];
    width_ = size_t(std::snprintf(line, sizeof line, "compiling kernels %4zu/%zu [%s]", compiled, total, bar.c_str()));
    std::fprintf(stderr, "\r%s", line);
  }
  void clear() {
    if (width_) std::fprintf(stderr, "\r%s\r", std::string(width_, ' ').c_str());
    width_ = 0;
  }
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  size_t width_ = 0;  // of the bar on screen; 0: none is
  CompileProgress progress_;
};

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl = split_command_line(argc, argv);
  std::string usage = top_usage();  // narrowed to the command's own once it is known
  try {
    if (cl.options.count("version")) {
      std::printf("tinylens-cli %s\n", TL_VERSION);
      return 0;
    }
    bool help = cl.options.count("help") > 0;
    if (!cl.words.empty() && cl.words[0] == "help") {
      help = true;
      cl.words.erase(cl.words.begin());
    }
    if (cl.words.empty() && help) {
      std::fputs(usage.c_str(), stdout);
      return 0;
    }
    if (cl.words.empty()) cl.words.push_back("demo");
    const Command* command = find_command(cl.words[0]);
    size_t name_words = 1;
    if (!command && !sub_commands(cl.words[0]).empty()) {
      const std::string& group = cl.words[0];
      usage = group_usage(group);
      if (cl.words.size() < 2 && help) {
        std::fputs(usage.c_str(), stdout);
        return 0;
      }
      if (cl.words.size() < 2) throw UsageError(group + " needs a sub-command");
      command = find_command(group + " " + cl.words[1]);
      if (!command) throw UsageError("unknown " + group + " sub-command '" + cl.words[1] + "'");
      name_words = 2;
    }
    if (!command) throw UsageError("unknown command '" + cl.words[0] + "'");
    usage = command_usage(*command);
    if (help) {
      std::fputs(usage.c_str(), stdout);
      return 0;
    }
    if (!cl.problem.empty()) throw UsageError(cl.problem);
    auto& declared = command->options;
    for (auto& [key, value] : cl.options)
      if (std::none_of(declared.begin(), declared.end(), [&](const Option& o) { return o.name == key; }))
        throw UsageError("unknown option --" + key + " for " + command->name);
    Args a;
    a.words.assign(cl.words.begin() + std::ptrdiff_t(name_words), cl.words.end());
    a.options = cl.options;
    if (command->arguments.empty() && !a.words.empty())
      throw UsageError(command->name + " takes no arguments, got '" + a.words[0] + "'");
    if (!command->arguments.empty() && a.words.empty())
      throw UsageError(command->name + " needs at least one " +
                       command->arguments.substr(0, command->arguments.find("...")));
    const bool many = command->arguments.find("...") != std::string::npos;
    if (!many && a.words.size() > 1)
      throw UsageError(command->name + " takes one " + command->arguments + ", got " + std::to_string(a.words.size()));
    if (a.has("device") && a.get("device") != "all") set_default_device(a.get("device"));
    if (a.has("tune")) setenv("TINYLENS_TUNE", "1", 1);  // read by core/tune.cpp before any kernel is planned
    if (a.has("retune")) setenv("TINYLENS_TUNE", "retune", 1);
    std::optional<CompileBar> bar;  // gone before an error is printed
    if (isatty(STDERR_FILENO)) bar.emplace();
    return command->run(a);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tinylens-cli: %s\n%s", e.what(), usage.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tinylens-cli: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}
