// tinylens-cli: the command-line twin of the window. No Qt, so it also runs on
// headless GPU machines.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/io/image.h"
#include "core/models/classifier.h"
#include "core/profile.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"
#ifdef TL_HAVE_ONNX
#include "core/io/onnx.h"
#endif
#include "core/train/command.h"

using namespace tl;

int cmd_selftest(const std::string& device, const std::string& golden_path, bool verbose);  // selftest.cpp
int cmd_inspect(const std::vector<std::string>& args);  // inspect.cpp

namespace {

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;  // --name value, or "1" for flags
  bool has(const std::string& k) const { return options.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback = "") const {
    auto it = options.find(k);
    return it == options.end() ? fallback : it->second;
  }
};

const char* kUsage =
    "usage: tinylens-cli [--device NAME] [--profile] COMMAND [ARGS]\n"
    "commands:\n"
    "  devices                       list every device and its facts\n"
    "  ops                           list the primitive ops\n"
    "  demo                          a small real computation with its kernel table\n"
    "  selftest [--device NAME] [--verbose]   the op suite on one device vs golden data and the CPU device\n"
    "  bench matmul [--n N] [--device NAME|all] [--repeat R]\n"
    "  classify IMAGE... [--device NAME] [--model PATH] [--runs N] [--profile] [--dump-kernels DIR]\n"
    "  onnx-test DIR... [--device NAME] [--expected FILE]   run ONNX backend test cases (model.onnx + test_data_set_*)\n"
    "  inspect MODEL                 what opening MODEL shows: format, inputs/outputs, ops, parameters, FLOPs\n"
    "  bench model [--model efficientnet-lite0] [--device NAME|all] [--runs N] [--image PATH]\n"
    "  train --dataset digits|mnist:DIR --model cnn|mlp --epochs N ...   (train --help for all options)\n";

Args parse(int argc, char** argv) {
  static const std::vector<std::string> flags = {"profile", "help"};
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) == 0) {
      std::string key = s.substr(2);
      if (auto eq = key.find('='); eq != std::string::npos) {
        a.options[key.substr(0, eq)] = key.substr(eq + 1);
      } else if (std::find(flags.begin(), flags.end(), key) != flags.end() || i + 1 >= argc) {
        a.options[key] = "1";
      } else {
        a.options[key] = argv[++i];
      }
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1ull << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  return buf;
}

int cmd_devices() {
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
    std::printf("    fp16: %s, fp64: %s\n", i.fp16 ? "yes" : "no", i.fp64 ? "yes" : "no");
    std::printf("    %s\n", i.available ? "available" : ("unavailable: " + i.unavailable_reason).c_str());
  }
  return 0;
}

int cmd_ops() {
  for (auto& o : primitive_ops()) std::printf("%-12s %s\n", o.name, o.meaning);
  std::printf("%zu primitive ops\n", primitive_ops().size());
  return 0;
}

int cmd_demo(const std::string& device, bool profile) {
  // A tiny two-layer network on random data: matmul, bias, GELU, softmax.
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
  if (profile || true) std::printf("%s", format_profile_table(cap.records()).c_str());
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
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] != '\n') {
      out += message[i];
      continue;
    }
    while (i + 1 < message.size() && message[i + 1] == ' ') ++i;
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
    const bool opencl = k->device.rfind("opencl", 0) == 0;
    const std::string stem = (fs::path(dir) / kernel_file_stem(seen.size() - 1, k->name)).string();
    std::ofstream src(stem + (opencl ? ".cl" : ".c"));
    src << k->source;
    std::ofstream log(stem + ".log");
    log << k->build_log;
    if (!src || !log) throw IOError("--dump-kernels: cannot write " + stem + ".*");
  }
  std::printf("wrote %zu kernels (source and build log) to %s\n", seen.size(), dir.c_str());
}

int positive_option(const Args& a, const std::string& key, int fallback) {
  const std::string text = a.get(key, std::to_string(fallback));
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end || v < 1 || v > 1000000)
    throw std::invalid_argument("--" + key + " must be a positive integer, got '" + text + "'");
  return int(v);
}

int cmd_classify(const Args& a) {
  std::vector<std::string> images(a.positional.begin() + 1, a.positional.end());
  if (images.empty()) {
    std::fprintf(stderr, "tinylens-cli: classify needs at least one image\n");
    return 2;
  }
  const std::string device = a.get("device").empty() ? default_device() : a.get("device");
  Registry::instance().get_available(device);
  auto model = load_classifier(a.get("model", "efficientnet-lite0"));
  const int runs = positive_option(a, "runs", 3);
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

int cmd_bench_model(const Args& a) {
  const std::string name = a.get("model", "efficientnet-lite0");
  const int runs = positive_option(a, "runs", 10);
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
  std::printf("%s, batch 1, %s input, %.2f GFLOP per image, %d warm runs\n", summary.name.c_str(),
              shape_str(summary.input_shape).c_str(), summary.flops * 1e-9, runs);
  for (auto& dev : pick_devices(a.get("device"))) {
    ClassifyResult r = classify(*model, image, dev, 1, runs);
    std::printf("%-14s cold %9.1f ms   warm median %8.2f ms   %6.1f GFLOP/s   kernels %zu (%.2f ms in kernels)\n",
                dev.c_str(), r.cold_seconds * 1e3, r.warm_seconds * 1e3, summary.flops / r.warm_seconds * 1e-9,
                r.records.size(), [&] {
                  double t = 0;
                  for (auto& rec : r.records) t += rec.seconds;
                  return t * 1e3;
                }());
    if (a.has("profile")) std::printf("%s", format_profile_table(r.records).c_str());
  }
  return 0;
}

int cmd_bench_matmul(const Args& a) {
  int64_t n = std::stoll(a.get("n", "1024"));
  int repeat = std::stoi(a.get("repeat", "5"));
  for (auto& dev : pick_devices(a.get("device"))) {
    Generator gen(0);
    Tensor x = Tensor::randn({n, n}, gen, dev), y = Tensor::randn({n, n}, gen, dev);
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
    double flops = 2.0 * double(n) * double(n) * double(n);
    std::printf("matmul n=%lld on %s: %.3f ms, %.1f GFLOP/s (kernel time %.3f ms, %.1f GFLOP/s)\n", (long long)n,
                dev.c_str(), best * 1e3, flops / best * 1e-9, kernel_best * 1e3, flops / kernel_best * 1e-9);
  }
  return 0;
}

int cmd_train(const Args& a) {
  if (a.has("help")) {
    std::fputs(tl::train::kTrainUsage, stdout);
    return 0;
  }
  auto options = a.options;
  tl::train::TrainConfig config = tl::train::parse_train_options(options);
  return tl::train::run_training(config, stdout);
}

// ONNX conformance: one line per case folder, then the counts.
int cmd_onnx_test(const Args& a) {
#ifdef TL_HAVE_ONNX
  if (a.positional.size() < 2) throw std::invalid_argument("onnx-test needs at least one folder of test cases");
  const std::string device = a.get("device", default_device());
  std::map<std::string, std::string> expected;
  if (a.has("expected")) expected = read_onnx_expected_failures(a.get("expected"));
  int pass = 0, fail = 0, unsupported = 0, xfail = 0, float_cases = 0, float_pass = 0, absent = 0;
  std::map<std::string, int> missing_ops;
  for (size_t i = 1; i < a.positional.size(); ++i) {
    std::vector<std::string> link_only;
    auto dirs = onnx_case_dirs(a.positional[i], &link_only);
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
  return fail ? 1 : 0;
#else
  (void)a;
  throw std::runtime_error("this build has no ONNX support (libonnx-dev / protobuf were missing at configure time)");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  if (a.positional.empty() && a.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string cmd = a.positional.empty() ? "demo" : a.positional[0];
  try {
    if (a.has("device") && a.get("device") != "all") set_default_device(a.get("device"));
    if (cmd == "devices") return cmd_devices();
    if (cmd == "ops") return cmd_ops();
    if (cmd == "demo") return cmd_demo(a.get("device") == "all" ? "" : a.get("device"), a.has("profile"));
    if (cmd == "train") return cmd_train(a);
    if (cmd == "bench" && a.positional.size() > 1 && a.positional[1] == "matmul") return cmd_bench_matmul(a);
    if (cmd == "bench" && a.positional.size() > 1 && a.positional[1] == "model") return cmd_bench_model(a);
    if (cmd == "classify") return cmd_classify(a);
    if (cmd == "onnx-test") return cmd_onnx_test(a);
    if (cmd == "inspect") return cmd_inspect(std::vector<std::string>(a.positional.begin() + 1, a.positional.end()));
    if (cmd == "selftest")
      return cmd_selftest(a.get("device", "cpu"), a.get("golden", std::string(TL_SOURCE_DIR) + "/tests/data/golden/ops.bin"),
                          a.has("verbose"));
    std::fprintf(stderr, "tinylens-cli: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tinylens-cli: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}
