// The C device's thread pool (core/runtime/thread_pool.h): every unit of a
// launch runs exactly once, in pieces of at most the grain when the threads
// share their slices, and a thread whose slice goes slowly has the rest of
// it taken by the others; without a grain each thread runs its own slice in
// one call.
#include <QtTest/QtTest>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/codegen/templates.h"
#include "core/runtime/thread_pool.h"

using tl::ThreadPool;

class TestThreadPool : public QObject {
  Q_OBJECT
 private slots:
  void everyUnitRunsOnceInPiecesOfTheGrain() {
    for (unsigned threads : {1u, 2u, 3u, 4u})
      for (int64_t n : {1, 2, 7, 100, 1000, 4097})
        for (int64_t grain : {0, 1, 3, 64, 5000}) {
          ThreadPool pool(threads);
          std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
          std::atomic<int64_t> largest{0}, calls{0};
          pool.parallel_for(
              n,
              [&](int64_t start, int64_t end) {
                QVERIFY(0 <= start && start < end && end <= n);
                for (int64_t i = start; i < end; ++i) runs[size_t(i)]++;
                int64_t seen = largest.load();
                while (end - start > seen && !largest.compare_exchange_weak(seen, end - start)) {
                }
                calls++;
              },
              grain);
          for (int64_t i = 0; i < n; ++i) QCOMPARE(runs[size_t(i)].load(), 1);
          if (grain > 0 && threads > 1 && n > 1) QVERIFY2(largest.load() <= grain, "a piece larger than the grain");
          if (grain == 0) QVERIFY(calls.load() <= int64_t(threads));  // one call per slice
        }
  }

  void aSlowSliceIsTakenOverByTheOtherThread() {
    ThreadPool pool(2);
    const std::thread::id caller = std::this_thread::get_id();
    constexpr int64_t n = 32;  // the caller's slice is [0, 16)
    for (int64_t grain : {int64_t(0), int64_t(1)}) {
      std::atomic<int> by_worker_in_callers_slice{0};
      pool.parallel_for(
          n,
          [&](int64_t start, int64_t end) {
            for (int64_t i = start; i < end; ++i) {
              if (std::this_thread::get_id() == caller)
                std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a core that others slow down
              else if (i < n / 2)
                by_worker_in_callers_slice++;
            }
          },
          grain);
      if (grain == 0) {
        QCOMPARE(by_worker_in_callers_slice.load(), 0);  // fixed slices: the worker idles
      } else {
        // The worker's own slice takes no time; it then takes half of what
        // is left of the caller's, again and again: most of it.
        QVERIFY2(by_worker_in_callers_slice.load() >= 8,
                 qPrintable(QString("the worker ran %1 of the slow slice's 16 units")
                                .arg(by_worker_in_callers_slice.load())));
      }
    }
  }

  void launchesFollowOneAnotherWithTheirOwnGrains() {
    ThreadPool pool(2);
    std::atomic<int64_t> sum{0};
    for (int round = 0; round < 200; ++round)
      pool.parallel_for(
          100 + round, [&](int64_t start, int64_t end) {
            for (int64_t i = start; i < end; ++i) sum += i;
          },
          round % 3);
    int64_t expected = 0;
    for (int round = 0; round < 200; ++round) expected += (100 + round) * (99 + round) / 2;
    QCOMPARE(sum.load(), expected);
  }

  // The C device's GEMM kernels ask for shared slices (local[0], the grain)
  // where a piece costs what its units cost in one call: the columns of a
  // 1x1 convolution (weights packed once, B packed per block anyway; pieces
  // larger where the weights are large), not
  // the rows of a product whose every piece would pack all of B again;
  // Winograd's rows of tiles in pieces of at least 28 tiles.
  void cGemmKernelsShareWherePiecesCostNoMore() {
    auto shape = [](int64_t m, int64_t n, int64_t k) {
      tl::GemmShape s;
      s.m = m, s.n = n, s.k = k;
      s.a_strides[0] = m * k, s.a_strides[1] = k, s.a_strides[2] = 1;
      s.b_strides[0] = k * n, s.b_strides[1] = n, s.b_strides[2] = 1;
      s.a_constant = true;
      return s;
    };
    const tl::TemplateKernel columns = tl::render_gemm_c(shape(256, 3136, 64), "columns");
    QCOMPARE(columns.global[0], int64_t(98));  // 32 columns a unit
    QCOMPARE(columns.local[0], int64_t(6));    // about a sixteenth
    // Larger weights stream through the cache once per piece: pieces of up
    // to 8 units while 4 remain (A of 256 x 512 floats, 512 KB; of 512 x 1024
    // on 98 units, 8).
    QCOMPARE(tl::render_gemm_c(shape(256, 784, 512), "streamed").local[0], int64_t(6));
    QCOMPARE(tl::render_gemm_c(shape(512, 3136, 1024), "streamed").local[0], int64_t(8));
    const tl::TemplateKernel rows = tl::render_gemm_c(shape(1024, 196, 512), "rows");
    QCOMPARE(rows.global[0], int64_t(64));  // 16 rows a unit
    QCOMPARE(rows.local[0], int64_t(0));
    // Winograd on a 13x13 map (7 rows of 7 tiles, 48 -> 192 channels): pieces
    // of 4 rows, so that they fill the micro-kernel's 14-row panels of tiles.
    tl::GemmShape wino = shape(192, 169, 48 * 9);
    wino.gather.channels = 48, wino.gather.height = wino.gather.width = 15;  // padded by the graph
    wino.gather.kernel_h = wino.gather.kernel_w = 3, wino.gather.out_w = 13;
    const tl::TemplateKernel w = tl::render_gemm_c(wino, "wino");
    QVERIFY(w.source.find(".winograd = 1") != std::string::npos);
    QCOMPARE(w.global[0], int64_t(7));
    QCOMPARE(w.local[0], int64_t(4));
    // A product of two activations packs no weights: nothing to share cheaply.
    tl::GemmShape plain = shape(256, 3136, 64);
    plain.a_constant = false;
    QCOMPARE(tl::render_gemm_c(plain, "plain").local[0], int64_t(0));
  }

  // The C device's thread count: TINYLENS_THREADS when it is a positive
  // number, else the cores the process may run on, not all the machine has.
  void threadCountFollowsTheAffinityMaskAndTheEnvironment() {
    qunsetenv("TINYLENS_THREADS");
    cpu_set_t all;
    QCOMPARE(sched_getaffinity(0, sizeof all, &all), 0);
    QCOMPARE(tl::default_thread_count(), unsigned(CPU_COUNT(&all)));
    // Allowed one core (as `taskset -c N` would), the count is one.
    int first = 0;
    while (!CPU_ISSET(first, &all)) ++first;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    QCOMPARE(sched_setaffinity(0, sizeof one, &one), 0);
    const unsigned restricted = tl::default_thread_count();
    QCOMPARE(sched_setaffinity(0, sizeof all, &all), 0);
    QCOMPARE(restricted, 1u);
    qputenv("TINYLENS_THREADS", "3");
    QCOMPARE(tl::default_thread_count(), 3u);
    // Anything but a positive number is ignored.
    for (const char* bad : {"0", "-2", "two", "3x", ""}) {
      qputenv("TINYLENS_THREADS", bad);
      QCOMPARE(tl::default_thread_count(), unsigned(CPU_COUNT(&all)));
    }
    qunsetenv("TINYLENS_THREADS");
  }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
