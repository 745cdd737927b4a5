// tinylens-cli's benchmarks of a whole run: bench model, bench onnx, and
// bench matmul; each kernel table is the median of the profiled runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/cli_common.h"
#include "core/io/image.h"
#include "core/models/classifier.h"
#include "core/memory.h"
#include "core/profile.h"
#include "core/realize.h"
#include "core/tensor.h"
#include "core/trace.h"
#ifdef TL_HAVE_ONNX
#include "core/io/onnx.h"
#endif

using namespace tl;

namespace tlcli {

namespace {

// One cold run (it compiles), then `runs` warm ones: wall times from the
// first call of `run` to its return; then the kernels of one more run.
struct Timing {
  double cold = 0, warm_median = 0, warm_best = 0;
  std::vector<ProfileRecord> records;
};

// --profile's table: each kernel's median over this many more runs.
int profiled_runs(const Args& a, int runs) { return a.has("profile") ? std::min(runs, 21) : 1; }

// With `trace`, the last profiled run is traced (core/trace.h) and the trace
// holds the kernel table's records, so its durations are the table's.
Timing time_runs(int runs, const std::function<void()>& run, int profiled_runs = 1, TraceDocument* trace = nullptr) {
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
    std::optional<TraceCapture> traced;
    if (trace && r + 1 == std::max(1, profiled_runs)) traced.emplace();
    {
      TraceScope span("run");
      run();
    }
    profiled.push_back(capture.records());
    if (traced) *trace = trace_document(*traced);
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
  if (trace) trace->kernels = t.records;
  return t;
}

}  // namespace

int cmd_bench_model(const Args& a) {
  const std::string name = a.get("model", "efficientnet-lite0");
  if (a.has("trace")) check_writable(a.get("trace"), "the trace");
  TraceDocument trace;
  trace.about = {{"command", "bench model"}, {"model", name}};
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
    TraceDocument one_trace;
    const Timing timing = time_runs(runs, [&] {
      auto t0 = std::chrono::steady_clock::now();
      auto lap = [&](double& into) {
        auto t = std::chrono::steady_clock::now();
        into = std::chrono::duration<double>(t - t0).count();
        t0 = t;
      };
      Tensor input = Tensor::from_data(pixels, shape, dev);
      lap(phase[0]);
      std::optional<TraceScope> forward(std::in_place, "forward");
      Tensor logits = model->infer(input);
      forward.reset();
      lap(phase[1]);
      (void)logits.to_vector();
      lap(phase[2]);
    }, profiled_runs(a, runs), a.has("trace") ? &one_trace : nullptr);
    merge_trace(trace, std::move(one_trace));
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
    if (a.has("memory")) std::printf("%s", format_memory(memory_profile(records), records).c_str());
  }
  if (a.has("trace")) save_trace(a.get("trace"), trace);
  return 0;
}

// Any ONNX model, timed from host inputs to host outputs the way ONNX Runtime
// is timed beside it (scripts/bench onnx): random inputs of the declared
// shapes (a dynamic first dimension taken as --batch, others as 1), one cold run, then the median of
// the warm ones.
int cmd_bench_onnx(const Args& a) {
#ifdef TL_HAVE_ONNX
  const std::string path = a.words.at(0);
  const int runs = positive_option(a, "runs", 10), batch = positive_option(a, "batch", 1);
  if (a.has("trace")) check_writable(a.get("trace"), "the trace");
  TraceDocument trace;
  trace.about = {{"command", "bench onnx"}, {"model", path}};
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
    TraceDocument one_trace;
    const Timing timing = time_runs(runs, [&] {
      for (auto& out : model.run(inputs)) (void)out.to_vector();  // to the host, as a peer returns them
    }, profiled_runs(a, runs), a.has("trace") ? &one_trace : nullptr);
    merge_trace(trace, std::move(one_trace));
    const double cold = timing.cold, median = timing.warm_median;
    const std::vector<ProfileRecord>& records = timing.records;
    double kernel_ms = 0;
    for (auto& rec : records) kernel_ms += rec.seconds * 1e3;
    std::printf("%-14s cold %9.1f ms   warm median %8.2f ms (best %.3f)   kernels %zu (%.2f ms in kernels, %s)%s\n",
                dev.c_str(), cold * 1e3, median * 1e3, timing.warm_best * 1e3, records.size(), kernel_ms,
                profiled_runs(a, runs) > 1 ? "medians of the profiled runs" : "last run",
                model.jit_captured(dev) ? ", replayed by the Jit: no graph built" : "");
    if (a.has("profile")) std::printf("%s", format_profile_table(records).c_str());
    if (a.has("memory")) std::printf("%s", format_memory(memory_profile(records), records).c_str());
    if (a.has("dump-kernels")) dump_kernels(records, a.get("dump-kernels"));
  }
  if (a.has("trace")) save_trace(a.get("trace"), trace);
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
    Tensor z;
    for (int r = 0; r < repeat + 1; ++r) {
      ProfileCapture cap;
      auto t0 = std::chrono::steady_clock::now();
      z = x.matmul(y);
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
    // How exact the product is: 256 entries against their sums in float64,
    // each error over the sum of |x_ik * y_kj| (what float32 rounding scales with).
    const std::vector<float> xs = x.to_vector(), ys = y.to_vector(), zs = z.to_vector();
    double worst = 0, total = 0;
    for (int64_t s = 0; s < 256; ++s) {
      const int64_t i = (s * 7919) % m, j = (s * 104729) % n;
      double exact = 0, scale = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double p = double(xs[size_t(i * k + q)]) * double(ys[size_t(q * n + j)]);
        exact += p, scale += std::fabs(p);
      }
      const double e = std::fabs(double(zs[size_t(i * n + j)]) - exact) / std::max(scale, 1e-30);
      worst = std::max(worst, e), total += e;
    }
    std::printf("  error against float64 over 256 entries (|error| / sum |x y|): mean %.2e, worst %.2e\n",
                total / 256, worst);
  }
  return 0;
}

}  // namespace tlcli
