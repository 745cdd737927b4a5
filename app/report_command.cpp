// `tinylens-cli report IMAGE --model M [--device NAME|all] -o FILE`: the
// window's File > Export Report from the command line (core/report.h).
#include <cstdio>
#include <optional>
#include <string>

#include "app/cli_common.h"
#include "core/io/image.h"
#include "core/models/classifier.h"
#include "core/report.h"
#include "core/trace.h"

using namespace tl;

namespace tlcli {

int cmd_report(const Args& a) {
  const std::string out = a.get("output");
  if (out.empty()) throw UsageError("report needs -o FILE (where to write the HTML)");
  check_writable(out, "the report");
  const int runs = positive_option(a, "runs", 3);
  const std::vector<std::string> devices = pick_devices(a.get("device"));
  ReportInput input;
  input.model = a.get("model", "efficientnet-lite0");
  input.image = a.words.at(0);
  input.made_by = "tinylens-cli report";
  Image image = load_image(input.image);
  input.image_width = image.width, input.image_height = image.height;
  auto model = load_classifier(input.model);
  const ModelSummary summary = model->summary();
  char details[160];
  std::snprintf(details, sizeof details, "%s, %lld layers, %lld parameters, %.3f GFLOP per image",
                summary.name.c_str(), (long long)summary.layers, (long long)summary.parameters, summary.flops * 1e-9);
  input.model_details = details;
  for (auto& dev : devices) {
    ReportRun run;
    std::optional<TraceCapture> trace(std::in_place);
    ClassifyResult r = classify(*model, image, dev, 5, runs);
    run.trace = trace_document(*trace);
    trace.reset();
    run.device = r.device;
    run.top = r.top;
    run.cold_seconds = r.cold_seconds, run.warm_seconds = r.warm_seconds, run.warm_runs = runs;
    run.records = r.records;
    std::printf("%s on %s: %s %.2f%%, warm %.2f ms, %zu kernels\n", input.image.c_str(), r.device.c_str(),
                r.top.empty() ? "-" : r.top[0].label.c_str(), r.top.empty() ? 0.0 : r.top[0].probability * 100.0,
                r.warm_seconds * 1e3, r.records.size());
    input.runs.push_back(std::move(run));
  }
  write_report(out, input);
  std::printf("wrote the report to %s\n", out.c_str());
  return 0;
}

}  // namespace tlcli
