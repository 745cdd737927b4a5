// The command-line conventions of tinylens-cli, checked by running the built
// binary: --help of every command, --version, exit status 2 with the usage on
// stderr for wrong words, 1 with one line for runtime errors. And the core's
// CompileProgress hook that the CLI's progress bar draws from.
#include <QtTest/QtTest>

#include <set>
#include <thread>

#include "core/profile.h"
#include "core/realize.h"
#include "core/tensor.h"
#include "tests/cli_run.h"
#include "tests/testing.h"

using tl::Tensor;

namespace {

using Run = tltest::CliRun;
using tltest::cli_path;
using tltest::run_cli;

// `project(tinylens VERSION x.y ...)` of the top CMakeLists.txt.
QString cmake_version() {
  QFile f(QString::fromStdString(tltest::source_dir()) + "/CMakeLists.txt");
  if (!f.open(QIODevice::ReadOnly)) return {};
  auto m = QRegularExpression(R"(project\(tinylens\s+VERSION\s+([0-9.]+))").match(QString::fromUtf8(f.readAll()));
  return m.hasMatch() ? m.captured(1) : QString();
}

QString describe(const Run& r) {
  return QString("exit %1\n--- stdout:\n%2--- stderr:\n%3").arg(r.code).arg(r.out, r.err);
}

}  // namespace

class TestCli : public QObject {
  Q_OBJECT

  QTemporaryDir scratch_;

 private slots:
  void initTestCase() {
    QVERIFY2(QFileInfo(cli_path()).isExecutable(), qPrintable(cli_path() + " is not built"));
    QVERIFY(scratch_.isValid());
  }

  // ---- the core hook ----

  void compile_progress_counts_the_new_kernels() {
    std::vector<std::pair<size_t, size_t>> calls;
    std::set<std::thread::id> threads;
    std::vector<float> data(6 * 7);
    for (size_t i = 0; i < data.size(); ++i) data[i] = float(i) * 0.25f - 3.0f;
    Tensor x = Tensor::from_data(data, {6, 7}, "cpu");
    x.realize();
    tl::ProfileCapture capture;
    {
      tl::CompileProgress progress([&](size_t compiled, size_t total) {
        calls.emplace_back(compiled, total);
        threads.insert(std::this_thread::get_id());
      });
      // Three unrelated results of one realize: three kernels no earlier
      // realize in this process compiled.
      Tensor a = (x * 1.625 + 0.375).exp();
      Tensor b = x.sum({1});
      Tensor c = (x - 0.8125).abs().sqrt();
      tl::realize_nodes({a.node(), b.node(), c.node()});
    }
    std::set<std::string> sources;
    for (auto& r : capture.records()) sources.insert(r.kernel->source);
    QVERIFY2(sources.size() >= 2, "the parallel path needs two new kernels or more");
    QCOMPARE(calls.size(), sources.size() + 1);
    for (size_t i = 0; i < calls.size(); ++i) {
      QCOMPARE(calls[i].second, sources.size());  // total = the new kernels
      QCOMPARE(calls[i].first, i);                // 0 first, then one more per kernel
    }
    QCOMPARE(calls.back().first, calls.back().second);
    QCOMPARE(threads.size(), size_t(1));
    QVERIFY(*threads.begin() == std::this_thread::get_id());  // told on the realizing thread
  }

  void compile_progress_single_kernel_and_nothing_new() {
    std::vector<std::pair<size_t, size_t>> calls;
    tl::CompileProgress progress([&](size_t compiled, size_t total) { calls.emplace_back(compiled, total); });
    auto make = [](float offset) {
      return (Tensor::from_data({1, 2, 3, 4, 5}, {5}, "cpu").realize() * 3.125 + offset).realize();
    };
    make(0.5f);
    QVERIFY((calls == std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 1}}));
    calls.clear();
    make(0.5f);  // the same kernel again: nothing to compile, nothing reported
    QVERIFY(calls.empty());
  }

  void compile_progress_nests() {
    int outer = 0, inner = 0;
    tl::CompileProgress a([&](size_t, size_t) { ++outer; });
    {
      tl::CompileProgress b([&](size_t, size_t) { ++inner; });
      (Tensor::from_data({1, 2, 3}, {3}, "cpu").realize() * 7.0625).realize();
    }
    QCOMPARE(outer, 0);
    QCOMPARE(inner, 2);
    (Tensor::from_data({1, 2, 3}, {3}, "cpu").realize() * 9.1875).realize();
    QCOMPARE(outer, 2);
  }

  // ---- the CLI ----

  void version() {
    const QString expected = cmake_version();
    QVERIFY(!expected.isEmpty());
    Run r = run_cli({"--version"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QCOMPARE(r.out, "tinylens-cli " + expected + "\n");
    QVERIFY(r.err.isEmpty());
  }

  void top_help_data() {
    QTest::addColumn<QStringList>("args");
    QTest::newRow("--help") << QStringList{"--help"};
    QTest::newRow("-h") << QStringList{"-h"};
    QTest::newRow("help") << QStringList{"help"};
  }

  void top_help() {
    QFETCH(QStringList, args);
    Run r = run_cli(args);
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY(r.err.isEmpty());
    QVERIFY(r.out.startsWith("usage: tinylens-cli "));
    for (const char* command : {"devices", "ops", "demo", "selftest", "bench matmul", "bench model", "bench reduce",
                                "classify IMAGE...", "onnx-test DIR...", "train"})
      QVERIFY2(r.out.contains(QString("\n  ") + command + " "), command);
    QVERIFY(r.out.contains("--version"));
    QVERIFY(r.out.contains("exit status"));
    // scripts/run looks for this line before it classifies
    QVERIFY(QRegularExpression("(^|\\n)  classify").match(r.out).hasMatch());
  }

  void command_help_data() {
    QTest::addColumn<QStringList>("command");
    QTest::addColumn<QString>("synopsis");  // the first line
    QTest::addColumn<QStringList>("present");
    QTest::addColumn<QStringList>("absent");  // other commands' options
    QTest::newRow("devices") << QStringList{"devices"} << "usage: tinylens-cli devices" << QStringList{"--help"}
                             << QStringList{"--device", "--profile"};
    QTest::newRow("ops") << QStringList{"ops"} << "usage: tinylens-cli ops" << QStringList{"primitive"}
                         << QStringList{"--device"};
    QTest::newRow("demo") << QStringList{"demo"} << "usage: tinylens-cli demo [OPTIONS]"
                          << QStringList{"--device NAME", "--profile"} << QStringList{"--runs", "--n "};
    QTest::newRow("selftest") << QStringList{"selftest"} << "usage: tinylens-cli selftest [OPTIONS]"
                              << QStringList{"--device NAME", "--golden FILE", "--verbose", "default cpu"}
                              << QStringList{"--runs", "--profile"};
    QTest::newRow("bench") << QStringList{"bench"} << "usage: tinylens-cli bench SUB-COMMAND [OPTIONS]"
                           << QStringList{"\n  matmul ", "\n  model "} << QStringList{"--n ", "--runs"};
    QTest::newRow("bench matmul") << QStringList{"bench", "matmul"} << "usage: tinylens-cli bench matmul [OPTIONS]"
                                  << QStringList{"--n N", "(default 1024)", "--repeat R", "(default 5)",
                                                 "--device NAME|all"}
                                  << QStringList{"--runs", "--model", "--image"};
    QTest::newRow("bench model") << QStringList{"bench", "model"} << "usage: tinylens-cli bench model [OPTIONS]"
                                 << QStringList{"--model NAME|PATH", "efficientnet-lite0", "--runs N", "(default 10)",
                                                "--image PATH", "--device NAME|all", "--profile"}
                                 << QStringList{"--n ", "--repeat"};
    QTest::newRow("bench reduce") << QStringList{"bench", "reduce"} << "usage: tinylens-cli bench reduce [OPTIONS]"
                                  << QStringList{"--batch B", "(default 1)", "--repeat R", "(default 20)",
                                                 "--device NAME|all", "TINYLENS_REDUCE=serial"}
                                  << QStringList{"--n ", "--runs", "--model"};
    QTest::newRow("bench onnx") << QStringList{"bench", "onnx"} << "usage: tinylens-cli bench onnx MODEL.onnx [OPTIONS]"
                                << QStringList{"--runs N", "(default 10)", "--profile", "--tune", "--dump-kernels DIR",
                                               "--device NAME|all"}
                                << QStringList{"--n ", "--repeat", "--model"};
    QTest::newRow("classify") << QStringList{"classify"} << "usage: tinylens-cli classify IMAGE... [OPTIONS]"
                              << QStringList{"--model NAME|PATH", "--runs N", "(default 3)", "--dump-kernels DIR",
                                             "--profile", "--device NAME"}
                              << QStringList{"--n ", "--repeat", "--image", "--epochs"};
    QTest::newRow("onnx-test") << QStringList{"onnx-test"} << "usage: tinylens-cli onnx-test DIR... [OPTIONS]"
                               << QStringList{"--expected FILE", "--device NAME"} << QStringList{"--runs", "--model"};
    QTest::newRow("train") << QStringList{"train"} << "usage: tinylens-cli train [OPTIONS]"
                           << QStringList{"--dataset digits|digits:PNG|mnist:DIR", "--model cnn|mlp", "--epochs N",
                                          "(default 5)", "--batch B", "(default 32)", "--lr LR", "--optimizer",
                                          "--weight-decay", "--schedule", "--augment", "--seed", "--out FILE",
                                          "--no-save", "--profile", "--device NAME"}
                           << QStringList{"--runs", "--dump-kernels", "--repeat"};
  }

  void command_help() {
    QFETCH(QStringList, command);
    QFETCH(QString, synopsis);
    QFETCH(QStringList, present);
    QFETCH(QStringList, absent);
    Run r = run_cli(command + QStringList{"--help"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.err.isEmpty(), qPrintable(r.err));
    QCOMPARE(r.out.section('\n', 0, 0), synopsis);
    for (auto& s : present) QVERIFY2(r.out.contains(s), qPrintable("no " + s + " in\n" + r.out));
    for (auto& s : absent) QVERIFY2(!r.out.contains(s), qPrintable(s + " in\n" + r.out));
    // the other spellings print the same
    Run h = run_cli(QStringList{"help"} + command);
    QCOMPARE(h.code, 0);
    QCOMPARE(h.out, r.out);
    Run dash_h = run_cli(command + QStringList{"-h"});
    QCOMPARE(dash_h.code, 0);
    QCOMPARE(dash_h.out, r.out);
  }

  void usage_errors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");   // the first line of stderr
    QTest::addColumn<QString>("synopsis");  // the usage that follows it
    const QString top = "usage: tinylens-cli [COMMAND] [ARGS] [OPTIONS]";
    const QString bench = "usage: tinylens-cli bench SUB-COMMAND [OPTIONS]";
    const QString matmul = "usage: tinylens-cli bench matmul [OPTIONS]";
    const QString classify = "usage: tinylens-cli classify IMAGE... [OPTIONS]";
    const QString train = "usage: tinylens-cli train [OPTIONS]";
    QTest::newRow("unknown command") << QStringList{"bogus"} << "unknown command 'bogus'" << top;
    QTest::newRow("help of an unknown command") << QStringList{"help", "bogus"} << "unknown command 'bogus'" << top;
    QTest::newRow("unknown sub-command") << QStringList{"bench", "foo"} << "unknown bench sub-command 'foo'" << bench;
    QTest::newRow("unknown sub-command, --help")
        << QStringList{"bench", "foo", "--help"} << "unknown bench sub-command 'foo'" << bench;
    QTest::newRow("no sub-command") << QStringList{"bench"} << "bench needs a sub-command" << bench;
    QTest::newRow("no image") << QStringList{"classify"} << "classify needs at least one IMAGE" << classify;
    QTest::newRow("no folder") << QStringList{"onnx-test", "--device", "cpu"} << "onnx-test needs at least one DIR"
                               << "usage: tinylens-cli onnx-test DIR... [OPTIONS]";
    QTest::newRow("extra argument") << QStringList{"devices", "extra"} << "devices takes no arguments, got 'extra'"
                                    << "usage: tinylens-cli devices";
    QTest::newRow("unknown option") << QStringList{"classify", "--bogus", "x.jpg"}
                                    << "unknown option --bogus for classify" << classify;
    QTest::newRow("another command's option") << QStringList{"bench", "matmul", "--runs", "3"}
                                              << "unknown option --runs for bench matmul" << matmul;
    QTest::newRow("option before the command") << QStringList{"--epochs", "2", "bench", "matmul"}
                                               << "unknown option --epochs for bench matmul" << matmul;
    QTest::newRow("single dash") << QStringList{"ops", "-x"} << "unknown option '-x'" << "usage: tinylens-cli ops";
    QTest::newRow("--n abc") << QStringList{"bench", "matmul", "--n", "abc"}
                             << "--n must be a positive integer, got 'abc'" << matmul;
    QTest::newRow("--repeat x") << QStringList{"bench", "matmul", "--repeat=x"}
                                << "--repeat must be a positive integer, got 'x'" << matmul;
    QTest::newRow("--runs 0") << QStringList{"bench", "model", "--runs", "0"}
                              << "--runs must be a positive integer, got '0'"
                              << "usage: tinylens-cli bench model [OPTIONS]";
    QTest::newRow("--runs 0 before a missing image") << QStringList{"classify", "/nonexistent.jpg", "--runs", "0"}
                                                     << "--runs must be a positive integer, got '0'" << classify;
    QTest::newRow("value missing at the end") << QStringList{"bench", "matmul", "--n"} << "option --n needs a value"
                                              << matmul;
    QTest::newRow("value missing before an option")
        << QStringList{"bench", "matmul", "--n", "--device", "cpu"} << "option --n needs a value" << matmul;
    QTest::newRow("flag with a value") << QStringList{"demo", "--profile=yes"} << "option --profile takes no value"
                                       << "usage: tinylens-cli demo [OPTIONS]";
    QTest::newRow("train --epochs x") << QStringList{"train", "--epochs", "x"}
                                      << "train: --epochs expects a number, got 'x'" << train;
    QTest::newRow("train --epochs 0") << QStringList{"train", "--epochs", "0"}
                                      << "train: --epochs expects an integer >= 1, got '0'" << train;
    QTest::newRow("train --optimizer") << QStringList{"train", "--optimizer", "rmsprop"}
                                       << "train: --optimizer must be sgd, adam or adamw, got 'rmsprop'" << train;
    QTest::newRow("train unknown option") << QStringList{"train", "--epoch", "3"} << "unknown option --epoch for train"
                                          << train;
  }

  void usage_errors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    QFETCH(QString, synopsis);
    Run r = run_cli(args);
    QVERIFY2(r.code == 2, qPrintable(describe(r)));
    QVERIFY2(r.out.isEmpty(), qPrintable(describe(r)));
    const QStringList lines = r.err.split('\n');
    QVERIFY2(lines.size() > 3, qPrintable(describe(r)));
    QCOMPARE(lines[0], "tinylens-cli: " + message);
    QCOMPARE(lines[1], synopsis);
  }

  void runtime_errors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");  // the start of the one line after "tinylens-cli: "
    QTest::addColumn<QString>("cc");       // a C compiler for the CPU device; empty: the usual one
    QFile garbage(scratch_.filePath("corrupt.safetensors"));
    QVERIFY(garbage.open(QIODevice::WriteOnly));
    garbage.write(QByteArray(64, '\xff'));
    garbage.close();
    // A compiler that answers --version and rejects every kernel with a
    // two-line log: the CPU device is available, and every compile fails.
    QFile cc(scratch_.filePath("failing-cc"));
    QVERIFY(cc.open(QIODevice::WriteOnly));
    cc.write("#!/bin/sh\n"
             "if [ \"$1\" = --version ]; then echo 'failing-cc 1.0'; exit 0; fi\n"
             "echo 'kernel.c:1:1: error: this compiler rejects everything' >&2\n"
             "echo '  and says so on a second line' >&2\n"
             "exit 1\n");
    cc.close();
    cc.setPermissions(cc.permissions() | QFileDevice::ExeOwner);

    QTest::newRow("missing model file") << QStringList{"classify", "--model", "/nonexistent/m.safetensors", "x.jpg"}
                                   << "checkpoint /nonexistent/m.safetensors" << "";
    QTest::newRow("corrupt model") << QStringList{"classify", "--model", garbage.fileName(), "x.jpg"}
                                   << "safetensors file '" + garbage.fileName() + "'" << "";
    QTest::newRow("unknown device") << QStringList{"demo", "--device", "nosuch"} << "no device named 'nosuch'" << "";
    QTest::newRow("unavailable device") << QStringList{"demo", "--device", "ane"} << "device 'ane'" << "";
    QTest::newRow("missing golden file") << QStringList{"selftest", "--golden", "/nonexistent/ops.bin"}
                                         << "cannot open golden file /nonexistent/ops.bin" << "";
#ifdef TL_HAVE_ONNX
    QTest::newRow("missing folder") << QStringList{"onnx-test", "/nonexistent/cases"}
                                    << "cannot list /nonexistent/cases" << "";
#endif
    QTest::newRow("compile error") << QStringList{"demo", "--device", "cpu"} << "cpu: kernel " << cc.fileName();
  }

  void runtime_errors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    QFETCH(QString, cc);
    auto env = QProcessEnvironment::systemEnvironment();
    if (!cc.isEmpty()) {
      env.insert("CC", cc);
      env.insert("XDG_CACHE_HOME", scratch_.filePath("cache-" + QString::number(QDateTime::currentMSecsSinceEpoch())));
    }
    Run r = run_cli(args, env);
    QVERIFY2(r.code == 1, qPrintable(describe(r)));
    QVERIFY2(r.err.endsWith('\n') && r.err.count('\n') == 1, qPrintable(describe(r)));  // exactly one line
    QVERIFY2(r.err.startsWith("tinylens-cli: " + message), qPrintable(describe(r)));
    QVERIFY2(!r.err.contains("usage:"), qPrintable(describe(r)));
    QVERIFY2(!r.err.trimmed().endsWith(';'), qPrintable(describe(r)));
    if (!cc.isEmpty()) QVERIFY2(r.err.contains("and says so on a second line"), qPrintable(describe(r)));
  }

  // AlexNet's ONNX test export makes its 244 MB of weights with
  // ConstantOfShape from a 4 KB file: refused as a memory bomb by default,
  // with the way out in the error; run once the user says they trust it.
  void trusted_files_lift_the_per_file_budget() {
    const QString model =
        QString::fromStdString(tltest::source_dir()) + "/resources/onnx-light-models/light_bvlc_alexnet.onnx";
    QVERIFY2(QFile::exists(model), qPrintable(model + " is missing: scripts/setup fetches it"));
    const QStringList args{"bench", "onnx", model, "--device", "cpu", "--runs", "1"};
    auto env = QProcessEnvironment::systemEnvironment();
    env.remove("TINYLENS_TRUST_FILES");
    Run refused = run_cli(args, env);
    QVERIFY2(refused.code == 1, qPrintable(describe(refused)));
    QVERIFY2(refused.err.contains("ConstantOfShape") &&
                 refused.err.contains("for a file you trust, TINYLENS_TRUST_FILES=1 allows up to the absolute cap"),
             qPrintable(describe(refused)));
    env.insert("TINYLENS_TRUST_FILES", "1");
    Run trusted = run_cli(args, env);
    QVERIFY2(trusted.code == 0 && trusted.out.contains("warm median"), qPrintable(describe(trusted)));
    // With one warm run, the fastest is that run: the median's figure, to its rounding.
    const auto times = QRegularExpression(R"(warm median +([0-9.]+) ms \(best ([0-9.]+)\))").match(trusted.out);
    QVERIFY2(times.hasMatch(), qPrintable(describe(trusted)));
    const double median = times.captured(1).toDouble(), best = times.captured(2).toDouble();
    QVERIFY2(best > 0 && std::abs(median - best) <= 0.0051, qPrintable(describe(trusted)));
    env.insert("TINYLENS_TRUST_FILES", "0");  // "0" is not trust
    QCOMPARE(run_cli(args, env).code, 1);
  }

  // bench onnx --dump-kernels: one source and one build log per kernel the
  // model ran, the source the C device compiled (a C function per kernel).
  void bench_onnx_dumps_its_kernels() {
    const QString model = QString::fromStdString(tltest::source_dir()) + "/resources/onnx-node-tests/test_abs/model.onnx";
    QVERIFY2(QFile::exists(model), qPrintable(model + " is missing: scripts/setup fetches it"));
    const QString dir = scratch_.filePath("dumped");
    Run r = run_cli({"bench", "onnx", model, "--device", "cpu", "--runs", "1", "--dump-kernels", dir});
    QVERIFY2(r.code == 0 && r.out.contains("wrote 1 kernels (source and build log) to " + dir), qPrintable(describe(r)));
    const QStringList files = QDir(dir).entryList(QDir::Files, QDir::Name);
    QCOMPARE(files.size(), 2);
    QVERIFY2(files[0].endsWith(".c") && files[1].endsWith(".log"), qPrintable(files.join(' ')));
    QFile src(QDir(dir).filePath(files[0]));
    QVERIFY(src.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(src.readAll());
    QVERIFY2(text.contains("void " + files[0].section('_', 1).section('.', 0, 0) + "(int start, int end, void** args)"),
             qPrintable(text.right(400)));
  }

  // onnx-test --shuffle SEED --rounds N: the cases of every folder in one
  // process, N rounds, each in the order drawn from SEED + round (printed
  // first), every case run in every round; a bad count is a usage error.
  void onnx_test_runs_cases_in_shuffled_rounds() {
    const QString nodes = QString::fromStdString(tltest::source_dir()) + "/resources/onnx-node-tests/";
    const QStringList names{"test_abs", "test_relu", "test_softmax_axis_1"};
    QStringList args{"onnx-test"};
    for (const QString& n : names) {
      QVERIFY2(QFile::exists(nodes + n + "/model.onnx"), qPrintable(nodes + n + " is missing: scripts/setup fetches it"));
      args << nodes + n;
    }
    Run r = run_cli(args + QStringList{"--device", "cpu", "--shuffle", "3", "--rounds", "2"});
    QVERIFY2(r.code == 0 && r.out.contains("6 passed, 0 failed"), qPrintable(describe(r)));
    QStringList orders;
    for (const QString& line : r.out.split('\n'))
      if (line.startsWith("round ")) orders << line;
    QCOMPARE(orders.size(), 2);
    QVERIFY2(orders[0].startsWith("round 1 of 2, order of seed 3: ") && orders[1].startsWith("round 2 of 2, order of seed 4: "),
             qPrintable(describe(r)));
    for (const QString& order : orders) {
      QStringList drawn = order.section(": ", 1).split(' ');
      drawn.sort();
      QCOMPARE(drawn, names);
    }
    // Each round runs its cases in the order it printed.
    QStringList ran;
    for (const QString& line : r.out.split('\n'))
      if (line.startsWith("PASS")) ran << line.section(' ', -1);
    QCOMPARE(ran, (orders[0].section(": ", 1).split(' ') + orders[1].section(": ", 1).split(' ')));
    Run bad = run_cli({"onnx-test", nodes + "test_abs", "--rounds", "0"});
    QVERIFY2(bad.code == 2 && bad.err.contains("--rounds must be a positive integer"), qPrintable(describe(bad)));
  }

  // The progress bar needs compiles that take more than a second: a C
  // compiler that waits half a second before each kernel, and an empty disk
  // cache, make demo's cold run take several.
  QProcessEnvironment slow_compiles_environment(const QString& name) {
    QFile cc(scratch_.filePath("slow-cc"));
    if (!cc.exists()) {
      cc.open(QIODevice::WriteOnly);
      cc.write("#!/bin/sh\n"
               "if [ \"$1\" != --version ]; then sleep 0.5; fi\n"
               "exec cc \"$@\"\n");
      cc.close();
      cc.setPermissions(cc.permissions() | QFileDevice::ExeOwner);
    }
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("CC", cc.fileName());
    env.insert("XDG_CACHE_HOME", scratch_.filePath(name));
    env.insert("TINYLENS_NOPREBUILT", "1");  // the GEMM library compiles too, as on a first run without a build's
    return env;
  }

  // `bench reduce` says which form its reduction kernels took: serial on the
  // C device (no local memory), grouped for the softmax and the bias gradient
  // on an OpenCL device unless TINYLENS_REDUCE=serial asks for the serial form.
  void bench_reduce_reports_the_form() {
    std::vector<std::pair<QString, bool>> runs = {{"cpu", false}};
    for (auto& d : tltest::available_devices())
      if (d.rfind("opencl:", 0) == 0) runs.push_back({QString::fromStdString(d), true});
    for (auto& [device, grouped] : runs) {
      for (bool serial : {false, true}) {
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("XDG_CACHE_HOME", scratch_.filePath("cache-bench-reduce"));
        if (serial) env.insert("TINYLENS_REDUCE", "serial");
        Run r = run_cli({"bench", "reduce", "--device", device, "--repeat", "1"}, env);
        QVERIFY2(r.code == 0, qPrintable(describe(r)));
        const QStringList lines = r.out.split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 3);
        for (auto& line : lines) {
          QVERIFY2(line.contains("batch 1 on " + device + ": ") && line.contains(" ms in kernels ("), qPrintable(line));
          // The pool's 1280 outputs of 49 are grouped only on a device that
          // holds 80k work-items at once (render.cpp): not checked here.
          if (!serial && grouped && line.contains("pool")) continue;
          QVERIFY2(line.endsWith(grouped && !serial ? "(grouped, work-group 256)" : "(serial)"), qPrintable(line));
        }
      }
    }
  }

  // bench matmul says how exact the product is: sampled entries against
  // float64, each error over the sum of |x y| (float32 rounding of a sum of
  // 70 terms stays well under 1e-6 of it). Not square, so that a row or
  // column index taken for the other would show.
  void bench_matmul_reports_its_error() {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("XDG_CACHE_HOME", scratch_.filePath("cache-bench-matmul"));
    Run r = run_cli({"bench", "matmul", "--m", "80", "--n", "96", "--k", "70", "--repeat", "1", "--device", "cpu"}, env);
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QRegularExpression error(R"(error against float64 over 256 entries \(\|error\| / sum \|x y\|\): mean (\S+), worst (\S+))");
    auto m = error.match(r.out);
    QVERIFY2(m.hasMatch(), qPrintable(r.out));
    bool ok_mean = false, ok_worst = false;
    const double mean = m.captured(1).toDouble(&ok_mean), worst = m.captured(2).toDouble(&ok_worst);
    QVERIFY2(ok_mean && ok_worst && mean >= 0 && mean <= worst && worst < 1e-6, qPrintable(r.out));
  }

  // The C device compiles and loads kernels through files in a folder of
  // its own under TMPDIR: nothing of it may outlive the process, cold cache
  // (compiles) or warm (loads the cached libraries).
  void leaves_nothing_in_the_temp_folder() {
    const QString tmp = scratch_.filePath("tmp-clean");
    QVERIFY(QDir().mkpath(tmp));
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("TMPDIR", tmp);
    env.insert("XDG_CACHE_HOME", scratch_.filePath("cache-tmp-clean"));
    for (const char* cache : {"cold", "warm"}) {
      Run r = run_cli({"demo", "--device", "cpu"}, env);
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      QVERIFY(r.out.contains("row 0 sums to 1.000000"));
      const QStringList left = QDir(tmp).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden);
      QVERIFY2(left.isEmpty(), qPrintable(QString(cache) + " cache left " + left.join(", ")));
    }
  }

  // stderr is a pipe here, not a terminal: no progress bar.
  void no_progress_bar_without_a_terminal() {
    Run r = run_cli({"demo", "--device", "cpu"}, slow_compiles_environment("cache-pipe"));
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.err.isEmpty(), qPrintable(describe(r)));
    QVERIFY(!r.out.contains('\r'));
    QVERIFY(r.out.contains("row 0 sums to 1.000000"));
  }

  // The same run on a terminal (script(1) gives it one) draws the bar in
  // place and wipes it before the results are printed.
  void progress_bar_on_a_terminal() {
    const QString script = QStandardPaths::findExecutable("script");
    TL_REQUIRE(!script.isEmpty(), "script(1) from util-linux (bsdutils)");
    QProcess p;
    p.setProcessEnvironment(slow_compiles_environment("cache-tty"));
    p.start(script, {"-qec", cli_path() + " demo --device cpu", "/dev/null"});
    QVERIFY(p.waitForFinished(10 * 60 * 1000));
    QCOMPARE(p.exitCode(), 0);
    const QString screen = QString::fromUtf8(p.readAllStandardOutput());
    const QRegularExpression bar(R"(\r(compiling kernels +(\d+)/(\d+) \[[=> ]{30}\]))");
    QString last;
    int count = 0;
    for (auto it = bar.globalMatch(screen); it.hasNext(); ++count) {
      auto m = it.next();
      QVERIFY(m.captured(2).toInt() < m.captured(3).toInt());  // the finished state is wiped, not drawn
      last = m.captured(1);
    }
    QVERIFY2(count > 0, qPrintable(screen));
    const int wiped = int(screen.indexOf("\r" + QString(last.size(), ' ') + "\r"));
    QVERIFY2(wiped > 0, qPrintable(screen));
    QVERIFY(wiped < screen.indexOf("demo on cpu"));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
