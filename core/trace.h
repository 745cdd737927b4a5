// Traces: what a run did over time, on the host and on each device, written
// as the Trace Event Format JSON that Perfetto (ui.perfetto.dev) and
// chrome://tracing open.
//
// A TraceCapture, while alive on a thread, collects two things: host spans
// (TraceScope: realize, schedule, render, compile, wait, upload, download,
// and whatever phases the caller marks, such as "load model"), and every
// kernel launch, as a timed ProfileCapture does, with the time each was
// queued (ProfileRecord::enqueued). The kernel table and the trace are made
// from the same records, so the durations agree by construction.
//
// Device spans. Devices report each kernel's duration, not its start: a
// kernel is drawn on its device's track from the later of its enqueue and
// the end of the kernel before it on that device (the queue runs kernels in
// order). The durations are measured; the starts are this placement.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/profile.h"

namespace tl {

// Every span, and ProfileRecord::enqueued, is in steady_seconds() (core/profile.h).

struct HostSpan {
  std::string name;      // "schedule", "compile 12 kernels", "load model"
  std::string category;  // "host" unless the caller says otherwise
  double start = 0, seconds = 0;  // steady_seconds() time
};

class TraceCapture {
 public:
  TraceCapture();
  ~TraceCapture();
  TraceCapture(const TraceCapture&) = delete;
  TraceCapture& operator=(const TraceCapture&) = delete;
  const std::vector<HostSpan>& spans() const { return spans_; }
  const std::vector<ProfileRecord>& records() const { return profile_.records(); }
  double origin() const { return origin_; }  // steady_seconds() when the capture began
  static bool active();                      // some capture is alive on this thread
  static void add(const HostSpan& span);     // to every capture alive on this thread

 private:
  ProfileCapture profile_;
  std::vector<HostSpan> spans_;
  double origin_;
  TraceCapture* parent_;
};

// A host span from construction to destruction, kept only while a capture is
// alive on this thread (the name is built only then).
class TraceScope {
 public:
  explicit TraceScope(const char* name, const char* category = "host");
  explicit TraceScope(std::string name, const char* category = "host");
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  bool on_;
  std::string name_;
  const char* category_;
  double start_ = 0;
};

// What a trace file holds: the host spans, the kernels in launch order, and
// a few lines that say what ran ("command", "model", "device", ...).
struct TraceDocument {
  std::vector<HostSpan> host;
  std::vector<ProfileRecord> kernels;
  double origin = 0;
  std::vector<std::pair<std::string, std::string>> about;
};
TraceDocument trace_document(const TraceCapture& capture);

// Where the trace draws each kernel (see the top of this file).
struct DeviceSpan {
  size_t record = 0;  // index into TraceDocument::kernels
  double start = 0, seconds = 0;
};
std::vector<DeviceSpan> place_kernels(const std::vector<ProfileRecord>& kernels, double origin);

std::string trace_json(const TraceDocument& doc);
// Writes trace_json(doc) to `path`; throws IOError naming the path and the
// reason when it cannot be written.
void write_trace(const std::string& path, const TraceDocument& doc);

// The trace in a few numbers: the time of each host phase (summed over its
// spans, by name with counts such as "compile 12 kernels" taken as
// "compile"), and per device the kernels, their time and the busiest ones.
struct TraceSummary {
  double span_seconds = 0;  // from the first event to the last
  std::vector<std::pair<std::string, double>> phases;  // host phase -> seconds, largest first
  struct Device {
    std::string name;
    size_t kernels = 0;
    double seconds = 0;
  };
  std::vector<Device> devices;
  std::vector<std::pair<std::string, double>> top_kernels;  // by summed time, at most 10
};
TraceSummary summarize_trace(const TraceDocument& doc);

}  // namespace tl
