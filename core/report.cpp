#include "core/report.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <thread>

#include "core/error.h"
#include "core/memory.h"
#include "core/runtime/registry.h"

namespace tl {

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

MachineInfo machine_info() {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      m.cpu = line.substr(line.find(':') + 2);
      break;
    }
  m.cores = std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
  utsname u{};
  if (uname(&u) == 0) m.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
#if defined(__clang__)
  m.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  m.compiler = "gcc " __VERSION__;
#endif
  for (auto& d : Registry::instance().devices()) {
    const DeviceInfo& i = d->info();
    std::string line = i.name + " (" + i.kind + "): " + i.description;
    if (!i.platform.empty()) line += "; platform " + i.platform;
    if (!i.driver_version.empty()) line += "; driver " + i.driver_version;
    if (!i.language_version.empty()) line += "; " + i.language_version;
    if (!i.available) line += "; unavailable: " + i.unavailable_reason;
    m.devices.push_back(line);
  }
  return m;
}

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, std::isfinite(v) ? v : 0.0);
  return buf;
}

// Horizontal bars, one per row, labels left of them: inline SVG.
std::string bar_chart(const std::vector<std::pair<std::string, double>>& rows, const std::string& unit) {
  if (rows.empty()) return "";
  double top = 0;
  for (auto& r : rows) top = std::max(top, r.second);
  const int row_h = 18, label_w = 260, bar_w = 380;
  std::string svg = "<svg width=\"" + std::to_string(label_w + bar_w + 90) +
                    "\" height=\"" + std::to_string(int(rows.size()) * row_h + 4) + "\" role=\"img\">\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const int y = int(i) * row_h + 2;
    const double w = top > 0 ? rows[i].second / top * bar_w : 0;
    std::string label = rows[i].first.size() > 38 ? rows[i].first.substr(0, 36) + "..." : rows[i].first;
    svg += "<text x=\"" + std::to_string(label_w - 6) + "\" y=\"" + std::to_string(y + 13) +
           "\" text-anchor=\"end\" font-size=\"12\">" + html_escape(label) + "</text>";
    svg += "<rect x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 2) + "\" width=\"" +
           fmt("%.1f", w) + "\" height=\"" + std::to_string(row_h - 4) + "\" fill=\"#4a7fc1\"/>";
    svg += "<text x=\"" + fmt("%.1f", label_w + w + 4) + "\" y=\"" + std::to_string(y + 13) + "\" font-size=\"11\">" +
           fmt("%.3g", rows[i].second) + " " + html_escape(unit) + "</text>\n";
  }
  return svg + "</svg>\n";
}

std::string row(const std::vector<std::string>& cells, bool header = false) {
  std::string out = "<tr>";
  for (auto& c : cells) out += (header ? "<th>" : "<td>") + c + (header ? "</th>" : "</td>");
  return out + "</tr>\n";
}

std::string launch_text(const KernelInfo& k) {
  std::string launch = std::to_string(k.global[0]);
  if (k.global[1] > 1 || k.global[2] > 1) launch += "x" + std::to_string(k.global[1]) + "x" + std::to_string(k.global[2]);
  if (k.local[0] > 0) launch += "/" + std::to_string(k.local[0]);
  return launch;
}

std::string kernel_table(const ReportRun& run) {
  std::string out = "<table class=\"kernels\">\n" +
                    row({"#", "kernel", "device", "launch", "time (us)", "GFLOP/s", "GB/s", "run", "tuner"}, true);
  for (size_t i = 0; i < run.records.size(); ++i) {
    const ProfileRecord& r = run.records[i];
    const KernelInfo& k = *r.kernel;
    out += row({std::to_string(i), "<code>" + html_escape(k.name) + "</code>", html_escape(k.device),
                html_escape(launch_text(k)), fmt("%.1f", r.seconds * 1e6), fmt("%.2f", r.gflops()),
                fmt("%.2f", r.gbps()), run_label(r), html_escape(k.tuned)});
  }
  out += "</table>\n<p>" + html_escape(format_profile_totals(profile_totals(run.records))) + "</p>\n";
  std::map<std::string, double> by_name;
  for (auto& r : run.records) by_name[r.kernel->name] += r.seconds * 1e6;
  std::vector<std::pair<std::string, double>> top(by_name.begin(), by_name.end());
  std::sort(top.begin(), top.end(), [](auto& a, auto& b) { return a.second > b.second; });
  if (top.size() > 12) top.resize(12);
  return out + "<h4>Busiest kernels</h4>\n" + bar_chart(top, "us");
}

std::string trace_section(const ReportRun& run) {
  if (run.trace.host.empty() && run.trace.kernels.empty()) return "";
  const TraceSummary s = summarize_trace(run.trace);
  std::string out = "<h4>Trace summary</h4>\n<p>" + std::to_string(run.trace.host.size()) + " host spans and " +
                    std::to_string(run.trace.kernels.size()) + " kernel launches over " +
                    fmt("%.3f", s.span_seconds * 1e3) + " ms (every run of this device: the cold one too).</p>\n";
  out += "<table>\n" + row({"host phase", "time (ms)"}, true);
  for (auto& [phase, seconds] : s.phases) out += row({html_escape(phase), fmt("%.3f", seconds * 1e3)});
  out += "</table>\n<table>\n" + row({"device track", "kernels", "time (ms)"}, true);
  for (auto& d : s.devices)
    out += row({html_escape(d.name), std::to_string(d.kernels), fmt("%.3f", d.seconds * 1e3)});
  return out + "</table>\n";
}

// The live memory at each launch as an area, the peak named (core/memory.h).
std::string memory_section(const ReportRun& run) {
  const MemoryProfile m = memory_profile(run.records);
  if (m.live_bytes.empty() || m.peak_bytes == 0) return "";
  auto mib = [](size_t b) { return fmt("%.3f MiB", double(b) / (1024.0 * 1024.0)); };
  std::string out = "<h4>Memory</h4>\n<p>peak " + mib(m.peak_bytes) + " live at launch " +
                    std::to_string(m.peak_launch) + " (<code>" + html_escape(run.records[m.peak_launch].kernel->name) +
                    "</code>); " + std::to_string(m.values.size()) + " values in " + std::to_string(m.buffers) +
                    " buffers (" + mib(m.buffer_bytes) + "), " + std::to_string(m.reused_buffers) +
                    " reused; read only (weights, inputs): " + mib(m.input_bytes) + "</p>\n";
  const double w = 700, h = 120, step = w / double(m.live_bytes.size());
  std::string points = "0," + fmt("%.1f", h);
  for (size_t i = 0; i < m.live_bytes.size(); ++i) {
    const std::string y = fmt("%.1f", h - double(m.live_bytes[i]) / double(m.peak_bytes) * (h - 4));
    points += " " + fmt("%.1f", step * double(i)) + "," + y + " " + fmt("%.1f", step * double(i + 1)) + "," + y;
  }
  points += " " + fmt("%.1f", w) + "," + fmt("%.1f", h);
  return out + "<svg width=\"700\" height=\"120\" role=\"img\"><polygon points=\"" + points +
         "\" fill=\"#9ab8e0\" stroke=\"#4a7fc1\"/></svg>\n<p>live memory per launch, 0 to " +
         std::to_string(m.live_bytes.size() - 1) + "</p>\n";
}

std::string run_section(const ReportRun& run) {
  std::string out = "<h2>On " + html_escape(run.device) + "</h2>\n<p>cold run " +
                    fmt("%.1f", run.cold_seconds * 1e3) + " ms (compiles included), warm run " +
                    fmt("%.2f", run.warm_seconds * 1e3) + " ms (median of " + std::to_string(run.warm_runs) +
                    ")</p>\n<h3>Predictions</h3>\n<table>\n" + row({"class", "label", "probability"}, true);
  std::vector<std::pair<std::string, double>> bars;
  for (auto& p : run.top) {
    out += row({std::to_string(p.index), html_escape(p.label), fmt("%.2f%%", double(p.probability) * 100)});
    bars.push_back({p.label, double(p.probability) * 100});
  }
  out += "</table>\n" + bar_chart(bars, "%");
  out += "<h3>Kernels</h3>\n" + kernel_table(run) + trace_section(run) + memory_section(run);
  return out;
}

std::string compare_section(const ReportInput& in) {
  if (in.runs.size() < 2) return "";
  double best = in.runs[0].warm_seconds, diff = 0;
  for (auto& r : in.runs) best = std::min(best, r.warm_seconds);
  std::string out = "<h2>Comparison</h2>\n<table>\n" +
                    row({"device", "warm (ms)", "kernels (ms)", "slower than the fastest", "top-1"}, true);
  std::vector<std::pair<std::string, double>> bars;
  for (auto& r : in.runs) {
    const ProfileTotals t = profile_totals(r.records);
    out += row({html_escape(r.device), fmt("%.2f", r.warm_seconds * 1e3), fmt("%.2f", t.kernel_seconds * 1e3),
                best > 0 ? fmt("%.2fx", r.warm_seconds / best) : "-", r.top.empty() ? "-" : html_escape(r.top[0].label)});
    bars.push_back({r.device, r.warm_seconds * 1e3});
    if (!r.top.empty() && !in.runs[0].top.empty())
      diff = std::max(diff, std::fabs(double(r.top[0].probability) - double(in.runs[0].top[0].probability)));
  }
  out += "</table>\n<p>Largest difference of the top-1 probability from " + html_escape(in.runs[0].device) + ": " +
         fmt("%.3g", diff) + "</p>\n";
  return out + bar_chart(bars, "ms");
}

const char* kStyle =
    "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:0.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:left}th{background:#eef}"
    "code{font-size:12px}h2{border-bottom:1px solid #aaa}";

}  // namespace

std::string report_html(const ReportInput& in, const MachineInfo& m) {
  std::time_t now = std::time(nullptr);
  char when[64] = "";
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                    html_escape(in.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" +
                    html_escape(in.title) + "</h1>\n<table>\n";
  out += row({"model", html_escape(in.model) + (in.model_details.empty() ? "" : " (" + html_escape(in.model_details) + ")")});
  out += row({"image", html_escape(in.image) + (in.image_width > 0 ? " (" + std::to_string(in.image_width) + "x" +
                                                                         std::to_string(in.image_height) + ")"
                                                                   : "")});
  std::string devices;
  for (auto& r : in.runs) devices += (devices.empty() ? "" : ", ") + html_escape(r.device);
  out += row({"devices", devices});
  out += row({"written", std::string(when) + (in.made_by.empty() ? "" : " by " + html_escape(in.made_by))});
  out += "</table>\n";
  for (auto& r : in.runs) out += run_section(r);
  out += compare_section(in);
  out += "<h2>Machine</h2>\n<table>\n";
  out += row({"CPU", html_escape(m.cpu)}) + row({"cores", html_escape(m.cores)}) + row({"system", html_escape(m.os)}) +
         row({"built with", html_escape(m.compiler)});
  for (auto& d : m.devices) out += row({"device", html_escape(d)});
  return out + "</table>\n</body>\n</html>\n";
}

void write_report(const std::string& path, const ReportInput& input) {
  const std::string text = report_html(input, machine_info());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IOError("cannot write the report to " + path + ": " + std::strerror(errno));
  f << text;
  f.close();
  if (!f) throw IOError("cannot write the report to " + path + ": " + std::strerror(errno));
}

}  // namespace tl
