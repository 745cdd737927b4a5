// tinylens-cli: the command-line twin of the window. No Qt, so it also runs on
// headless GPU machines.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/ops.h"
#include "core/profile.h"
#include "core/runtime/registry.h"
#include "core/tensor.h"

using namespace tl;

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
    "  selftest [--device NAME]      run the op suite against the CPU device\n"
    "  bench matmul [--n N] [--device NAME|all] [--repeat R]\n";

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
    if (cmd == "bench" && a.positional.size() > 1 && a.positional[1] == "matmul") return cmd_bench_matmul(a);
    std::fprintf(stderr, "tinylens-cli: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tinylens-cli: %s\n", e.what());
    return 1;
  }
}
