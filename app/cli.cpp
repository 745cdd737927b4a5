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
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/ops.h"
#include "core/io/image.h"
#include "core/models/classifier.h"
#include "core/profile.h"
#include "core/realize.h"
#include "core/runtime/registry.h"
#include "core/settings.h"
#include "core/tensor.h"
#ifdef TL_HAVE_ONNX
#include "core/io/onnx.h"
#include "app/onnx_conformance.h"
#endif
#include "app/train_command.h"

using namespace tl;

int cmd_selftest(const std::string& device, const std::string& golden_path, bool verbose);  // selftest.cpp
int cmd_inspect(const std::vector<std::string>& args);                                      // inspect.cpp
int cmd_bench_reduce(const std::vector<std::string>& devices, int64_t batch, int repeat);      // bench_reduce.cpp
int cmd_inspect(const std::vector<std::string>& args);  // inspect.cpp

namespace {

// A command's arguments: the words after its name, and its options
// (`--name value`, `--name=value`, or "1" for a flag).
struct Args {
  std::vector<std::string> words;
  std::map<std::string, std::string> options;
  bool has(const std::string& k) const { return options.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback = "") const {
    auto it = options.find(k);
    return it == options.end() ? fallback : it->second;
  }
};

// Wrong words on the command line: main prints the message, then the usage
// of the command at hand, on stderr, and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int positive_option(const Args& a, const std::string& key, int fallback) {
  const std::string text = a.get(key, std::to_string(fallback));
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || v < 1 || v > 1000000)
    throw UsageError("--" + key + " must be a positive integer, got '" + text + "'");
  return int(v);
}

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

std::vector<std::string> pick_devices(const std::string& spec) {
  std::vector<std::string> out;
  if (spec == "all") {
    for (auto& d : Registry::instance().devices())
      if (d->available()) out.push_back(d->name());
  } else {
    out.push_back(spec.empty() ? default_device() : spec);
  }
  return out;
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

std::string kernel_file_stem(size_t index, const std::string& name) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%03zu_", index);
  std::string safe;
  for (char c : name) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return prefix + safe;
}

// One source file and one build log per distinct kernel, in launch order.
void dump_kernels(const std::vector<ProfileRecord>& records, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IOError("--dump-kernels: cannot create " + dir + ": " + ec.message());
  std::vector<const KernelInfo*> seen;
  for (auto& r : records) {
    const KernelInfo* k = r.kernel.get();
    if (!k || std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(k);
    const std::string stem = (fs::path(dir) / kernel_file_stem(seen.size() - 1, k->name)).string();
    std::ofstream src(stem + Registry::instance().get(k->device).dialect().source_extension);
    src << k->source;
    std::ofstream log(stem + ".log");
    log << k->build_log;
    if (!src || !log) throw IOError("--dump-kernels: cannot write " + stem + ".*");
  }
  std::printf("wrote %zu kernels (source and build log) to %s\n", seen.size(), dir.c_str());
}

int cmd_classify(const Args& a) {
  const std::vector<std::string>& images = a.words;
  const int runs = positive_option(a, "runs", 3);
  const std::string device = a.get("device").empty() ? default_device() : a.get("device");
  Registry::instance().get_available(device);
  auto model = load_classifier(a.get("model", "efficientnet-lite0"));
  for (auto& path : images) {
    Image image = load_image(path);
    ClassifyResult r = classify(*model, image, device, 5, runs);
    std::printf("%s (%dx%d) on %s: cold %.1f ms, warm %.1f ms (median of %d)\n", path.c_str(), image.width,
                image.height, r.device.c_str(), r.cold_seconds * 1e3, r.warm_seconds * 1e3, runs);
    for (auto& p : r.top) std::printf("  %6.2f%%  %-4d %s\n", p.probability * 100.0, p.index, p.label.c_str());
    if (a.has("profile")) std::printf("%s", format_profile_table(r.records).c_str());
    if (a.has("dump-kernels")) dump_kernels(r.records, a.get("dump-kernels"));
  }
  return 0;
}

// One cold run (it compiles), then `runs` warm ones: wall times from the
// first call of `run` to its return; then the kernels of one more run.
struct Timing {
  double cold = 0, warm_median = 0, warm_best = 0;
  std::vector<ProfileRecord> records;
};

// --profile's table: each kernel's median over this many more runs.
int profiled_runs(const Args& a, int runs) { return a.has("profile") ? std::min(runs, 21) : 1; }

Timing time_runs(int runs, const std::function<void()>& run, int profiled_runs = 1) {
  Timing t;
  auto once = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  t.cold = once();
  std::vector<double> warm;
  for (int r = 0; r < runs; ++r) warm.push_back(once());
  std::sort(warm.begin(), warm.end());
  t.warm_median = warm[warm.size() / 2];
  t.warm_best = warm.front();  // what two builds compare by on a machine whose speed drifts
  // The kernel table comes from more runs, untimed: capturing a profile
  // costs host time that a peer framework's timing does not include. With
  // several, each kernel's time is its median over them (one run's times
  // move by tens of percent on a shared machine); the realize walls too.
  std::vector<std::vector<ProfileRecord>> profiled;
  for (int r = 0; r < std::max(1, profiled_runs); ++r) {
    ProfileCapture capture;
    run();
    profiled.push_back(capture.records());
  }
  t.records = profiled.back();
  auto median_of = [&](auto field) {
    std::vector<double> v;
    for (auto& recs : profiled) v.push_back(field(recs));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (size_t i = 0; i < t.records.size(); ++i) {
    bool aligned = true;
    for (auto& recs : profiled) aligned = aligned && recs.size() == t.records.size() && recs[i].kernel->name == t.records[i].kernel->name;
    if (!aligned) break;
    t.records[i].seconds = median_of([&](const std::vector<ProfileRecord>& recs) { return recs[i].seconds; });
    t.records[i].realize_wall = median_of([&](const std::vector<ProfileRecord>& recs) { return recs[i].realize_wall; });
  }
  return t;
}

int cmd_bench_model(const Args& a) {
  const std::string name = a.get("model", "efficientnet-lite0");
  const int runs = positive_option(a, "runs", 10);
  const int batch = positive_option(a, "batch", 1);
  const std::string image_path = a.get("image", "/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg");
  Image image;
  std::error_code ec;
  if (std::filesystem::exists(image_path, ec)) {
    image = load_image(image_path);
  } else {  // latency does not depend on the pixels; a gradient will do
    image.width = image.height = 224;
    image.rgb.resize(224 * 224 * 3);
    for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = float(i % 251) / 250.0f;
  }
  auto model = load_classifier(name);
  auto summary = model->summary();
  // The batch is the image repeated, prepared once on the host: every timed
  // run goes from host pixels to host logits, as a peer framework is timed.
  const std::vector<float> one = model->preprocess(image, "cpu").to_vector();
  std::vector<float> pixels;
  pixels.reserve(one.size() * size_t(batch));
  for (int b = 0; b < batch; ++b) pixels.insert(pixels.end(), one.begin(), one.end());
  Shape shape = summary.input_shape;
  shape[0] = batch;
  std::printf("%s, batch %d, %s input, %.2f GFLOP per image, %d warm runs (host pixels to host logits)\n",
              summary.name.c_str(), batch, shape_str(shape).c_str(), summary.flops * 1e-9, runs);
  for (auto& dev : pick_devices(a.get("device"))) {
    // Each run's phases, kept for the last (profiled) one. The forward goes
    // through the classifier's Jit (core/jit.h), as classify does; with
    // TINYLENS_NOREPLAY=1 it builds the graph every time.
    double phase[3] = {0, 0, 0};  // upload, forward, download
    const Timing timing = time_runs(runs, [&] {
      auto t0 = std::chrono::steady_clock::now();
      auto lap = [&](double& into) {
        auto t = std::chrono::steady_clock::now();
        into = std::chrono::duration<double>(t - t0).count();
        t0 = t;
      };
      Tensor input = Tensor::from_data(pixels, shape, dev);
      lap(phase[0]);
      Tensor logits = model->infer(input);
      lap(phase[1]);
      (void)logits.to_vector();
      lap(phase[2]);
    }, profiled_runs(a, runs));
    const double cold = timing.cold, median = timing.warm_median;
    const std::vector<ProfileRecord>& records = timing.records;
    ProfileTotals t = profile_totals(records);
    std::printf("%-14s cold %9.1f ms   warm median %8.2f ms   %6.1f GFLOP/s   %8.1f images/s   kernels %zu (%.2f ms in "
                "kernels, host overhead %.2f ms, %zu replayed)\n",
                dev.c_str(), cold * 1e3, median * 1e3, summary.flops * batch / median * 1e-9, batch / median,
                records.size(), t.kernel_seconds * 1e3, t.host_overhead() * 1e3, t.replayed);
    std::printf("%-14s one run: upload %.2f ms, forward %.2f ms (%s), download %.2f ms\n", "", phase[0] * 1e3,
                phase[1] * 1e3, model->jit_captured() ? "replayed by the Jit: no graph built" : "graph built and realized",
                phase[2] * 1e3);
    if (a.has("profile")) std::printf("%s", format_profile_table(records).c_str());
  }
  return 0;
}

// Any ONNX model, timed from host inputs to host outputs the way ONNX Runtime
// is timed beside it (scripts/bench onnx): random inputs of the declared
// shapes (dynamic dimensions taken as 1), one cold run, then the median of
// the warm ones.
int cmd_bench_onnx(const Args& a) {
#ifdef TL_HAVE_ONNX
  const std::string path = a.words.at(0);
  const int runs = positive_option(a, "runs", 10), batch = positive_option(a, "batch", 1);
  OnnxModel model(path);
  std::printf("%s: opset %lld, %lld nodes, %lld parameters, %d warm runs\n", path.c_str(),
              (long long)model.opset(), (long long)model.nodes(), (long long)model.parameters(), runs);
  for (auto& dev : pick_devices(a.get("device"))) {
    Generator gen(0);
    std::vector<Tensor> inputs;
    for (const auto& in : model.inputs()) {
      Shape shape = in.shape;
      for (size_t i = 0; i < shape.size(); ++i) shape[i] = shape[i] >= 0 ? shape[i] : i == 0 ? batch : 1;
      Tensor t = in.dtype == "float" || in.dtype == "double" || in.dtype == "float16"
                     ? Tensor::randn(shape, gen, dev)
                     : Tensor::zeros(shape, in.dtype == "bool" ? DType::boolean : DType::i32, dev);
      t.realize();
      inputs.push_back(t);
    }
    const Timing timing = time_runs(runs, [&] {
      for (auto& out : model.run(inputs)) (void)out.to_vector();  // to the host, as a peer returns them
    }, profiled_runs(a, runs));
    const double cold = timing.cold, median = timing.warm_median;
    const std::vector<ProfileRecord>& records = timing.records;
    double kernel_ms = 0;
    for (auto& rec : records) kernel_ms += rec.seconds * 1e3;
    std::printf("%-14s cold %9.1f ms   warm median %8.2f ms (best %.3f)   kernels %zu (%.2f ms in kernels, %s)%s\n",
                dev.c_str(), cold * 1e3, median * 1e3, timing.warm_best * 1e3, records.size(), kernel_ms,
                profiled_runs(a, runs) > 1 ? "medians of the profiled runs" : "last run",
                model.jit_captured(dev) ? ", replayed by the Jit: no graph built" : "");
    if (a.has("profile")) std::printf("%s", format_profile_table(records).c_str());
    if (a.has("dump-kernels")) dump_kernels(records, a.get("dump-kernels"));
  }
  return 0;
#else
  (void)a;
  throw std::runtime_error("this build has no ONNX support (configured with -DTL_WITH_ONNX=OFF)");
#endif
}

int cmd_bench_matmul(const Args& a) {
  const int64_t n = positive_option(a, "n", 1024);
  const int64_t m = positive_option(a, "m", n), k = positive_option(a, "k", n);
  const int repeat = positive_option(a, "repeat", 5);
  for (auto& dev : pick_devices(a.get("device"))) {
    Generator gen(0);
    // x plays a layer's weights: realized once, then read by every run.
    Tensor x = Tensor::randn({m, k}, gen, dev), y = Tensor::randn({k, n}, gen, dev);
    x.realize();
    y.realize();
    double best = 1e30, kernel_best = 1e30;
    for (int r = 0; r < repeat + 1; ++r) {
      ProfileCapture cap;
      auto t0 = std::chrono::steady_clock::now();
      Tensor z = x.matmul(y);
      z.realize();
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) continue;  // the first run compiles
      best = std::min(best, dt);
      kernel_best = std::min(kernel_best, cap.total_seconds());
    }
    double flops = 2.0 * double(m) * double(n) * double(k);
    std::string size = m == n && k == n ? "n=" + std::to_string(n)
                                        : "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
    std::printf("matmul %s on %s: %.3f ms, %.1f GFLOP/s (kernel time %.3f ms, %.1f GFLOP/s)\n", size.c_str(),
                dev.c_str(), best * 1e3, flops / best * 1e-9, kernel_best * 1e3, flops / kernel_best * 1e-9);
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
        kTune,
        kRetune,
        {"dump-kernels", "DIR", "write each kernel's source and build log into DIR"}},
       cmd_classify},
      {"onnx-test", "DIR...", "run ONNX backend test cases (model.onnx + test_data_set_*)",
       "Each DIR is a case folder or a folder of case folders; prints one line per case, then the counts.\n"
       "Exits 1 when a case fails that is not an expected failure.",
       {device_option(false),
        {"expected", "FILE", "expected failures: one case folder name per line, then why"},
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
