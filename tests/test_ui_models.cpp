// The window's item models under QAbstractItemModelTester, with values
// checked by hand, plus the pure helpers behind the panes (build-log parser,
// block grouping, Graphviz layout).
#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <set>

#include "tests/testing.h"
#include "ui/graph_data.h"
#include "ui/models/compare_model.h"
#include "ui/models/device_model.h"
#include "ui/models/kernel_table_model.h"
#include "ui/models/prediction_model.h"
#include "ui/panes/source_pane.h"
#include "ui/source_highlight.h"

using namespace tlui;

namespace {

tl::ProfileRecord record(const std::string& name, double seconds, double flops, double bytes,
                         std::vector<uint64_t> nodes = {}, uint64_t output = 0, std::vector<uint64_t> inputs = {}) {
  auto k = std::make_shared<tl::KernelInfo>();
  k->name = name;
  k->device = "cpu";
  k->ops = {"MUL", "ADD"};
  k->global[0] = 64;
  k->global[1] = 32;
  k->flops = flops;
  k->bytes = bytes;
  k->node_ids = std::move(nodes);
  k->output_node = output;
  k->input_nodes = std::move(inputs);
  tl::ProfileRecord r;
  r.kernel = k;
  r.seconds = seconds;
  return r;
}

tl::GraphNode node(uint64_t id, const std::string& op, const std::string& scope, std::vector<uint64_t> inputs) {
  tl::GraphNode n;
  n.id = id;
  n.op = op;
  n.scope = scope;
  n.shape = {1, 8};
  n.inputs = std::move(inputs);
  n.realized = op == "BUFFER";
  return n;
}

}  // namespace

class TestUiModels : public QObject {
  Q_OBJECT
 private slots:
  void predictions() {
    PredictionModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setPredictions({{335, "fox squirrel", 0.9f}, {336, "marmot", 0.05f}});
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.topLabel(), QString("fox squirrel"));
    QCOMPARE(model.index(1).data().toString(), QString("marmot"));
    QCOMPARE(model.index(0).data(PredictionModel::ProbabilityRole).toDouble(), double(0.9f));
    QCOMPARE(model.index(0).data(PredictionModel::ClassIndexRole).toInt(), 335);
    model.setPredictions({});
    QCOMPARE(model.rowCount(), 0);
  }

  void kernelTable() {
    KernelTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    // 1 + 2 + 5 = 8 ms: shares 12.5 / 25 / 62.5 %.
    model.setRecords({record("E_64_32", 1e-3, 2e6, 4e6), record("R_8_1024", 2e-3, 8e6, 1e6),
                      record("GEMM_64_64_64", 5e-3, 5e9, 5e6)});
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.columnCount(), int(KernelTableModel::ColumnCount));
    QCOMPARE(model.totalSeconds(), 8e-3);
    auto cell = [&](int row, int col, int role = Qt::DisplayRole) { return model.index(row, col).data(role); };
    QCOMPARE(cell(0, KernelTableModel::Name).toString(), QString("E_64_32"));
    QCOMPARE(cell(0, KernelTableModel::Global).toString(), QString("64") + QChar(0x00d7) + "32");
    QCOMPARE(cell(0, KernelTableModel::Local).toString(), QString("auto"));
    QCOMPARE(cell(2, KernelTableModel::GFlops).toString(), QString("1000.00"));  // 5e9 flop / 5 ms
    QCOMPARE(cell(0, KernelTableModel::GBps).toString(), QString("4.00"));       // 4 MB / 1 ms
    QCOMPARE(cell(2, KernelTableModel::Share).toString(), QString("62.5 %"));
    QCOMPARE(cell(1, KernelTableModel::Share, KernelTableModel::SortRole).toDouble(), 25.0);
    QCOMPARE(cell(0, KernelTableModel::Run).toString(), QString("planned"));
    {  // a replayed launch says so, and its realize's wall time gives the host overhead
      auto replayed = record("E_64_32", 1e-3, 2e6, 4e6);
      replayed.replayed = true;
      replayed.realize_wall = 4e-3;
      KernelTableModel other;
      other.setRecords({replayed, record("R_8_1024", 2e-3, 8e6, 1e6)});
      QCOMPARE(other.index(0, KernelTableModel::Run).data().toString(), QString("replayed"));
      tl::ProfileTotals totals = tl::profile_totals(other.records());
      QCOMPARE(totals.replayed, size_t(1));
      QCOMPARE(totals.wall_seconds, 4e-3);
      QCOMPARE(totals.host_overhead(), 4e-3 - 3e-3);
      QVERIFY2(tl::format_profile_totals(totals).find("host overhead 1.000 ms") != std::string::npos,
               tl::format_profile_totals(totals).c_str());
    }

    QSortFilterProxyModel proxy;
    QAbstractItemModelTester proxyTester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.setSourceModel(&model);
    proxy.setSortRole(KernelTableModel::SortRole);
    proxy.setFilterKeyColumn(-1);
    proxy.sort(KernelTableModel::TimeMs, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, KernelTableModel::Name).data().toString(), QString("GEMM_64_64_64"));
    QCOMPARE(proxy.index(2, KernelTableModel::Name).data().toString(), QString("E_64_32"));
    proxy.setFilterFixedString("R_8");
    QCOMPARE(proxy.rowCount(), 1);
    QCOMPARE(proxy.index(0, KernelTableModel::Name).data().toString(), QString("R_8_1024"));

    const QStringList csv = model.toCsv().trimmed().split('\n');
    QCOMPARE(csv.size(), 4);
    QCOMPARE(csv[0], QString("index,kernel,device,global,local,ops,time_ms,gflops,gbps,share_percent,run,tuned"));
    QCOMPARE(csv[3], QString("2,GEMM_64_64_64,cpu,64x32,auto,2,5,1000,1,62.5,planned,"));
    {  // a tuned kernel shows its choice, and every candidate's time in the tooltip and the CSV's label
      auto tuned = record("GEMM_64_64_64", 5e-3, 5e9, 5e6);
      auto info = std::make_shared<tl::KernelInfo>(*tuned.kernel);
      info->tuned = "split=cols kc=128";
      info->tune_candidates = {{"default", 6e-3}, {"split=cols kc=128", 4.5e-3}};
      info->tune_searched = true;
      tuned.kernel = info;
      KernelTableModel other;
      other.setRecords({tuned});
      QCOMPARE(other.index(0, KernelTableModel::Tuned).data().toString(), QString("split=cols kc=128"));
      QCOMPARE(other.index(0, KernelTableModel::Tuned).data(Qt::ToolTipRole).toString(),
               QString("tuned: split=cols kc=128 4500.0 us (searched; default 6000.0)"));
      QCOMPARE(other.toCsv().trimmed().split('\n')[1],
               QString("0,GEMM_64_64_64,cpu,64x32,auto,2,5,1000,1,100,planned,split=cols kc=128"));
      QCOMPARE(model.index(0, KernelTableModel::Tuned).data(Qt::ToolTipRole).toString(), QString());
    }
  }

  void devices() {
    DeviceModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    tl::DeviceInfo cpu;
    cpu.name = "cpu";
    cpu.kind = "CPU";
    cpu.description = "host";
    cpu.compute_units = 2;
    tl::DeviceInfo ane;
    ane.name = "ane";
    ane.kind = "Accelerator";
    ane.available = false;
    ane.unavailable_reason = "needs Apple silicon";
    model.setDevices({cpu, ane});
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.rowOf("ane"), 1);
    QCOMPARE(model.rowOf("cuda"), -1);
    QCOMPARE(model.availableNames(), QStringList{"cpu"});
    QVERIFY(model.flags(model.index(0, 0)) & Qt::ItemIsEnabled);
    QVERIFY(!(model.flags(model.index(1, 0)) & Qt::ItemIsEnabled));
    QCOMPARE(model.index(1, DeviceModel::Status).data().toString(), QString("unavailable: needs Apple silicon"));
    QVERIFY(model.index(0, 0).data(Qt::ToolTipRole).toString().contains("Compute units: 2"));
  }

  void compare() {
    auto result = std::make_shared<CompareData>();
    for (int d = 0; d < 2; ++d) {
      auto run = std::make_shared<RunData>();
      run->device = d == 0 ? "cpu" : "opencl:0:0";
      run->coldSeconds = 1.0 + d;
      run->warmSeconds = 0.01 * (d + 1);
      run->top = {{1, "goldfish", 0.5f}};
      run->records = {record("E_1", 1e-3 * (d + 1), 1, 1), record("E_1", 2e-3, 1, 1), record("R_2", 3e-3, 1, 1)};
      if (d == 1) run->records.push_back(record("X_9", 1e-3, 1, 1));
      result->runs.push_back(run);
    }
    CompareLatencyModel latency;
    QAbstractItemModelTester t1(&latency, QAbstractItemModelTester::FailureReportingMode::QtTest);
    latency.setResult(result);
    QCOMPARE(latency.rowCount(), 2);
    QCOMPARE(latency.index(1, CompareLatencyModel::Device).data().toString(), QString("opencl:0:0"));
    QCOMPARE(latency.index(1, CompareLatencyModel::WarmMs).data(Qt::UserRole).toDouble(), 20.0);
    QCOMPARE(latency.index(0, CompareLatencyModel::KernelMs).data(Qt::UserRole).toDouble(), 6.0);
    QCOMPARE(latency.index(0, CompareLatencyModel::Top1).data().toString(), QString("goldfish (50.0 %)"));

    CompareKernelModel kernels;
    QAbstractItemModelTester t2(&kernels, QAbstractItemModelTester::FailureReportingMode::QtTest);
    kernels.setResult(result);
    QCOMPARE(kernels.rowCount(), 4);
    QCOMPARE(kernels.columnCount(), 4);  // kernel, two times, one speed-up
    QCOMPARE(kernels.index(1, 0).data().toString(), QString("E_1 #2"));
    QCOMPARE(kernels.seconds(0, 1), 2e-3);
    QCOMPARE(kernels.index(3, 1).data().toString(), QString("-"));  // cpu has no X_9
    QCOMPARE(kernels.headerData(2, Qt::Horizontal).toString(), QString("opencl:0:0 (ms)"));
  }

  void buildLog() {
    const QString log =
        "/tmp/tl/k1.c: In function 'E_4':\n"
        "/tmp/tl/k1.c:12:5: warning: unused variable 'x' [-Wunused-variable]\n"
        "   12 |     int x;\n"
        "<source>:3:17: error: use of undeclared identifier 'y'\n"
        "input.cl:7: note: declared here\n";
    auto d = parseBuildLog(log);
    QCOMPARE(int(d.size()), 3);
    QCOMPARE(d[0].logLine, 1);
    QCOMPARE(d[0].line, 12);
    QCOMPARE(d[0].column, 5);
    QCOMPARE(d[0].severity, QString("warning"));
    QCOMPARE(d[0].message, QString("unused variable 'x' [-Wunused-variable]"));
    QCOMPARE(d[1].severity, QString("error"));
    QCOMPARE(d[1].line, 3);
    QCOMPARE(d[2].line, 7);
    QCOMPARE(d[2].column, 0);
  }

  void sourcePaneJumpsToDiagnostics() {
    SourcePane pane;
    QString source;
    for (int i = 1; i <= 40; ++i) source += QString("float v%1 = %1.0f;\n").arg(i);
    pane.setKernel("E_4", source, "k.c: In function 'E_4':\nk.c:17:7: warning: unused variable 'v17'\nk.c:30:1: error: boom\n");
    QCOMPARE(int(pane.diagnostics().size()), 2);
    QCOMPARE(pane.jumpToDiagnostic(1), 30);
    QCOMPARE(pane.currentSourceLine(), 30);
    QCOMPARE(pane.jumpToDiagnostic(0), 17);
    QCOMPARE(pane.currentSourceLine(), 17);
    QCOMPARE(pane.jumpToDiagnostic(5), 0);  // no such diagnostic: stays put
    QCOMPARE(pane.currentSourceLine(), 17);
    QTemporaryDir dir;
    QString error;
    QVERIFY(pane.save(dir.filePath("k.c"), &error));
    QFile f(dir.filePath("k.c"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(f.readAll()), pane.source());
    QVERIFY(!pane.save(dir.filePath("no/such/dir/k.c"), &error));
    QVERIFY(error.contains("no/such/dir"));
  }

  void grouping() {
    QCOMPARE(groupKeyOf("blocks.3.conv2d"), QString("blocks.3"));
    QCOMPARE(groupKeyOf("blocks.12.se.conv2d"), QString("blocks.12"));
    QCOMPARE(groupKeyOf("features.1.0.conv"), QString("features.1"));
    QCOMPARE(groupKeyOf("stem.conv2d"), QString("stem"));
    QCOMPARE(groupKeyOf("conv2d"), QString());
    QCOMPARE(groupKeyOf(""), QString());

    // input -> blocks.0 (3 ops) -> blocks.1 (2 ops) -> head
    std::vector<tl::GraphNode> g = {node(1, "BUFFER", "", {}),
                                    node(2, "MUL", "blocks.0.conv2d", {1}),
                                    node(3, "ADD", "blocks.0.conv2d", {2}),
                                    node(4, "MAX", "blocks.0.act", {3}),
                                    node(5, "MUL", "blocks.1.conv2d", {4}),
                                    node(6, "ADD", "blocks.1.conv2d", {5, 4}),
                                    node(7, "SUM", "head", {6})};
    std::vector<tl::ProfileRecord> recs = {record("E_a", 1e-3, 1, 1, {2, 3}, 4, {1}),
                                           record("E_b", 3e-3, 1, 1, {5, 6}, 6, {4}),
                                           record("R_c", 2e-3, 1, 1, {7}, 7, {6})};
    DisplayGraph collapsed = buildOpGraph(g, recs, {});
    // The input buffer is read by blocks.0 only, so it is drawn inside it.
    QCOMPARE(int(collapsed.nodes.size()), 3);  // blocks.0, blocks.1, head
    QCOMPARE(int(collapsed.edges.size()), 2);
    QCOMPARE(collapsed.nodes[0].groupKey, QString("blocks.0"));
    QVERIFY(collapsed.nodes[0].group);
    QCOMPARE(int(collapsed.nodes[0].members.size()), 4);
    QCOMPARE(collapsed.nodes[0].seconds, 1e-3);
    QCOMPARE(collapsed.nodes[1].seconds, 3e-3);
    QCOMPARE(collapsed.maxSeconds, 3e-3);
    QVERIFY(!collapsed.nodes[2].group);
    QCOMPARE(collapsed.nodes[2].kernel, 2);

    DisplayGraph expanded = buildOpGraph(g, recs, {"blocks.1"});
    QCOMPARE(int(expanded.nodes.size()), 4);  // blocks.1 opens into its 2 nodes
    QCOMPARE(int(expanded.edges.size()), 4);  // b0->5, b0->6, 5->6, 6->head

    // Unscoped glue: a run of 4 computed nodes becomes "ops"; a weight read
    // only by blocks.0 joins it; a buffer read by two blocks stays alone.
    std::vector<tl::GraphNode> loose = {node(1, "BUFFER", "", {}),       node(2, "RESHAPE", "", {1}),
                                        node(3, "PAD", "", {2}),         node(4, "MUL", "", {3}),
                                        node(5, "ADD", "", {4}),         node(6, "BUFFER", "", {}),
                                        node(7, "MUL", "blocks.0.c", {5, 6}), node(8, "BUFFER", "", {}),
                                        node(9, "ADD", "blocks.0.c", {7, 8}), node(10, "ADD", "blocks.1.c", {9, 8})};
    auto keys = groupKeys(loose);
    QCOMPARE(keys[0], QString("ops"));  // the input buffer is read by "ops" only
    QCOMPARE(keys[1], QString("ops"));
    QCOMPARE(keys[4], QString("ops"));
    QCOMPARE(keys[5], QString("blocks.0"));
    QCOMPARE(keys[7], QString());  // read by blocks.0 and blocks.1
    QCOMPARE(int(buildOpGraph(loose, {}, {}).nodes.size()), 4);  // ops, blocks.0, buffer 8, blocks.1
    // Named by their scope when they have one; a second run of it gets "#2".
    for (int i : {1, 2, 3, 4}) loose[size_t(i)].scope = "stem";
    loose.push_back(node(11, "MUL", "stem", {10}));
    loose.push_back(node(12, "MUL", "stem", {11}));
    loose.push_back(node(13, "MUL", "stem", {12}));
    loose.push_back(node(14, "MUL", "", {13}));
    keys = groupKeys(loose);
    QCOMPARE(keys[1], QString("stem"));
    QCOMPARE(keys[13], QString("stem#2"));

    DisplayGraph kernels = buildKernelGraph(recs);
    QCOMPARE(int(kernels.nodes.size()), 3);
    QCOMPARE(int(kernels.edges.size()), 2);
    QCOMPARE(kernels.edges[0].from, 0);
    QCOMPARE(kernels.edges[0].to, 1);

    GraphLayout layout = layoutGraph(collapsed);
    QVERIFY2(layout.error.isEmpty(), qPrintable(layout.error));
    QCOMPARE(int(layout.nodes.size()), 3);
    QCOMPARE(int(layout.edges.size()), 2);
    // dot ranks a chain top to bottom: each node lies below its input.
    for (int i = 1; i < 3; ++i) QVERIFY(layout.nodes[size_t(i)].y > layout.nodes[size_t(i - 1)].y);
    for (auto& n : layout.nodes) {
      QVERIFY(n.w > 0 && n.h > 0);
      QVERIFY(n.x >= 0 && n.x <= layout.width && n.y >= 0 && n.y <= layout.height);
    }
    for (auto& e : layout.edges) QVERIFY(e.points.size() >= 4 && (e.points.size() - 1) % 3 == 0);
  }

  // A Jit's replay (an ONNX model's forward) records only what each kernel
  // reads from outside its realize, and builds no op graph: its kernel graph
  // had no edge. The first run of the same kernels names every buffer each
  // read; its edges are found by buffer and mapped onto the shown kernels
  // by source, in order, past kernels the replay does not run (a fold).
  void kernelReadsFoundByBuffer() {
    auto record = [](const char* source, uint64_t out, std::vector<uint64_t> in) {
      auto k = std::make_shared<tl::KernelInfo>();
      k->name = std::string("K_") + source;
      k->source = source;
      k->output_node = out;
      k->input_nodes = std::move(in);
      tl::ProfileRecord r;
      r.kernel = k;
      return r;
    };
    // First run: a folded constant (f), then a -> b -> c, c also reading a.
    const std::vector<tl::ProfileRecord> first = {record("f", 9, {1}), record("a", 10, {1, 9}),
                                                  record("b", 11, {10, 2}), record("c", 12, {11, 10})};
    // The replay's records: other node ids, outside inputs only.
    std::vector<tl::ProfileRecord> shown = {record("a", 100, {1, 9}), record("b", 101, {2}), record("c", 102, {})};
    QCOMPARE(buildKernelGraph(shown).edges.size(), size_t(0));
    const auto reads = kernelReadsFrom(shown, first);
    using Edges = std::set<std::pair<int, int>>;
    QCOMPARE(Edges(reads.begin(), reads.end()), (Edges{{0, 1}, {1, 2}, {0, 2}}));
    DisplayGraph g = buildKernelGraph(shown, {}, reads);
    QCOMPARE(g.edges.size(), size_t(3));
    // Kernels the first run did not run (another model's), or in another
    // order: nothing is claimed.
    shown[1] = record("x", 101, {2});
    QVERIFY(kernelReadsFrom(shown, first).empty());
    std::swap(shown[0], shown[2]);
    shown[0] = record("c", 102, {});
    shown[1] = record("b", 101, {2});
    shown[2] = record("a", 100, {1, 9});
    QVERIFY(kernelReadsFrom(shown, first).empty());
  }
};

QTEST_MAIN(TestUiModels)
#include "test_ui_models.moc"
