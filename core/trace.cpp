#include "core/trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "core/error.h"

namespace tl {

namespace {
thread_local TraceCapture* current_trace = nullptr;

// JSON string contents: quotes, backslashes and control characters escaped;
// other bytes pass (names and paths are UTF-8 or plain bytes of a file name).
void append_escaped(std::string& out, const std::string& s) {
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  append_escaped(out, s);
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string launch_size(const KernelInfo& k) {
  std::string s = std::to_string(k.global[0]) + "x" + std::to_string(k.global[1]) + "x" + std::to_string(k.global[2]);
  if (k.local[0] > 0)  // a local size of 0 in a higher dimension is 1 there
    s += " / " + std::to_string(k.local[0]) + "x" + std::to_string(std::max<int64_t>(k.local[1], 1)) + "x" +
         std::to_string(std::max<int64_t>(k.local[2], 1));
  return s;
}

// The phase a span belongs to: its name before the first number ("compile
// 12 kernels" -> "compile", "warm run 2" -> "warm run").
std::string phase_of(const std::string& name) {
  for (size_t i = 1; i + 1 < name.size(); ++i)
    if (name[i] == ' ' && name[i + 1] >= '0' && name[i + 1] <= '9') return name.substr(0, i);
  return name;
}

}  // namespace

TraceCapture::TraceCapture() : profile_(true), origin_(steady_seconds()), parent_(current_trace) { current_trace = this; }
TraceCapture::~TraceCapture() { current_trace = parent_; }

bool TraceCapture::active() { return current_trace != nullptr; }

void TraceCapture::add(const HostSpan& span) {
  for (auto* c = current_trace; c; c = c->parent_) c->spans_.push_back(span);
}

TraceScope::TraceScope(const char* name, const char* category) : on_(TraceCapture::active()), category_(category) {
  if (!on_) return;
  name_ = name;
  start_ = steady_seconds();
}

TraceScope::TraceScope(std::string name, const char* category) : on_(TraceCapture::active()), category_(category) {
  if (!on_) return;
  name_ = std::move(name);
  start_ = steady_seconds();
}

TraceScope::~TraceScope() {
  if (on_) TraceCapture::add({std::move(name_), category_, start_, steady_seconds() - start_});
}

TraceDocument trace_document(const TraceCapture& capture) {
  TraceDocument doc;
  doc.host = capture.spans();
  doc.kernels = capture.records();
  doc.origin = capture.origin();
  return doc;
}

std::vector<DeviceSpan> place_kernels(const std::vector<ProfileRecord>& kernels, double origin) {
  std::vector<DeviceSpan> out;
  std::map<std::string, double> free_at;  // device -> when its last kernel ended
  for (size_t i = 0; i < kernels.size(); ++i) {
    const ProfileRecord& r = kernels[i];
    auto [it, fresh] = free_at.try_emplace(r.kernel->device, origin);
    (void)fresh;
    DeviceSpan s;
    s.record = i;
    s.start = std::max(it->second, r.enqueued > 0 ? r.enqueued : it->second);
    s.seconds = std::max(r.seconds, 0.0);
    it->second = s.start + s.seconds;
    out.push_back(s);
  }
  return out;
}

namespace {

// The "M" events that name the process and its tracks, host first.
void append_track_names(std::string& out, const std::vector<std::string>& devices) {
  auto meta = [&](const char* what, int tid, const std::string& name) {
    out += "{\"name\":\"" + std::string(what) + "\",\"ph\":\"M\",\"pid\":1";
    if (tid > 0) out += ",\"tid\":" + std::to_string(tid);
    out += ",\"args\":{\"" + std::string(what == std::string("thread_sort_index") ? "sort_index" : "name") + "\":" +
           name + "}},\n";
  };
  meta("process_name", 0, quoted("tinylens"));
  meta("thread_name", 1, quoted("host"));
  meta("thread_sort_index", 1, "0");
  for (size_t d = 0; d < devices.size(); ++d) {
    meta("thread_name", int(d) + 2, quoted("device " + devices[d]));
    meta("thread_sort_index", int(d) + 2, std::to_string(d + 1));
  }
}

std::string kernel_args(const ProfileRecord& r, size_t index) {
  const KernelInfo& k = *r.kernel;
  std::string ops;
  for (auto& o : k.ops) ops += (ops.empty() ? "" : " ") + o;
  std::string a = "{\"index\":" + std::to_string(index) + ",\"device\":" + quoted(k.device) +
                  ",\"flops\":" + number(k.flops) + ",\"bytes\":" + number(k.bytes) +
                  ",\"gflops_per_s\":" + number(r.gflops()) + ",\"gb_per_s\":" + number(r.gbps()) +
                  ",\"launch\":" + quoted(launch_size(k)) + ",\"output_shape\":" + quoted(k.output_shape) +
                  ",\"ops\":" + quoted(ops) + ",\"run\":" + quoted(run_label(r)) +
                  ",\"replayed\":" + (r.replayed ? "true" : "false") +
                  ",\"from_kernel_cache\":" + (k.cache_hit ? "true" : "false");
  if (!k.tuned.empty()) a += ",\"tuner\":" + quoted(format_tune_line(k));
  return a + "}";
}

}  // namespace

std::string trace_json(const TraceDocument& doc) {
  std::vector<std::string> devices;
  for (auto& r : doc.kernels)
    if (std::find(devices.begin(), devices.end(), r.kernel->device) == devices.end()) devices.push_back(r.kernel->device);
  std::string out = "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{";
  for (size_t i = 0; i < doc.about.size(); ++i)
    out += (i ? "," : "") + quoted(doc.about[i].first) + ":" + quoted(doc.about[i].second);
  out += "},\n\"traceEvents\":[\n";
  append_track_names(out, devices);
  auto micro = [&](double t) { return number((t - doc.origin) * 1e6); };
  // Launches are host spans too: from each record's enqueue.
  for (auto& s : doc.host)
    out += "{\"name\":" + quoted(s.name) + ",\"cat\":" + quoted(s.category) + ",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":" +
           micro(s.start) + ",\"dur\":" + number(s.seconds * 1e6) + "},\n";
  for (auto& r : doc.kernels)
    if (r.enqueued > 0 && r.enqueue_seconds > 0)
      out += "{\"name\":" + quoted("launch " + r.kernel->name) +
             ",\"cat\":\"launch\",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":" + micro(r.enqueued) +
             ",\"dur\":" + number(r.enqueue_seconds * 1e6) + "},\n";
  for (auto& s : place_kernels(doc.kernels, doc.origin)) {
    const ProfileRecord& r = doc.kernels[s.record];
    const size_t track = size_t(std::find(devices.begin(), devices.end(), r.kernel->device) - devices.begin()) + 2;
    out += "{\"name\":" + quoted(r.kernel->name) + ",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":" +
           std::to_string(track) + ",\"ts\":" + micro(s.start) + ",\"dur\":" + number(s.seconds * 1e6) +
           ",\"args\":" + kernel_args(r, s.record) + "},\n";
  }
  if (out.size() >= 2 && out.compare(out.size() - 2, 2, ",\n") == 0) out.erase(out.size() - 2, 1);
  return out + "]}\n";
}

void write_trace(const std::string& path, const TraceDocument& doc) {
  const std::string text = trace_json(doc);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IOError("cannot write the trace to " + path + ": " + std::strerror(errno));
  f << text;
  f.close();
  if (!f) throw IOError("cannot write the trace to " + path + ": " + std::strerror(errno));
}

TraceSummary summarize_trace(const TraceDocument& doc) {
  TraceSummary t;
  double first = 0, last = 0;
  bool any = false;
  auto extend = [&](double start, double seconds) {
    first = any ? std::min(first, start) : start;
    last = any ? std::max(last, start + seconds) : start + seconds;
    any = true;
  };
  std::map<std::string, double> phases;
  for (auto& s : doc.host) {
    phases[phase_of(s.name)] += s.seconds;
    extend(s.start, s.seconds);
  }
  for (auto& r : doc.kernels)
    if (r.enqueue_seconds > 0) phases["launch"] += r.enqueue_seconds;
  std::map<std::string, double> by_kernel;
  for (auto& s : place_kernels(doc.kernels, doc.origin)) {
    const ProfileRecord& r = doc.kernels[s.record];
    extend(s.start, s.seconds);
    auto it = std::find_if(t.devices.begin(), t.devices.end(), [&](auto& d) { return d.name == r.kernel->device; });
    if (it == t.devices.end()) it = t.devices.insert(t.devices.end(), {r.kernel->device, 0, 0});
    ++it->kernels;
    it->seconds += s.seconds;
    by_kernel[r.kernel->name] += s.seconds;
  }
  t.span_seconds = last - first;
  auto largest_first = [](auto& a, auto& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); };
  t.phases.assign(phases.begin(), phases.end());
  std::sort(t.phases.begin(), t.phases.end(), largest_first);
  t.top_kernels.assign(by_kernel.begin(), by_kernel.end());
  std::sort(t.top_kernels.begin(), t.top_kernels.end(), largest_first);
  if (t.top_kernels.size() > 10) t.top_kernels.resize(10);
  return t;
}

}  // namespace tl
