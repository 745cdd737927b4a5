// A report to share: one self-contained HTML file (no scripts, no links,
// no files beside it; charts are inline SVG) with what a run showed: the
// model, the image, each device's predictions and timings, the kernel table,
// the trace's summary, a comparison when several devices ran, and the
// machine. `tinylens-cli report` and the window's File > Export Report both
// write it from here, so the two say the same.
#pragma once
#include <string>
#include <vector>

#include "core/models/classifier.h"
#include "core/profile.h"
#include "core/trace.h"

namespace tl {

struct ReportRun {
  std::string device;
  std::vector<Prediction> top;
  double cold_seconds = 0, warm_seconds = 0;
  int warm_runs = 0;
  std::vector<ProfileRecord> records;  // the kernel table: one warm run's kernels
  TraceDocument trace;                 // may be empty
};

struct ReportInput {
  std::string title = "tinylens report";
  std::string model, model_details;  // name or path; "12 layers, 0.39 GFLOP per image"
  std::string image;                 // path
  int image_width = 0, image_height = 0;
  std::vector<ReportRun> runs;
  std::string made_by;               // "tinylens-cli report", "tinylens (window)"
};

struct MachineInfo {
  std::string cpu, cores, os, compiler;
  std::vector<std::string> devices;  // one line each: name, kind, description, driver, language
};
MachineInfo machine_info();

std::string html_escape(const std::string& text);
std::string report_html(const ReportInput& input, const MachineInfo& machine);
// Writes report_html(input, machine_info()); throws IOError naming the path.
void write_report(const std::string& path, const ReportInput& input);

}  // namespace tl
