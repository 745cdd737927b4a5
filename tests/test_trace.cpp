// Traces (core/trace.h) and reports (core/report.h): the JSON parses with a
// real parser, holds one kernel event per kernel of the run with the kernel
// table's durations, names its tracks, and places each kernel after its
// launch; the CLI's --trace and report write what its kernel table printed;
// the HTML report refers to nothing outside itself.
#include <QtTest/QtTest>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/profile.h"
#include "core/report.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "tests/cli_run.h"
#include "tests/onnx_builder.h"
#include "tests/testing.h"

using tl::Tensor;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Run = tltest::CliRun;

Run run_cli(const QStringList& args) {
  return tltest::run_cli(args, QProcessEnvironment::systemEnvironment(), tltest::kRunTimeoutMs);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A few kernels: a product, an elementwise tail and a reduction.
Tensor small_graph() {
  tl::Generator gen(3);
  Tensor a = Tensor::randn({16, 24}, gen, "cpu"), b = Tensor::randn({24, 8}, gen, "cpu");
  a.realize();
  b.realize();
  return (a.matmul(b).relu() * 0.5 + 1.0).sum({1});
}

std::vector<json> events_of(const json& doc, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (auto& e : doc.at("traceEvents"))
    if (e.at("ph") == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}

// tid -> track name, from the "M" thread_name events.
std::map<int, std::string> track_names(const json& doc) {
  std::map<int, std::string> out;
  for (auto& e : events_of(doc, "M"))
    if (e.at("name") == "thread_name") out[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
  return out;
}

// The rows of a --profile table: (name, time in us).
std::vector<std::pair<QString, double>> table_rows(const QString& out) {
  std::vector<std::pair<QString, double>> rows;
  QRegularExpression line(R"(^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+([0-9.]+)\s+[0-9.]+\s+[0-9.]+\s+)");
  for (const QString& l : out.split('\n')) {
    auto m = line.match(l);
    if (m.hasMatch()) rows.push_back({m.captured(2), m.captured(5).toDouble()});
  }
  return rows;
}

std::string write_tiny_onnx(const fs::path& path) {
  return tltest::tiny_classifier(path, [](int i) { return float(std::sin(i * 0.7) * 0.5); }, {0.1f, -0.2f, 0.0f, 0.3f});
}

}  // namespace

class TestTrace : public QObject {
  Q_OBJECT
  QTemporaryDir scratch_;
  std::string path(const char* name) const { return (fs::path(scratch_.path().toStdString()) / name).string(); }

 private slots:
  void initTestCase() { QVERIFY(scratch_.isValid()); }

  // One kernel event per kernel, in launch order, with the table's durations
  // and arguments, on a track named after its device; the host phases of a
  // planned realize on the host track.
  void traceHoldsEveryKernelOfTheRun() {
    Tensor y = small_graph();
    tl::TraceDocument doc;
    {
      tl::TraceCapture capture;
      (void)y.to_vector();
      doc = tl::trace_document(capture);
    }
    QVERIFY(doc.kernels.size() >= 2);
    const json parsed = json::parse(tl::trace_json(doc));
    const auto tracks = track_names(parsed);
    QCOMPARE(QString::fromStdString(tracks.at(1)), QString("host"));
    const auto kernels = events_of(parsed, "X", "kernel");
    QCOMPARE(kernels.size(), doc.kernels.size());
    double device_free = 0;
    for (size_t i = 0; i < kernels.size(); ++i) {
      const json& e = kernels[i];
      const tl::ProfileRecord& r = doc.kernels[i];
      QCOMPARE(e.at("name").get<std::string>(), r.kernel->name);
      QCOMPARE(e.at("args").at("index").get<size_t>(), i);
      QCOMPARE(QString::fromStdString(tracks.at(e.at("tid").get<int>())), QString("device cpu"));
      QVERIFY2(std::fabs(e.at("dur").get<double>() - r.seconds * 1e6) < 0.0015,
               qPrintable(QString("%1: %2 us in the trace, %3 in the table").arg(qs(r.kernel->name)).arg(e.at("dur").get<double>()).arg(r.seconds * 1e6)));
      QVERIFY(r.seconds > 0);  // the capture is timed
      QCOMPARE(e.at("args").at("flops").get<double>(), std::round(r.kernel->flops * 1000) / 1000);
      QCOMPARE(e.at("args").at("replayed").get<bool>(), r.replayed);
      QCOMPARE(e.at("args").at("launch").get<std::string>().empty(), false);
      // Queued in order: no kernel starts before the one before it ended.
      const double ts = e.at("ts").get<double>();
      QVERIFY2(ts >= device_free - 0.002, qPrintable(QString("kernel %1 starts at %2 before %3").arg(i).arg(ts).arg(device_free)));
      device_free = ts + e.at("dur").get<double>();
      QVERIFY(r.enqueued >= doc.origin);
      QVERIFY(ts + 0.002 >= (r.enqueued - doc.origin) * 1e6);  // not before its launch
    }
    std::set<std::string> host;
    for (auto& e : events_of(parsed, "X"))
      if (e.at("tid") == 1) host.insert(e.at("name").get<std::string>().substr(0, e.at("name").get<std::string>().find(' ')));
    for (const char* phase : {"realize", "schedule", "render", "compile", "wait", "download", "launch"})
      QVERIFY2(host.count(phase), phase);
  }

  void replayedRunIsMarkedAndSummarized() {
    tl::TraceDocument doc;
    (void)small_graph().to_vector();  // plans it, if no test did before
    {
      tl::TraceCapture capture;
      (void)small_graph().to_vector();  // the same structure: replayed
      (void)small_graph().to_vector();
      doc = tl::trace_document(capture);
    }
    const json parsed = json::parse(tl::trace_json(doc));
    const auto kernels = events_of(parsed, "X", "kernel");
    QCOMPARE(kernels.size() % 2, size_t(0));
    for (auto& k : kernels) QVERIFY(k.at("args").at("replayed").get<bool>());
    const tl::TraceSummary s = tl::summarize_trace(doc);
    QCOMPARE(s.devices.size(), size_t(1));
    QCOMPARE(s.devices[0].kernels, doc.kernels.size());
    double sum = 0;
    for (auto& r : doc.kernels) sum += r.seconds;
    QVERIFY(std::fabs(s.devices[0].seconds - sum) < 1e-12);
    // Both realizes replay: no schedule, render or compile shows.
    std::set<std::string> phases;
    for (auto& p : s.phases) phases.insert(p.first);
    QVERIFY(phases.count("realize") && phases.count("wait") && phases.count("launch") && phases.count("download"));
    QVERIFY(!phases.count("schedule") && !phases.count("compile"));
  }

  void namesAreEscaped() {
    tl::TraceDocument doc;
    doc.about = {{"model", "a \"quoted\"\nname\\with\ttabs\x01"}};
    doc.host.push_back({"load \"x\"", "host", 1.0, 0.5});
    doc.origin = 1.0;
    const json parsed = json::parse(tl::trace_json(doc));
    QCOMPARE(parsed.at("otherData").at("model").get<std::string>(), doc.about[0].second);
    QCOMPARE(events_of(parsed, "X").at(0).at("name").get<std::string>(), std::string("load \"x\""));
    QCOMPARE(events_of(parsed, "X").at(0).at("dur").get<double>(), 500000.0);
  }

  void unwritablePathsAreErrors() {
    try {
      tl::write_trace("/nonexistent-folder/t.json", {});
      QFAIL("no error");
    } catch (const tl::IOError& e) {
      QVERIFY2(QString(e.what()).contains("/nonexistent-folder/t.json"), e.what());
    }
    const Run r = run_cli({"classify", tltest::kSquirrel, "--trace", "/nonexistent-folder/t.json", "--runs", "1"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("cannot write the trace to /nonexistent-folder/t.json"), qPrintable(r.err));
    QVERIFY2(!r.out.contains("%"), qPrintable(r.out));  // it failed before classifying
  }

  // classify --trace: the last warm run's kernels in the trace are the rows
  // of the --profile table, with its times.
  void classifyTraceMatchesTheKernelTable() {
    const std::string file = path("classify.json");
    const Run r = run_cli({"classify", tltest::kSquirrel, "--device", "cpu", "--runs", "1", "--profile", "--trace",
                           QString::fromStdString(file)});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto rows = table_rows(r.out);
    QVERIFY2(rows.size() > 10, qPrintable(r.out));
    const json parsed = json::parse(read_text(file));
    QCOMPARE(parsed.at("otherData").at("command").get<std::string>(), std::string("classify"));
    double warm_start = -1, warm_end = -1;
    for (auto& e : events_of(parsed, "X"))
      if (e.at("tid") == 1 && e.at("name") == "warm run")
        warm_start = e.at("ts").get<double>(), warm_end = warm_start + e.at("dur").get<double>();
    QVERIFY(warm_start >= 0);
    std::vector<json> warm;
    for (auto& e : events_of(parsed, "X", "kernel")) {
      const double ts = e.at("ts").get<double>();
      if (ts >= warm_start && ts <= warm_end) warm.push_back(e);
    }
    QCOMPARE(warm.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      QCOMPARE(QString::fromStdString(warm[i].at("name").get<std::string>()), rows[i].first);
      QVERIFY2(std::fabs(warm[i].at("dur").get<double>() - rows[i].second) <= 0.0501,
               qPrintable(QString("%1: %2 vs %3").arg(rows[i].first).arg(warm[i].at("dur").get<double>()).arg(rows[i].second)));
    }
  }

  // bench onnx --trace on a file built here: every kernel of the table, in
  // order, with the table's (median) times.
  void benchOnnxTraceMatchesTheKernelTable() {
    const std::string model = write_tiny_onnx(path("tiny.onnx"));
    const std::string file = path("bench.json");
    const Run r = run_cli({"bench", "onnx", QString::fromStdString(model), "--device", "cpu", "--runs", "3", "--profile",
                           "--memory", "--trace", QString::fromStdString(file)});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto rows = table_rows(r.out);
    QVERIFY2(!rows.empty(), qPrintable(r.out));
    // --memory: the summary names a launch of the table, and a line per launch follows.
    auto peak = QRegularExpression(R"(memory: peak [0-9.]+ MiB live at launch (\d+) \((\S+)\))").match(r.out);
    QVERIFY2(peak.hasMatch(), qPrintable(r.out));
    QVERIFY(size_t(peak.captured(1).toInt()) < rows.size());
    QCOMPARE(peak.captured(2), rows[size_t(peak.captured(1).toInt())].first);
    QVERIFY(r.out.contains("live memory per launch:"));
    const auto kernels = events_of(json::parse(read_text(file)), "X", "kernel");
    QCOMPARE(kernels.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      QCOMPARE(QString::fromStdString(kernels[i].at("name").get<std::string>()), rows[i].first);
      QVERIFY(std::fabs(kernels[i].at("dur").get<double>() - rows[i].second) <= 0.0501);
    }
  }

  // The report of a built-in model and of an ONNX file: nothing outside the
  // file is referred to, and its kernel table names the run's kernels.
  void reportIsSelfContainedAndListsTheKernels_data() {
    QTest::addColumn<QString>("model");
    QTest::newRow("built-in") << "efficientnet-lite0";
    QTest::newRow("onnx") << "onnx";
  }
  void reportIsSelfContainedAndListsTheKernels() {
    QFETCH(QString, model);
    if (model == "onnx") model = QString::fromStdString(write_tiny_onnx(path("tiny.onnx")));
    const std::string file = path("report.html");
    const Run r = run_cli({"report", tltest::kSquirrel, "--model", model, "--device", "cpu", "--runs", "1", "-o",
                           QString::fromStdString(file)});
    QVERIFY2(r.code == 0, qPrintable(r.err + r.out));
    const QString html = QString::fromStdString(read_text(file));
    QVERIFY(html.startsWith("<!DOCTYPE html>"));
    QVERIFY2(!html.contains("http:") && !html.contains("https:") && !html.contains("src=") &&
                 !html.contains("<script") && !html.contains("<link"),
             "the report refers to something outside itself");
    QVERIFY(html.contains("<svg"));
    // The kernel table's names are the ones the run printed: classify the
    // same way and compare.
    const Run p = run_cli({"classify", tltest::kSquirrel, "--model", model, "--device", "cpu", "--runs", "1", "--profile"});
    QVERIFY2(p.code == 0, qPrintable(p.err));
    const auto rows = table_rows(p.out);
    QVERIFY(!rows.empty());
    const int table = html.indexOf("<table class=\"kernels\">");
    QVERIFY(table > 0);
    int at = table;
    for (auto& [name, us] : rows) {
      at = html.indexOf("<code>" + name.toHtmlEscaped() + "</code>", at);
      QVERIFY2(at > 0, qPrintable(name + " is not in the report's kernel table, in order"));
    }
    QVERIFY(html.contains("Trace summary"));
    QVERIFY(html.contains("squirrel_cls.jpg"));
  }

  void reportEscapesWhatComesFromFiles() {
    tl::ReportInput in;
    in.model = "<script>alert(1)</script>.onnx";
    in.image = "a&b\".png";
    tl::ReportRun run;
    run.device = "cpu";
    run.top.push_back({3, "<b>label</b>", 0.5f});
    in.runs.push_back(run);
    const std::string html = tl::report_html(in, tl::machine_info());
    QVERIFY(html.find("<script>") == std::string::npos);
    QVERIFY(html.find("&lt;script&gt;alert(1)&lt;/script&gt;.onnx") != std::string::npos);
    QVERIFY(html.find("a&amp;b&quot;.png") != std::string::npos);
    QVERIFY(html.find("&lt;b&gt;label&lt;/b&gt;") != std::string::npos);
  }

 private:
  static QString qs(const std::string& s) { return QString::fromStdString(s); }
};

QTEST_GUILESS_MAIN(TestTrace)
#include "test_trace.moc"
