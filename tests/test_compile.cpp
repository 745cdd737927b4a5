// First runs (issue 13, item 3): the new kernels of a realize build in one
// compiler run where the device can (one OpenCL program), else one by one,
// one compiler per core (the CPU device). On the CPU device and every
// OpenCL device: results equal kernel-by-kernel builds bit for bit; a warm
// disk cache runs no compiler (counted by compiler_runs(), not timed); the
// progress callback counts 0..N of N; a broken kernel in a batch is named
// with its own source and log. Where the driver keeps its own cache (PoCL),
// a warm run adds nothing to that cache either.
#include <QtTest/QtTest>
#include <QProcess>
#include <QRegularExpression>

#include <cstring>
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <cmath>
#include <atomic>
#include <thread>

#include "tests/testing.h"

#include "core/codegen/templates.h"
#include "core/profile.h"
#include "core/realize.h"
#include "core/runtime/cache.h"
#include "core/runtime/registry.h"
#include "core/runtime/together.h"
#include "core/tensor.h"

using namespace tl;

namespace {

// Six kernels: two elementwise kernels of one output shape (one name, two
// sources), two GEMMs of one shape with different epilogues (one name, two
// sources, each with its epilogue helper), two reductions.
std::vector<Tensor> six_kernels(const std::string& device) {
  std::vector<float> x(8 * 16), w(16 * 12), v(16 * 12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 23) - 11) * 0.125f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 53 % 19) - 9) * 0.0625f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 29 % 17) - 8) * 0.09375f;
  Tensor tx = Tensor::from_data(x, {8, 16}, device).realize();
  Tensor tw = Tensor::from_data(w, {16, 12}, device).realize();
  Tensor tv = Tensor::from_data(v, {16, 12}, device).realize();
  return {(tx * 1.625 + 0.375).exp(),      (tx - 0.8125).abs().sqrt(), tx.matmul(tw).relu(),
          (tx.matmul(tv) + 0.5).sigmoid(), tx.sum({1}),                tx.max({0})};
}

struct Run {
  std::vector<std::vector<float>> values;
  std::map<std::string, std::string> sources;       // distinct kernel sources launched -> their names
  std::vector<std::pair<size_t, size_t>> progress;  // (compiled, total) calls
  size_t compiler_runs = 0;
};

// One realize of the six kernels as a new process would do it: nothing
// compiled in memory, the disk cache in `cache_home`.
Run run_six(const std::string& device, const QString& cache_home) {
  qputenv("XDG_CACHE_HOME", cache_home.toUtf8());
  forget_compiled_kernels();
  Run run;
  auto outputs = six_kernels(device);
  const size_t before = compiler_runs();
  ProfileCapture capture;
  {
    CompileProgress watch([&](size_t compiled, size_t total) { run.progress.emplace_back(compiled, total); });
    std::vector<NodeRef> roots;
    for (auto& t : outputs) roots.push_back(t.node());
    realize_nodes(roots);
  }
  run.compiler_runs = compiler_runs() - before;
  for (auto& r : capture.records())
    run.sources[r.kernel->source] = r.kernel->entry.empty() ? r.kernel->name : r.kernel->entry;
  for (auto& t : outputs) run.values.push_back(t.to_vector());
  return run;
}

// Files in PoCL's kernel cache: the private folder initTestCase points
// POCL_CACHE_DIR at before PoCL starts.
size_t driver_cache_files() {
  namespace fs = std::filesystem;
  const char* dir = std::getenv("POCL_CACHE_DIR");
  if (!dir || !*dir) return 0;
  std::error_code ec;
  size_t n = 0;
  for (fs::recursive_directory_iterator it(fs::path(dir), ec), end; !ec && it != end; it.increment(ec))
    n += it->is_regular_file(ec);
  return n;
}

bool bit_equal(const Run& a, const Run& b, QString* why) {
  if (a.values.size() != b.values.size()) return *why = "different output counts", false;
  for (size_t i = 0; i < a.values.size(); ++i)
    if (a.values[i].size() != b.values[i].size() ||
        std::memcmp(a.values[i].data(), b.values[i].data(), a.values[i].size() * sizeof(float)) != 0)
      return *why = QString("output %1 differs").arg(i), false;
  return true;
}

// 0, 1, ..., n, each of n.
bool counts_up(const std::vector<std::pair<size_t, size_t>>& calls, size_t n, QString* why) {
  if (calls.size() != n + 1) return *why = QString("%1 progress calls for %2 kernels").arg(calls.size()).arg(n), false;
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].first != i || calls[i].second != n)
      return *why = QString("call %1 said %2/%3").arg(i).arg(calls[i].first).arg(calls[i].second), false;
  return true;
}

}  // namespace

class TestCompile : public QObject {
  Q_OBJECT
  std::vector<std::string> devices_;
  QTemporaryDir scratch_;

 private slots:
  void initTestCase() {
    QVERIFY(scratch_.isValid());
    // PoCL's own cache is counted below. A private folder, set before PoCL
    // starts, keeps other processes that use PoCL meanwhile out of the count.
    qputenv("POCL_CACHE_DIR", (scratch_.path() + "/pocl-kcache").toUtf8());
    qputenv("TINYLENS_NOREPLAY", "1");  // every realize below compiles or loads; none replays
    qunsetenv("TINYLENS_NOBATCH");
    for (auto& d : Registry::instance().devices())
      if (d->available() && (d->name() == "cpu" || d->name().rfind("opencl:", 0) == 0)) devices_.push_back(d->name());
    TL_REQUIRE(devices_.size() >= 2, "the CPU device and an OpenCL device (PoCL)");
    bool batches = false;
    for (auto& name : devices_) batches |= Registry::instance().get_available(name).builds_together();
    QVERIFY2(batches, "no device here builds kernels together: the batched path would go untested");
  }

  void renameKeepsOtherKernelsAndRenamesHelpers() {
    const std::string src = "void E1_4(int a) { E1_4_epilogue(a); E1_45(a); xE1_4(a); }";
    QCOMPARE(rename_kernel(src, "E1_4", "E1_4_b2"),
             std::string("void E1_4_b2(int a) { E1_4_b2_epilogue(a); E1_45(a); xE1_4(a); }"));
    auto unique = with_unique_names({{"E1_4", "void E1_4() {}"}, {"R2", "void R2() {}"}, {"E1_4", "void E1_4() { }"}});
    QCOMPARE(unique[0].name, std::string("E1_4"));
    QCOMPARE(unique[1].name, std::string("R2"));
    QCOMPARE(unique[2].name, std::string("E1_4_b2"));
    QCOMPARE(unique[2].source, std::string("void E1_4_b2() { }"));
  }

  void oneUnitUndefinesEachKernelsMacros() {
    const std::string text = one_translation_unit({{"A", "#define M 4\n  #  define IN(i) ((i) < M)\nvoid A() {}"},
                                                   {"B", "#define M 8\nvoid B() {}\n"}});
    const auto a = text.find("void A()"), b = text.find("void B()");
    const auto undef_m = text.find("#undef M\n"), undef_in = text.find("#undef IN\n");
    QVERIFY(a != std::string::npos && b != std::string::npos);
    QVERIFY2(undef_m > a && undef_m < b, text.c_str());
    QVERIFY2(undef_in > a && undef_in < b, text.c_str());
    QVERIFY2(text.find("#undef M\n", b) != std::string::npos, text.c_str());
    // An include guard stays defined, so a header two kernels paste in is read once.
    const std::string header = "#ifndef API_H\n#define API_H\nstruct api { int x; };\n#endif\n";
    const std::string two = one_translation_unit({{"A", header + "void A() {}"}, {"B", header + "void B() {}"}});
    QVERIFY2(two.find("#undef API_H") == std::string::npos, two.c_str());
  }

  // Batched (where the device batches) against kernel by kernel, cold and
  // warm, with compiler runs counted.
  void batchedEqualsKernelByKernelAndWarmCacheCompilesNothing() {
    for (auto& name : devices_) {
      const bool batches = Registry::instance().get_available(name).builds_together();
      qInfo("%s: %s", name.c_str(), batches ? "builds a realize's new kernels together" : "kernel by kernel");
      QTemporaryDir a(scratch_.path() + "/a-XXXXXX"), b(scratch_.path() + "/b-XXXXXX");
      QVERIFY(a.isValid() && b.isValid());
      QString why;

      Run cold = run_six(name, a.path());
      const size_t n = cold.sources.size();
      QVERIFY2(n >= 6, qPrintable(QString("%1 distinct kernels").arg(n)));
      QVERIFY2(counts_up(cold.progress, n, &why), qPrintable(why));
      // A batching device builds one program per core. The C device also
      // builds its GEMM library, once, for the kernels that call it: two
      // halves, each one compiler run.
      size_t library = 0;
      for (auto& [source, kernel] : cold.sources)
        if (source.find(tl::kGemmCLibraryEntry) != std::string::npos) library = 2;
      const size_t cores = std::max(1u, std::thread::hardware_concurrency());
      QCOMPARE(cold.compiler_runs, (batches ? std::min(cores, n) : n) + library);

      const bool driver_keeps = Registry::instance().get_available(name).driver_keeps_binaries();
      const size_t driver_files = driver_cache_files();
      QVERIFY(!driver_keeps || driver_files > 0);  // the cold run filled the driver's cache
      Run warm = run_six(name, a.path());  // a second process: the disk cache answers
      QCOMPARE(warm.compiler_runs, size_t(0));
      QCOMPARE(driver_cache_files(), driver_files);  // the driver built nothing either
      QVERIFY2(counts_up(warm.progress, n, &why), qPrintable(why));
      QVERIFY2(bit_equal(cold, warm, &why), qPrintable(why));

      qputenv("TINYLENS_NOBATCH", "1");
      Run alone = run_six(name, b.path());
      qunsetenv("TINYLENS_NOBATCH");
      QCOMPARE(alone.compiler_runs, n);  // the GEMM library stays loaded in this process
      QVERIFY2(counts_up(alone.progress, n, &why), qPrintable(why));
      QVERIFY2(bit_equal(cold, alone, &why), qPrintable(why));

      // Kernels built alone before are taken from their own cache entries.
      Run again = run_six(name, b.path());
      QCOMPARE(again.compiler_runs, size_t(0));
      QVERIFY2(bit_equal(cold, again, &why), qPrintable(why));
    }
  }

  // Issue 45 item 3: on a device that finishes its builds at a kernel's
  // first launch (PoCL: its clBuildProgram took 1 s of Lite0's 10 cold
  // seconds, the first launches the rest), a kernel counts as ready once
  // that launch returned. So a realize whose progress reached its total has
  // nothing left to launch: a cancel asked for at that moment cancels
  // nothing, and PoCL's cache gains no file after it. Before, the total was
  // reached when clBuildProgram returned, before any launch, and that
  // cancel stopped the realize at its first kernel.
  void progressEndsAfterFirstLaunches() {
    bool tested = false;
    for (auto& name : devices_) {
      if (!Registry::instance().get_available(name).builds_at_first_launch()) continue;
      tested = true;
      QTemporaryDir home(scratch_.path() + "/launch-XXXXXX");
      QVERIFY(home.isValid());
      qputenv("XDG_CACHE_HOME", home.path().toUtf8());
      forget_compiled_kernels();
      std::vector<float> x(64 * 48);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 31 % 29) - 14) * 0.0625f;
      Tensor tx = Tensor::from_data(x, {64, 48}, name).realize();
      // Constants no other test here uses: PoCL's own cache has none of them.
      std::vector<Tensor> outs = {(tx * 2.71875 + 0.40625).tanh(), (tx - 1.15625).abs().sum({1}),
                                  tx.max({0}) * 3.03125};
      std::vector<NodeRef> roots;
      for (auto& t : outs) roots.push_back(t.node());
      std::atomic<bool> cancel{false};
      set_cancel_flag(&cancel);
      auto unset = qScopeGuard([] { set_cancel_flag(nullptr); });
      std::vector<std::pair<size_t, size_t>> calls;
      const size_t files_before = driver_cache_files();
      size_t files_when_done = 0;
      ProfileCapture capture;
      try {
        CompileProgress watch([&](size_t ready, size_t total) {
          calls.emplace_back(ready, total);
          if (ready < total) return;
          files_when_done = driver_cache_files();
          cancel = true;
        });
        realize_nodes(roots);
      } catch (const Cancelled&) {
        QFAIL(qPrintable(QString("%1: the progress said %2/%2 with kernels still to launch")
                             .arg(name.c_str()).arg(calls.back().second)));
      }
      std::set<std::string> sources;
      for (auto& r : capture.records()) sources.insert(r.kernel->source);
      QString why;
      QVERIFY2(counts_up(calls, sources.size(), &why), qPrintable(why));
      QVERIFY2(files_when_done > files_before, "PoCL built nothing: its cache was not fresh");
      QCOMPARE(driver_cache_files(), files_when_done);  // PoCL built nothing after the progress said done
      QCOMPARE(outs[2].to_vector().size(), size_t(48));
    }
    TL_REQUIRE(tested, "a device that builds at first launch (PoCL)");
  }

  // One CompileProgress over two realizes counts both: the second goes on
  // from the first one's counts, so a run of many realizes (an ONNX model's
  // pieces) reports its whole total. Before, each realize started again at
  // 0 of its own new kernels (the window showed 50/50, then ran 75).
  void progressCountsEveryRealizeOfItsLife() {
    for (auto& name : devices_) {
      QTemporaryDir home(scratch_.path() + "/life-XXXXXX");
      QVERIFY(home.isValid());
      qputenv("XDG_CACHE_HOME", home.path().toUtf8());
      forget_compiled_kernels();
      Tensor tx = Tensor::from_data(std::vector<float>(40, 0.75f), {5, 8}, name).realize();
      std::vector<std::pair<size_t, size_t>> calls;
      size_t first = 0, second = 0;
      {
        CompileProgress watch([&](size_t ready, size_t total) { calls.emplace_back(ready, total); });
        ProfileCapture a;
        (tx * 1.84375 + 0.21875).exp().realize();
        first = a.records().size();
        ProfileCapture b;
        ((tx - 0.59375).abs().sum({0}) * 1.28125).realize();
        second = b.records().size();
      }
      QVERIFY(first >= 1 && second >= 1);
      std::vector<std::pair<size_t, size_t>> expected{{0, first}};
      for (size_t i = 1; i <= first; ++i) expected.emplace_back(i, first);
      expected.emplace_back(first, first + second);
      for (size_t i = first + 1; i <= first + second; ++i) expected.emplace_back(i, first + second);
      QString got;
      for (auto& [ready, total] : calls) got += QString(" %1/%2").arg(ready).arg(total);
      QVERIFY2(calls == expected, qPrintable(QString::fromStdString(name) + ":" + got));
    }
  }

  // A cancel while a realize compiles stops it there. Before, the compilers
  // stopped but make_plan then built every kernel left one by one, and only
  // run_plan threw Cancelled (a cancelled cold run went on compiling).
  void cancelWhileCompilingBuildsNothingMore() {
    for (auto& name : devices_) {
      QTemporaryDir home(scratch_.path() + "/cancel-XXXXXX");
      QVERIFY(home.isValid());
      qputenv("XDG_CACHE_HOME", home.path().toUtf8());
      forget_compiled_kernels();
      Tensor tx = Tensor::from_data(std::vector<float>(40, 0.5f), {5, 8}, name).realize();
      Tensor a = (tx * 2.90625 + 0.15625).sqrt(), b = (tx - 0.34375).max({1}), c = tx.sum({0}) * 1.65625;
      std::atomic<bool> cancel{false};
      set_cancel_flag(&cancel);
      auto unset = qScopeGuard([] { set_cancel_flag(nullptr); });
      const size_t before = compiler_runs();
      bool cancelled = false;
      try {
        CompileProgress watch([&](size_t, size_t) { cancel = true; });  // at the first report
        realize_nodes({a.node(), b.node(), c.node()});
      } catch (const Cancelled&) {
        cancelled = true;
      }
      QVERIFY2(cancelled, name.c_str());
      QCOMPARE(compiler_runs() - before, size_t(0));
      QVERIFY(!a.node()->realized());
    }
  }

  // kernels/gemm.cl takes its sizes as arguments: GEMMs of different shapes
  // with the same tiles and epilogue (here a column bias + ReLU, and the
  // same plus a residual read through C's flat index) share one compiled
  // kernel, and each still computes its own product (checked against the
  // CPU device). TINYLENS_GEMM=tiled gives PoCL the GPU template.
  void gemmsOfManyShapesShareOneKernel() {
    const bool was_set = qEnvironmentVariableIsSet("TINYLENS_GEMM");
    const QByteArray was = qgetenv("TINYLENS_GEMM");
    qputenv("TINYLENS_GEMM", "tiled");
    auto restore = qScopeGuard([&] {
      if (was_set)
        qputenv("TINYLENS_GEMM", was);
      else
        qunsetenv("TINYLENS_GEMM");
      forget_compiled_kernels();
    });
    struct Case {
      int64_t m, k, n;
      bool residual;
    };
    const Case cases[] = {{8, 16, 12, true}, {20, 32, 40, true}, {70, 16, 65, true},
                          {8, 16, 12, false}, {33, 32, 7, false}, {5, 48, 100, false}};
    auto values = [](int64_t count, int seed) {
      std::vector<float> v(static_cast<size_t>(count));
      for (size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 37 + size_t(seed) * 11) % 23) - 11) * 0.0625f;
      return v;
    };
    auto outputs = [&](const std::string& device) {
      std::vector<Tensor> out;
      int seed = 0;
      for (const Case& c : cases) {
        Tensor x = Tensor::from_data(values(c.m * c.k, ++seed), {c.m, c.k}, device).realize();
        Tensor w = Tensor::from_data(values(c.k * c.n, ++seed), {c.k, c.n}, device).realize();
        Tensor b = Tensor::from_data(values(c.n, ++seed), {c.n}, device).realize();
        Tensor y = (x.matmul(w) + b).relu();
        if (c.residual) y = y + Tensor::from_data(values(c.m * c.n, ++seed), {c.m, c.n}, device).realize();
        out.push_back(y);
      }
      return out;
    };
    std::vector<std::vector<float>> expected;
    for (auto& t : outputs("cpu")) expected.push_back(t.to_vector());
    for (auto& name : devices_) {
      if (name.rfind("opencl:", 0) != 0) continue;
      forget_compiled_kernels();
      auto got = outputs(name);
      std::map<std::string, std::set<std::string>> entries;  // source -> the GEMM entries that launched it
      std::set<std::string> gemms;
      {
        ProfileCapture capture;
        std::vector<NodeRef> roots;
        for (auto& t : got) roots.push_back(t.node());
        realize_nodes(roots);
        for (auto& r : capture.records()) {
          if (r.kernel->name.rfind("GEMM_", 0) != 0) continue;
          gemms.insert(r.kernel->name);
          entries[r.kernel->source].insert(r.kernel->entry);
          QCOMPARE(r.kernel->ints.size(), size_t(9));  // M, N, K and six strides
        }
      }
      QCOMPARE(gemms.size(), size_t(5));    // one shape appears twice
      QCOMPARE(entries.size(), size_t(2));  // with and without the residual
      for (auto& [source, names] : entries) QCOMPARE(names.size(), size_t(1));
      for (size_t i = 0; i < got.size(); ++i) {
        const auto v = got[i].to_vector();
        QCOMPARE(v.size(), expected[i].size());
        for (size_t j = 0; j < v.size(); ++j)
          QVERIFY2(std::fabs(v[j] - expected[i][j]) <= 1e-5f * (1 + std::fabs(expected[i][j])),
                   qPrintable(QString("%1 case %2 at %3: %4 vs %5")
                                  .arg(name.c_str()).arg(i).arg(j).arg(v[j]).arg(expected[i][j])));
      }
    }
  }

  // Two GEMMs of one shape (one name, two epilogues, each template full of
  // macros) in one program: what one_translation_unit and the templates'
  // macro-only file scope are for.
  void twoGemmsShareOneProgram() {
    for (auto& name : devices_) {
      Device& device = Registry::instance().get_available(name);
      if (!device.builds_together()) continue;
      QTemporaryDir home(scratch_.path() + "/gemm-XXXXXX");
      QVERIFY(home.isValid());
      Run run = run_six(name, home.path());
      std::vector<KernelSource> gemms;
      for (auto& [source, kernel] : run.sources)
        if (kernel.rfind("GEMM", 0) == 0) gemms.push_back({kernel, source});
      QCOMPARE(gemms.size(), size_t(2));
      QCOMPARE(gemms[0].name, gemms[1].name);
      auto unique = with_unique_names(gemms);
      QVERIFY(unique[0].name != unique[1].name);
      const size_t before = compiler_runs();
      auto programs = device.compile_together(unique);  // throws CompileError if they clash
      QCOMPARE(programs.size(), size_t(2));
      QCOMPARE(compiler_runs() - before, size_t(1));
      QVERIFY(!programs[0]->cache_hit);
    }
  }

  void brokenKernelInABatchIsNamedWithItsLog() {
    for (auto& name : devices_) {
      Device& device = Registry::instance().get_available(name);
      QTemporaryDir home(scratch_.path() + "/broken-XXXXXX");
      QVERIFY(home.isValid());
      Run run = run_six(name, home.path());  // real kernels of this device's dialect
      std::vector<KernelSource> batch;
      for (auto& [source, old_name] : run.sources) {
        if (old_name.rfind("E", 0) != 0) continue;  // the elementwise ones
        const std::string new_name = "batch_member_" + std::to_string(batch.size());
        batch.push_back({new_name, rename_kernel(source, old_name, new_name)});
      }
      QVERIFY2(batch.size() >= 2, "two elementwise kernels to build with the broken one");
      KernelSource broken = batch[0];
      broken.name = "the_broken_kernel";
      broken.source = rename_kernel(broken.source, batch[0].name, broken.name);
      // Inside the kernel's own body, not a helper of the preamble.
      const size_t body = broken.source.find('{', broken.source.find(broken.name + "("));
      broken.source.insert(body + 1, "\n  int broken_here = ;\n");
      batch.insert(batch.begin() + 1, broken);

      forget_compiled_kernels();
      const size_t before = compiler_runs();
      bool thrown = false;
      try {
        compile_new_kernels(device, batch);
      } catch (const CompileError& e) {
        thrown = true;
        const std::string what = e.what();
        QVERIFY2(what.find("the_broken_kernel") != std::string::npos, e.what());
        QVERIFY2(what.find("batch_member") == std::string::npos, e.what());  // only the broken one is named
        // gcc: "expected expression before ';' token"; clang (PoCL): "expected expression"
        QVERIFY2(e.log.find("expected expression") != std::string::npos, e.log.c_str());
        QCOMPARE(e.source, broken.source);  // its own source, not the batch's
      }
      QVERIFY2(thrown, "a broken kernel compiled");
      // The broken kernel's batch (if any) ran, then each of its kernels alone.
      const size_t runs = compiler_runs() - before;
      QVERIFY2(runs >= (device.builds_together() ? 3u : batch.size()), qPrintable(QString("%1 compiler runs").arg(runs)));
      QVERIFY(device.available());
    }
  }

  // Entries the build compiled (CMakeLists.txt: the GEMM library) are read
  // from prebuilt-cache/ beside the executable when the user's cache has
  // none: a first run with an empty cache then compiles nothing they hold.
  // New entries still go to the user's cache; TINYLENS_NOPREBUILT=1 ignores
  // the prebuilt ones.
  void prebuiltEntriesAreReadBesideTheExecutable() {
    namespace fs = std::filesystem;
    const fs::path prebuilt = prebuilt_cache_directory();
    QVERIFY(!prebuilt.empty());
    QVERIFY2(!fs::exists(prebuilt), prebuilt.c_str());  // the build makes none beside the tests
    struct Remove {
      fs::path dir;
      ~Remove() { std::error_code ec; fs::remove_all(dir, ec); }
    } remove{prebuilt.parent_path()};
    QTemporaryDir first(scratch_.path() + "/prebuild-XXXXXX"), user(scratch_.path() + "/user-XXXXXX"),
        off(scratch_.path() + "/off-XXXXXX");
    QVERIFY(first.isValid() && user.isValid() && off.isValid());
    const Run built = run_six("cpu", first.path());
    QVERIFY(built.compiler_runs > 0);
    fs::create_directories(prebuilt.parent_path());
    fs::copy(fs::path(first.path().toStdString()) / "tinylens", prebuilt, fs::copy_options::recursive);

    const Run read = run_six("cpu", user.path());
    QCOMPARE(read.compiler_runs, size_t(0));
    QString why;
    QVERIFY2(bit_equal(built, read, &why), qPrintable(why));
    QVERIFY(!fs::exists(fs::path(user.path().toStdString()) / "tinylens"));  // nothing new to write

    qputenv("TINYLENS_NOPREBUILT", "1");
    const Run ignored = run_six("cpu", off.path());
    qunsetenv("TINYLENS_NOPREBUILT");
    QVERIFY(ignored.compiler_runs > 0);  // the kernels' batches (the GEMM library stays loaded in this process)
    QVERIFY(fs::exists(fs::path(off.path().toStdString()) / "tinylens"));  // written to the user's cache
  }

  // Exp-based activations (SiLU and sigmoid epilogues, tanh, GELU) are
  // computed in vectors on the CPU device also where the instruction set
  // has no masked operations: with GCC's default trapping math, AVX2 kept
  // every loop that inlines tl_expf scalar (its clamps were not turned into
  // selects), and EfficientNet-B0 took 2.2x as long. Each such elementwise
  // kernel is compiled again with the device's options and GCC's vectorizer
  // report (on x86-64 with AVX-512 off); the loop around its first exp must
  // be reported vectorised.
  void expLoopsVectorise() {
    Device& device = Registry::instance().get_available("cpu");
    const QString cc = qEnvironmentVariable("CC", "cc");
    QProcess version;
    version.start(cc, {"--version"});
    if (!version.waitForFinished(30000) || version.exitCode() != 0) QSKIP("no C compiler");
    if (!QString(version.readAllStandardOutput()).contains("Free Software Foundation"))
      QSKIP("the vectorizer report read here is GCC's");
    std::vector<float> x(40 * 24), w(24 * 72);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 23) - 11) * 0.125f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i * 53 % 19) - 9) * 0.0625f;
    Tensor tx = Tensor::from_data(x, {40, 24}, "cpu").realize();
    Tensor tw = Tensor::from_data(w, {24, 72}, "cpu").realize();
    std::vector<std::string> sources;
    {
      ProfileCapture capture;
      std::vector<NodeRef> roots;
      for (const Tensor& t : {tx.matmul(tw).silu(), (tx * 0.75).sigmoid(), (tx + 0.25).tanh(), (tx * 1.5).gelu()})
        roots.push_back(t.node());
      realize_nodes(roots);
      for (auto& r : capture.records())
        if (r.kernel->name[0] != 'R' && r.kernel->source.find("= tl_expf(") != std::string::npos)
          sources.push_back(r.kernel->source);
    }
    QVERIFY2(sources.size() >= 4, qPrintable(QString("%1 kernels call tl_expf").arg(sources.size())));
    QTemporaryDir dir(scratch_.path() + "/vectorise-XXXXXX");
    QVERIFY(dir.isValid());
    for (size_t i = 0; i < sources.size(); ++i) {
      const std::string& s = sources[i];
      const size_t call = s.find("= tl_expf("), loop = s.rfind("for (", call);
      QVERIFY(loop != std::string::npos);
      const int line = int(std::count(s.begin(), s.begin() + loop, '\n')) + 1;
      const int first_exp = int(std::count(s.begin(), s.begin() + call, '\n')) + 1;
      const QString file = dir.path() + QString("/k%1.c").arg(i);
      QFile out(file);
      QVERIFY(out.open(QIODevice::WriteOnly));
      out.write(s.data(), qint64(s.size()));
      out.close();
      QStringList args = QString::fromStdString(device.build_options()).split(' ', Qt::SkipEmptyParts);
#if defined(__x86_64__)
      args << "-mno-avx512f";
#endif
      args << "-fopt-info-vec-optimized" << "-c" << "-o" << (file + ".o") << file;
      QProcess gcc;
      gcc.start(cc, args);
      QVERIFY(gcc.waitForFinished(120000));
      const QString report = gcc.readAllStandardError();
      QCOMPARE(gcc.exitCode(), 0);
      // GCC names the loop by its header or by a statement of its body.
      bool vectorised = false;
      const QRegularExpression at(QString("k%1\\.c:(\\d+):\\d+: optimized: loop vectorized").arg(i));
      for (auto m = at.globalMatch(report); m.hasNext();) {
        const int reported = m.next().captured(1).toInt();
        vectorised |= reported >= line && reported <= first_exp;
      }
      QVERIFY2(vectorised,
               qPrintable(QString("line %1 of this kernel is not vectorised:\n%2\n%3")
                              .arg(line)
                              .arg(report)
                              .arg(QString::fromStdString(s.substr(loop, 400)))));
    }
  }

  void cleanupTestCase() {
    qunsetenv("TINYLENS_NOREPLAY");
    forget_compiled_kernels();
  }
};

QTEST_GUILESS_MAIN(TestCompile)
#include "test_compile.moc"
