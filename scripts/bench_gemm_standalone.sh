#!/usr/bin/env bash
# Checks and times the C device's GEMM on its own, without a model: renders
# each shape through core/codegen/gemm_c.cpp (from the built core library),
# compiles the GEMM library's two halves and each kernel the way the C device
# does, runs them on 2 threads, compares with a double-precision loop and
# prints GFLOP/s.
#   scripts/bench_gemm_standalone.sh [correct|bench|small|big|all]
# Needs a build (BUILD, default build/: libtinylens_core.a). Extra compiler
# flags for the library and kernels (tuning): EXTRA="-DTL_KC=192" ...
# NumPy on the same shapes: scripts/bench_gemm_standalone.sh numpy
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ "${1:-}" == numpy ]]; then
  exec /usr/bin/python3 - <<'PY'
import numpy as np, time
def bench(m, k, n, trans):
    a = np.random.rand(m, k).astype(np.float32)
    b = np.random.rand(n, k).astype(np.float32).T if trans else np.random.rand(k, n).astype(np.float32)
    a @ b
    best = 1e9
    for _ in range(min(200, max(3, int(2e9 / (2 * m * n * k))))):
        t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
    print(f"m={m} k={k} n={n} transB={trans}: {2*m*n*k/best/1e9:.1f} GFLOP/s ({best*1e3:.3f} ms)")
for s in [(1024, 1024, 1024), (2048, 2048, 2048)]: bench(*s, False)
for s in [(12544, 32, 16), (3136, 144, 24), (49, 320, 1280), (12544, 16, 96), (3136, 24, 144), (784, 240, 40),
          (196, 480, 80), (49, 1152, 192), (1, 1280, 1000), (1, 96, 4)]: bench(*s, True)
for s in [(16, 32, 12544), (24, 144, 3136), (1280, 320, 49), (96, 16, 12544), (144, 24, 3136), (40, 240, 784),
          (80, 480, 196), (192, 1152, 49)]: bench(*s, False)
PY
fi
cat > "$work/harness.cpp" <<'CPP'
// Standalone harness: render via gemm_c.cpp, compile like the C device, run on 2 threads, check, time.
#include <dlfcn.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>
#include "core/codegen/templates.h"
typedef void (*kfn)(int, int, void**);
struct Pool {
  std::atomic<int> gen{0}, done{0}; kfn f = nullptr; void** args; int g = 0; std::thread t; bool stop = false;
  Pool() { t = std::thread([this] { int seen = 0; for (;;) { while (gen.load() == seen) {} seen = gen.load(); if (stop) return;
      f(g / 2, g, args); done.fetch_add(1); } }); }
  void run(kfn fn, int global, void** a) { f = fn; g = global; args = a; done = 0; gen.fetch_add(1); fn(0, global / 2, a); while (done.load() == 0) {} }
  ~Pool() { stop = true; gen.fetch_add(1); t.join(); }
};
static Pool* pool;
static int counter = 0;
// The C device's flags (core/runtime/cpu.cpp), plus EXTRA.
static void* compile(const std::string& source, int scope) {
  std::string base = std::string(getenv("TL_TMP") ? getenv("TL_TMP") : "/tmp") + "/k" + std::to_string(counter++);
  std::ofstream(base + ".c") << source;
  const char* extra = getenv("EXTRA");
  std::string cmd = "gcc -O3 -march=native -std=gnu11 -fPIC -shared -fno-math-errno -ffp-contract=off -fopenmp-simd "
                    "-Wall -Wextra -Wno-unused-variable " + std::string(extra ? extra : "") + " -o " + base + ".so " + base + ".c";
  if (system(cmd.c_str()) != 0) { fprintf(stderr, "compile failed %s\n", base.c_str()); exit(1); }
  void* h = dlopen((base + ".so").c_str(), RTLD_NOW | scope); if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(1); }
  return h;
}
// The library's second half first: the first finds it in the global scope.
static void load_library() {
  compile(tl::gemm_c_extras_source(), RTLD_GLOBAL);
  void* core = compile(tl::gemm_c_library_source(), RTLD_GLOBAL);
  auto missing = (const char* (*)())dlsym(core, "tinylens_gemm_missing_extra");
  if (!missing || missing()) { fprintf(stderr, "the GEMM library's halves do not link\n"); exit(1); }
}
kfn build(const tl::TemplateKernel& tk, const std::string& name) {
  return (kfn)dlsym(compile(tk.source, RTLD_LOCAL), name.c_str());
}
// mode: 0 A row-major,B row-major; 1 B transposed; 2 A transposed; 3 both; +4: batch broadcast of B (stride 0)
int check(int64_t batch, int64_t m, int64_t k, int64_t n, int mode, bool timeit, int reps = 0) {
  tl::GemmShape s; s.batch = batch; s.m = m; s.n = n; s.k = k;
  bool at = mode & 2, bt = mode & 1, bcast = mode & 4;
  s.a_strides[0] = m * k; s.a_strides[1] = at ? 1 : k; s.a_strides[2] = at ? m : 1;
  s.b_strides[0] = bcast ? 0 : k * n; s.b_strides[1] = bt ? 1 : n; s.b_strides[2] = bt ? k : 1;
  std::vector<float> A(batch * m * k), B((bcast ? 1 : batch) * k * n), C(batch * m * n, NAN);
  // A weight's packed copy (the kernel's last argument when it takes one).
  std::vector<float> packed;
  std::mt19937 rng(42); std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : A) x = d(rng); for (auto& x : B) x = d(rng);
  auto tk = tl::render_gemm_c(s, "gemm_test");
  kfn f = build(tk, "gemm_test");
  if (tk.packed_bytes > 0) packed.assign(size_t(tk.packed_bytes) / sizeof(float) + 1, 0.0f);
  void* args[4] = {C.data(), A.data(), B.data(), packed.empty() ? nullptr : packed.data()};
  pool->run(f, (int)tk.global[0], args);
  double maxerr = 0; int bad = 0;
  int64_t stepi = (timeit && m * n * k > 1e8) ? 7 : 1;  // subsample big ones
  for (int64_t b = 0; b < batch; ++b) for (int64_t i = 0; i < m; i += stepi) for (int64_t j = 0; j < n; ++j) {
    double acc = 0, mag = 0;
    for (int64_t p = 0; p < k; ++p) { double t = (double)A[b*s.a_strides[0]+i*s.a_strides[1]+p*s.a_strides[2]] * B[b*s.b_strides[0]+p*s.b_strides[1]+j*s.b_strides[2]]; acc += t; mag += fabs(t); }
    double got = C[(b*m+i)*n+j]; double err = fabs(got - acc) / (mag + 1e-30);
    if (!(err < 1e-5)) { if (bad++ < 3) fprintf(stderr, "  bad b=%ld i=%ld j=%ld got %g want %g\n", (long)b,(long)i,(long)j, got, acc); }
    if (err > maxerr || err != err) maxerr = err;
  }
  printf("b=%ld m=%ld k=%ld n=%ld mode=%d global=%ld: %s (max rel err %.2e)", (long)batch,(long)m,(long)k,(long)n, mode, (long)tk.global[0], bad ? "FAIL" : "ok", maxerr);
  if (timeit) {
    double best = 1e9; if (!reps) reps = std::max(3, std::min(200, (int)(2e9 / (2.0 * m * n * k * batch))));
    for (int r = 0; r < reps; ++r) { auto t0 = std::chrono::steady_clock::now(); pool->run(f, (int)tk.global[0], args);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
    printf("  %.1f GFLOP/s (%.3f ms)", 2.0 * batch * m * n * k / best / 1e9, best * 1e3);
  }
  printf("\n"); fflush(stdout);
  return bad;
}
int main(int argc, char** argv) {
  load_library();
  Pool p; pool = &p; int bad = 0;
  std::string what = argc > 1 ? argv[1] : "all";
  if (what == "all" || what == "correct") {
    int sizes[] = {1, 2, 3, 5, 13, 14, 15, 16, 17, 31, 32, 33, 47, 64, 100};
    std::mt19937 rng(7);
    for (int it = 0; it < 60; ++it) {
      int m = sizes[rng() % 15], n = sizes[rng() % 15], k = sizes[rng() % 15];
      if (it % 5 == 0) m = 200 + rng() % 300; if (it % 7 == 0) k = 257 + rng() % 300; if (it % 11 == 0) n = 300 + rng() % 2100;
      bad += check(1 + rng() % 3, m, k, n, rng() % 8, false) ? 1 : 0;
    }
    bad += check(1, 2, 37, 85, 0, false); bad += check(1, 3, 37, 85, 1, false); bad += check(2, 4, 33, 85, 6, false);
    bad += check(1, 1, 1280, 1000, 1, false); bad += check(3, 1, 17, 70, 4, false);
    bad += check(1, 1, 1, 1, 0, false); bad += check(1, 1, 600, 1, 3, false); bad += check(2, 1, 1, 3000, 5, false);
  }
  if (what == "all" || what == "bench") {
    check(1, 1024, 1024, 1024, 0, true); check(1, 2048, 2048, 2048, 0, true, 5);
    check(1, 12544, 32, 16, 1, true); check(1, 3136, 144, 24, 1, true); check(1, 49, 320, 1280, 1, true);
  }
  if (what == "all" || what == "small") {
    int sh[][3] = {{12544,16,96},{3136,24,144},{784,240,40},{196,480,80},{49,1152,192},{1,1280,1000},{1,96,4},{197,64,197}};
    for (auto& x : sh) check(1, x[0], x[1], x[2], 1, true);
    check(12, 197, 64, 197, 0, true);
    // The same 1x1 convolutions in NCHW order: weights (Cout x Cin) @ image (Cin x HW).
    int nchw[][3] = {{16,32,12544},{24,144,3136},{1280,320,49},{96,16,12544},{144,24,3136},{40,240,784},{80,480,196},{192,1152,49}};
    for (auto& x : nchw) check(1, x[0], x[1], x[2], 0, true);
  }
  if (what == "big") { check(1, 2048, 2048, 2048, 0, true, 5); }
  printf(bad ? "%d FAILED\n" : "all ok\n", bad);
  return bad != 0;
}
CPP
core="${BUILD:-$root/build}/libtinylens_core.a"
[[ -f "$core" ]] || { echo "bench_gemm_standalone: no $core: build first (scripts/build)" >&2; exit 1; }
g++ -O2 -std=c++20 -I "$root" -o "$work/harness" "$work/harness.cpp" "$core" -ldl -lpthread
TL_ROOT="$root" TL_TMP="$work" "$work/harness" "${1:-all}"
