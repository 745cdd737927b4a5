// File > Export Trace and File > Export Report: written on the worker from
// results the window already holds (core/trace.h, core/report.h), so the
// files say what the panes show.
#include <cstdio>

#include "core/report.h"
#include "core/trace.h"
#include "ui/session.h"

namespace tlui {

namespace {

tl::ReportRun reportRun(const RunData& run) {
  tl::ReportRun out;
  out.device = run.device.toStdString();
  out.top = run.top;
  out.cold_seconds = run.coldSeconds;
  out.warm_seconds = run.warmSeconds;
  out.warm_runs = run.warmRuns;
  out.records = run.records;
  if (run.trace) out.trace = *run.trace;
  return out;
}

// The shown run first; a comparison's runs (of the same model and image)
// after it, each device once.
tl::ReportInput reportInput(const RunData& run, const ComparePtr& compare, const ModelPtr& model) {
  tl::ReportInput in;
  in.model = run.model.toStdString();
  in.image = run.imagePath.toStdString();
  in.made_by = "tinylens (the window)";
  if (model && model->nameOrPath == run.model) {
    const tl::ModelSummary& s = model->summary;
    char details[200];
    std::snprintf(details, sizeof details, "%s, %lld layers, %lld parameters, %.3f GFLOP per image", s.name.c_str(),
                  (long long)s.layers, (long long)s.parameters, s.flops * 1e-9);
    in.model_details = details;
  }
  in.runs.push_back(reportRun(run));
  if (compare)
    for (const RunPtr& other : compare->runs) {
      if (other->model != run.model || other->imagePath != run.imagePath) continue;
      const std::string device = other->device.toStdString();
      bool seen = false;
      for (auto& r : in.runs) seen = seen || r.device == device;
      if (!seen) in.runs.push_back(reportRun(*other));
    }
  return in;
}

}  // namespace

quint64 Session::exportTrace(const QString& path, const RunPtr& run) {
  quint64 job = nextJob_++;
  post([this, job, path, run] {
    try {
      if (!run || !run->trace) throw std::runtime_error("there is no run to trace yet: classify an image first");
      tl::TraceDocument doc = *run->trace;
      doc.about = {{"model", run->model.toStdString()},
                   {"image", run->imagePath.toStdString()},
                   {"device", run->device.toStdString()},
                   {"made by", "tinylens (the window)"}};
      tl::write_trace(path.toStdString(), doc);
      QMetaObject::invokeMethod(this, [this, job, path] { emit exported(job, path); }, Qt::QueuedConnection);
    } catch (const std::exception& e) {
      QString msg = QString("Could not export the trace: %1").arg(e.what());
      QMetaObject::invokeMethod(this, [this, job, msg] { emit failed(job, FailureSource::Export, msg); },
                                Qt::QueuedConnection);
    }
  });
  return job;
}

quint64 Session::exportReport(const QString& path, const RunPtr& run, const ComparePtr& compare,
                              const ModelPtr& model) {
  quint64 job = nextJob_++;
  post([this, job, path, run, compare, model] {
    try {
      if (!run) throw std::runtime_error("there is no result to report yet: classify an image first");
      tl::write_report(path.toStdString(), reportInput(*run, compare, model));
      QMetaObject::invokeMethod(this, [this, job, path] { emit exported(job, path); }, Qt::QueuedConnection);
    } catch (const std::exception& e) {
      QString msg = QString("Could not export the report: %1").arg(e.what());
      QMetaObject::invokeMethod(this, [this, job, msg] { emit failed(job, FailureSource::Export, msg); },
                                Qt::QueuedConnection);
    }
  });
  return job;
}

}  // namespace tlui
