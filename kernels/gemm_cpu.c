// GEMM library of the C device: C[b] = A[b] @ B[b], fp32, any sizes and
// strides (kernels/gemm_cpu.h). core/runtime/cpu.cpp compiles it once per
// machine with the kernels' flags (-march=native) and keeps it in the kernel
// cache; every GEMM kernel (kernels/gemm_cpu_call.c) is a few lines that hold
// the sizes and the fused epilogue and call tinylens_gemm_f32.
//
// Each thread gets a contiguous range of units, merges the units that share a
// batch into one sub-matrix of C and computes it in the usual blocked way:
// panels of B (KC x NC) and of A (MC x KC) are copied into aligned buffers in
// the order the micro-kernel reads them, so its inner loop only streams two
// contiguous arrays and keeps an MR x NR tile of C in registers. A weight A
// (the same for every batch) is packed once, into the buffer the kernel
// passes as argument packed_a: a 64-byte header, then all of A in pack_a's
// panels, one KC block after another; the first call fills it. A
// convolution's B may be its image (struct tl_gather): pack_b_gather then
// builds B's panels from a zero-padded copy of the image, so the im2col
// columns are never stored.
//
// The library comes in two halves, compiled in parallel on a first run
// (core/runtime/cpu.cpp): this file, and kernels/gemm_cpu_extras.c with
// Winograd's and depthwise convolutions and the transposed product, which
// this one finds by name in the global scope (the device loads it first);
// both paste in kernels/gemm_cpu_shared.h.
//
// The micro-kernel uses GCC vector extensions rather than intrinsics so the
// same text builds on any x86-64 or ARM compiler; only the tile shape depends
// on the instruction set (it must fit the register file). Sizes are run-time
// values: only the packing loops see them, and they are a small part of the
// work next to the micro-kernel, whose loops do not depend on them.
#define _GNU_SOURCE  // RTLD_DEFAULT
#include <dlfcn.h>
#include <math.h>  // INFINITY

{{SHARED}}

// The extras (kernels/gemm_cpu_extras.c), found by name once, in the global
// scope the device loaded them into. Without them the direct product
// computes the same results.
typedef int (*transposed_fn)(const struct tl_gemm*, float*, const float*, const float*, ptrdiff_t, ptrdiff_t,
                             ptrdiff_t, ptrdiff_t, ptrdiff_t, const float*, void**);
typedef int (*winograd_fn)(const struct tl_gemm*, float*, const float*, const float*, ptrdiff_t, ptrdiff_t,
                           ptrdiff_t, void**);
typedef void (*winograd_weights_fn)(const struct tl_gemm*, const float*, float*);
typedef int (*gather_thin_fn)(const struct tl_gemm*, float*, const float*, const float*, ptrdiff_t, ptrdiff_t,
                              ptrdiff_t, ptrdiff_t, struct gather_work*);
typedef int (*depthwise_blocked_fn)(const struct tl_gemm*, float*, const float*, const float*, ptrdiff_t, ptrdiff_t,
                                    void**);
typedef int (*max_pool_fn)(const struct tl_gemm*, float*, const float*, ptrdiff_t, ptrdiff_t, void**);
typedef int (*pool_planes_fn)(const struct tl_gather*, const float*, ptrdiff_t, ptrdiff_t, float*, ptrdiff_t,
                              ptrdiff_t);
enum { X_TRANSPOSED, X_WINOGRAD, X_WINOGRAD_WEIGHTS, X_GATHER_THIN, X_DEPTHWISE_BLOCKED, X_MAX_POOL, X_POOL_PLANES, X_COUNT };
static const char* const extra_names[X_COUNT] = {"tinylens_gemm_transposed",        "tinylens_gemm_winograd",
                                                 "tinylens_gemm_winograd_weights",  "tinylens_gemm_gather_thin",
                                                 "tinylens_gemm_depthwise_blocked", "tinylens_gemm_max_pool",
                                                 "tinylens_gemm_pool_planes"};
static void* extra_slots[X_COUNT];
static void* extra(int which) {
  void* f = __atomic_load_n(&extra_slots[which], __ATOMIC_ACQUIRE);
  if (!f) {
    f = dlsym(RTLD_DEFAULT, extra_names[which]);
    __atomic_store_n(&extra_slots[which], f, __ATOMIC_RELEASE);
  }
  return f;
}
#define GEMM_TRANSPOSED ((transposed_fn)extra(X_TRANSPOSED))
#define GEMM_WINOGRAD ((winograd_fn)extra(X_WINOGRAD))
#define GEMM_WINOGRAD_WEIGHTS ((winograd_weights_fn)extra(X_WINOGRAD_WEIGHTS))
#define GEMM_GATHER_THIN ((gather_thin_fn)extra(X_GATHER_THIN))
#define GEMM_DEPTHWISE_BLOCKED ((depthwise_blocked_fn)extra(X_DEPTHWISE_BLOCKED))
#define GEMM_MAX_POOL ((max_pool_fn)extra(X_MAX_POOL))
#define GEMM_POOL_PLANES ((pool_planes_fn)extra(X_POOL_PLANES))

// The name of the first extra the global scope lacks, or NULL: the device
// asks once, after loading both halves, so a missing one is an error rather
// than a quiet fall back to the slower direct product.
const char* tinylens_gemm_missing_extra(void) {
  for (int i = 0; i < X_COUNT; ++i)
    if (!extra(i)) return extra_names[i];
  return NULL;
}

// k [k0, k0+kc) x columns [n0, n0+nc) of B into NR-column panels, k-major
// inside a panel, zero columns past nc.
static void pack_b(const struct tl_gemm* g, const float* restrict b, ptrdiff_t k0, ptrdiff_t kc, ptrdiff_t n0,
                   ptrdiff_t nc, float* restrict dst) {
  for (ptrdiff_t j0 = 0; j0 < nc; j0 += NR) {
    const ptrdiff_t cols = MIN(NR, nc - j0);
    const float* src = b + k0 * SB1 + (n0 + j0) * SB2;
    if (cols == NR && SB2 == 1) {
      for (ptrdiff_t p = 0; p < kc; ++p) memcpy(dst + p * NR, src + p * SB1, NR * sizeof(float));
    } else if (cols == NR) {
      // Transposed B (weights of a 1x1 convolution, a weight gradient's
      // columns): read along k, the contiguous direction, VW x VW blocks at
      // a time turned in registers, then the rest one element at a time.
      ptrdiff_t p0 = 0;
#if FAST_TRANSPOSE
      if (SB1 == 1)
        for (; p0 + VW <= kc; p0 += VW)
          for (int j0 = 0; j0 < NR; j0 += VW) transpose_block(src + j0 * SB2 + p0, SB2, dst + p0 * NR + j0, NR);
#endif
      for (int j = 0; j < NR; ++j)
        for (ptrdiff_t p = p0; p < kc; ++p) dst[p * NR + j] = src[j * SB2 + p * SB1];
    } else {
      for (ptrdiff_t p = 0; p < kc; ++p)
        for (int j = 0; j < NR; ++j) dst[p * NR + j] = j < cols ? src[j * SB2 + p * SB1] : 0.0f;
    }
    dst += NR * kc;
  }
}

// The fused epilogue's clamp (tl_gemm.fused), NaN kept, for one float.
static inline float clamp_nan(float v, float lo, float hi) {
  v = v <= lo ? lo : v;
  return v >= hi ? hi : v;
}

// Without packing buffers there is still a (slow) answer. The fused
// epilogue is `finish`'s, or, for a pooled product's band, which has no
// `finish` (pooled_product), applied here.
static void naive_block(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* restrict b,
                        ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1, void** args) {
  const int fused = g->fused && !g->finish;
  const float* bias = fused && g->bias >= 0 ? (const float*)args[g->bias] : NULL;
  for (ptrdiff_t i = m0; i < m1; ++i)
    for (ptrdiff_t j = n0; j < n1; ++j) {
      float s = bias ? bias[i] : 0.0f;
      for (ptrdiff_t p = 0; p < G_K; ++p)
        s += a[i * SA1 + p * SA2] * (GATHERED ? gathered_b(&g->gather, b, p, j) : b[p * SB1 + j * SB2]);
      c[i * G_N + j] = fused ? clamp_nan(s, g->lo, g->hi) : s;
    }
}

// A few rows of C (a classifier's single image, squeeze-excite layers):
// packing would copy all of B to use it once or twice, so B is read in place.
// Returns 0 when B's layout has no contiguous direction to stream along.
static int thin_block(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* restrict b,
                      ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1) {
  // Callers stay inside C already; the clamp lets the compiler see it too.
  if (n0 < 0) n0 = 0;
  if (n1 > G_N) n1 = G_N;
  const int ne = (int)n1;
  if (SB2 == 1) {
    // Rows of B are contiguous: C[i, j:j+4VW] += A[i, p] * B[p, j:j+4VW].
    for (ptrdiff_t i = m0; i < m1; ++i) {
      const float* ai = a + i * SA1;
      int j = (int)n0;
      for (; j + 4 * VW <= ne; j += 4 * VW) {
        vf acc[4] = {{0}, {0}, {0}, {0}};
        for (ptrdiff_t p = 0; p < G_K; ++p) {
          const float av = ai[p * SA2];
          const float* bp = b + p * SB1 + j;
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) acc[q] += *(const vfu*)(bp + q * VW) * av;
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) *(vfu*)(c + i * G_N + j + q * VW) = acc[q];
      }
      // Last columns: same, one vector at a time, then one float at a time.
      for (; j + VW <= ne; j += VW) {
        vf acc = {0};
        for (ptrdiff_t p = 0; p < G_K; ++p) acc += *(const vfu*)(b + p * SB1 + j) * ai[p * SA2];
        *(vfu*)(c + i * G_N + j) = acc;
      }
      if (j < ne) {
        float acc[VW] = {0};
        const int rem = ne - j;
        for (ptrdiff_t p = 0; p < G_K; ++p)
          for (int l = 0; l < rem && l < VW; ++l) acc[l] += ai[p * SA2] * b[p * SB1 + j + l];
        for (int l = 0; l < rem && l < VW; ++l) c[i * G_N + j + l] = acc[l];
      }
    }
    return 1;
  }
  if (SB1 == 1) {
    // Columns of B are contiguous (transposed weights): dot products along k,
    // four columns at a time so each load of A serves four of them.
    const ptrdiff_t kv = G_K / VW * VW;
    for (ptrdiff_t i = m0; i < m1; ++i) {
      const float* ai = a + i * SA1;
      int j = (int)n0;
      for (; j < ne; j += 4) {
        // A ragged last group repeats its first column in the spare lanes
        // and stores only the real ones.
        const int cnt = ne - j < 4 ? ne - j : 4;
        const float* bq[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) bq[q] = b + (ptrdiff_t)(j + (q < cnt ? q : 0)) * SB2;
        vf acc[4] = {{0}, {0}, {0}, {0}};
        for (ptrdiff_t p = 0; p < kv; p += VW) {
          vf av;
          if (SA2 == 1) {
            av = *(const vfu*)(ai + p);
          } else {
#pragma GCC unroll 16
            for (int l = 0; l < VW; ++l) av[l] = ai[(p + l) * SA2];
          }
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) acc[q] += *(const vfu*)(bq[q] + p) * av;
        }
        for (int q = 0; q < cnt; ++q) {
          float s = 0.0f;
          for (int l = 0; l < VW; ++l) s += acc[q][l];
          for (ptrdiff_t p = kv; p < G_K; ++p) s += ai[p * SA2] * bq[q][p];
          c[i * G_N + j + q] = s;
        }
      }
    }
    return 1;
  }
  return 0;
}

// gemm_block's tiles from packed panels of B and from B read in place, each
// a function of its own with its copies of the micro-kernel: inlined into
// gemm_block, the ten copies made it compile in 6.7 s instead of 1.7 (one
// call per tile costs 1-3% on a stem's K = 27, less on longer K).
static ONE_COPY void tile_packed(ptrdiff_t kc, const float* restrict ap, int panel, const float* restrict bp,
                                 float* restrict c, ptrdiff_t ldc, int accumulate, int rows, int cols,
                                 const float* restrict bias, const float* restrict clamp) {
  tile(kc, ap, panel, bp, NR, c, ldc, accumulate, rows, cols, 0, NULL, bias, clamp);
}
static ONE_COPY void tile_in_place(ptrdiff_t kc, const float* restrict ap, int panel, const float* restrict bp,
                                   float* restrict c, ptrdiff_t ldc, int accumulate, int rows, int cols,
                                   const ptrdiff_t* restrict boff, const float* restrict bias,
                                   const float* restrict clamp) {
  tile(kc, ap, panel, bp, 0, c, ldc, accumulate, rows, cols, 0, boff, bias, clamp);
}

// gemm_block's tiles for a gathered B read in place in one K block: the
// columns are walked in the phased image's own positions, (oh - oh0) * pw
// + ow (`cols`), where any NR consecutive ones are contiguous for every tap,
// so no tile is packed however narrow the map's rows (a 7x7 or 14x14 map
// crossed a row in most tiles, and each of those was packed). The few
// positions past a row's out_w are computed into a tile of their own and
// dropped; the rest are copied into C. Rows ic..ic + mc of C, columns
// cols[0]..cols[nc - 1]; bias and clamp as tile's.
static ONE_COPY void phased_walk(const struct tl_gemm* g, float* restrict c, const float* restrict apanels,
                                 const struct phased* image, const ptrdiff_t* restrict cols,
                                 const ptrdiff_t* restrict taps, ptrdiff_t nc, ptrdiff_t ic, ptrdiff_t mc,
                                 ptrdiff_t wide, const float* restrict bias, const float* restrict clamp) {
  float ctile[MR * NR] __attribute__((aligned(64)));
  const ptrdiff_t pw = image->pw, ow_n = g->gather.out_w, q1 = cols[nc - 1] + 1;
  for (ptrdiff_t q0 = cols[0], q_end; q0 < q1; q0 = q_end) {
    const ptrdiff_t r0 = q0 / pw, ow0 = q0 % pw;
    q_end = MIN(q1, q0 + NR);
    if (ow0 >= ow_n) {  // no tile starts past a row's end
      q_end = (r0 + 1) * pw;
      continue;
    }
    // A whole tile on one output row is stored straight into C.
    const int direct = q_end - q0 == NR && ow0 + NR <= ow_n;
    for (ptrdiff_t ir = 0, h; ir < mc; ir += h) {
      h = ic + ir < wide ? MR : SR;
      const int rows = (int)MIN(h, mc - ir);
      float* ct = direct ? c + (ic + ir) * G_N + (image->oh0 + r0) * ow_n + ow0 : ctile;
      tile_in_place(G_K, apanels + ir * G_K, (int)h, image->data + q0, ct, direct ? G_N : NR, 0, rows, NR, taps,
                    bias ? bias + ic + ir : NULL, clamp);
      if (direct) continue;
      // Each run of the tile's positions on one output row goes to C.
      for (ptrdiff_t q = q0; q < q_end;) {
        const ptrdiff_t r = q / pw, ow = q % pw;
        if (ow >= ow_n) {
          q = (r + 1) * pw;
          continue;
        }
        const ptrdiff_t run = MIN(ow_n - ow, q_end - q), n = (image->oh0 + r) * ow_n + ow;
        for (int i = 0; i < rows; ++i)
          for (ptrdiff_t j = 0; j < run; ++j) c[(ic + ir + i) * G_N + n + j] = ctile[i * NR + (q - q0) + j];
        q += run;
      }
    }
  }
}

// C[m0:m1, n0:n1] of batch `batch`; c, a, b already point at that batch.
// `packed` is all of A in pack_a's panels (see packed_a), or NULL; `bpacked`
// all of B in pack_b's (packed_b), or NULL.
static ONE_COPY void gemm_block(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* restrict b,
                       ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t batch, const float* packed,
                       const float* bpacked, void** args, struct gather_work* wk) {
  const gather_thin_fn gather_thin = GATHERED && m1 - m0 <= THIN_ROWS ? GEMM_GATHER_THIN : NULL;
  if (gather_thin) {
    wk->clamp = g->batch_clamp;
    wk->bias = g->batch_clamp ? batch_bias(g, args, batch) : 0.0f;
  }
  const int thin = m1 - m0 > THIN_ROWS ? 0
                   : GATHERED          ? (gather_thin ? gather_thin(g, c, a, b, m0, m1, n0, n1, wk) : 0)
                                       : thin_block(g, c, a, b, m0, m1, n0, n1);
  if (thin) {
    if (thin != 2) finish_block(g, c, batch, m0, m1, n0, n1, args);  // 2: applied as stored
    return;
  }
  const ptrdiff_t kcap = MIN(KC, G_K);
  // Rows are cut into panels by wide_rows; a block's last may add SR rows.
  const ptrdiff_t wide = wide_rows(G_M), mcap = ROUND_UP(MIN(MC, m1 - m0), MR) + SR;
  const ptrdiff_t ncap = ROUND_UP(MIN(NC, n1 - n0), NR);
  const size_t abytes = ROUND_UP((size_t)(mcap * kcap) * sizeof(float), 64);
  // B read in place needs a buffer only for a ragged last sliver. With more
  // rows than one block of A, a packed B would serve every block: packing
  // is then cheaper than reading B's scattered rows again.
  // A gathered B in place: read from the phased image, one offset per tap;
  // in one K block every tile (phased_walk), in several the panels whose
  // columns lie on one output row, the others packed.
  if (GATHERED || n0 % NR) bpacked = NULL;  // panels start at multiples of NR
  const int in_place = !bpacked && g->b_in_place && (GATHERED || SB2 == 1) && m1 - m0 <= MC;
  // NR floats of slack for pack_b_gather's runs.
  const size_t bbytes = ROUND_UP((size_t)((in_place ? NR : ncap) * kcap + NR) * sizeof(float), 64);
  float* abuf = packed ? NULL : scratch_alloc(abytes);
  float* bbuf = bpacked ? NULL : scratch_alloc(bbytes);
  // A gathered B: its phased image, and where each column and tap of a
  // block starts in it (columns first).
  // B read in place: where each of its rows starts (a plain B's are SB1
  // apart).
  struct phased image = {NULL, 0, 0, 0};
  ptrdiff_t* windows = NULL;
  if (GATHERED) image = phase_image(&g->gather, b, n0 / g->gather.out_w, (n1 - 1) / g->gather.out_w + 1);
  if (GATHERED || in_place) windows = scratch_alloc((size_t)(ncap + kcap) * sizeof(ptrdiff_t));
  if (windows && !GATHERED)
    for (ptrdiff_t p = 0; p < kcap; ++p) windows[ncap + p] = p * SB1;
  if ((!packed && !abuf) || (!bpacked && !bbuf) || ((GATHERED || in_place) && !windows) || (GATHERED && !image.data)) {
    scratch_free(abuf);
    scratch_free(bbuf);
    scratch_free(windows);
    scratch_free(image.data);
    naive_block(g, c, a, b, m0, m1, n0, n1, args);
    finish_block(g, c, batch, m0, m1, n0, n1, args);
    return;
  }
  // The fused epilogue's operands (tl_gemm.fused).
  const float* bias = g->fused && g->bias >= 0 ? (const float*)args[g->bias] : NULL;
  const float clamp[2] = {g->lo, g->hi};
  for (ptrdiff_t jc = n0; jc < n1; jc += NC) {
    const ptrdiff_t nc = MIN(NC, n1 - jc);
    if (GATHERED) phased_columns(&g->gather, &image, jc, nc, windows);
    for (ptrdiff_t pc = 0; pc < G_K; pc += KC) {
      const ptrdiff_t kc = MIN(KC, G_K - pc);
      if (GATHERED) {
        phased_taps(&g->gather, &image, pc, kc, windows + ncap);
        if (!in_place) pack_b_gather(image.data, windows + ncap, kc, nc, windows, bbuf, NR);
      } else if (!in_place && !bpacked)
        pack_b(g, b, pc, kc, jc, nc, bbuf);
      // B's panels of this K block from column jc on.
      const float* bblock = bpacked ? bpacked + ROUND_UP(G_N, NR) * pc + jc * kc : bbuf;
      for (ptrdiff_t ic = m0, next; ic < m1; ic = next) {
        next = MIN(m1, panel_floor(G_M, wide, ic + MC));
        const ptrdiff_t mc = next - ic;
        // ic starts a panel, so the packed panels of these rows start at
        // row ic of block pc.
        const float* apanels = packed ? packed + ROUND_UP(G_M, MR) * pc + ic * kc : abuf;
        if (!packed) pack_a(g, a, ic, mc, pc, kc, abuf, MR);
        if (in_place && GATHERED && kc == G_K)
          phased_walk(g, c, apanels, &image, windows, windows + ncap, nc, ic, mc, wide, bias, g->fused ? clamp : NULL);
        else {
          for (ptrdiff_t jr = 0; jr < nc; jr += NR) {
            const int cols = (int)MIN(NR, nc - jr);
            const float* bp = bblock + jr * kc;
            const ptrdiff_t* boff = NULL;
            if (in_place && GATHERED) {
              const ptrdiff_t* col = windows + jr;
              if (cols == NR && col[NR - 1] - col[0] == NR - 1) {
                bp = image.data + col[0];
                boff = windows + ncap;
              } else {
                pack_b_gather(image.data, windows + ncap, kc, cols, col, bbuf, NR);
                bp = bbuf;
              }
            } else if (in_place && cols == NR) {
              bp = b + pc * SB1 + jc + jr;
              boff = windows + ncap;
            } else if (in_place) {
              pack_b(g, b, pc, kc, jc + jr, cols, bbuf);
              bp = bbuf;
            }
            for (ptrdiff_t ir = 0, h; ir < mc; ir += h) {
              h = ic + ir < wide ? MR : SR;
              const int rows = (int)MIN(h, mc - ir);
              float* ct = c + (ic + ir) * G_N + jc + jr;
              const float* ap = apanels + ir * kc;
              // The fused epilogue: the first K block starts from the bias,
              // the last one clamps.
              const float* tb = bias && pc == 0 ? bias + ic + ir : NULL;
              const float* tc = g->fused && pc + kc == G_K ? clamp : NULL;
              // A literal stride for packed panels keeps their addressing
              // constant; B in place is read through its rows' offsets.
              if (boff)
                tile_in_place(kc, ap, (int)h, bp, ct, G_N, pc > 0, rows, cols, boff, tb, tc);
              else
                tile_packed(kc, ap, (int)h, bp, ct, G_N, pc > 0, rows, cols, tb, tc);
            }
          }
        }
        if (pc + kc == G_K && !g->fused) finish_block(g, c, batch, ic, ic + mc, jc, jc + nc, args);
      }
    }
  }
  scratch_free(abuf);
  scratch_free(bbuf);
  scratch_free(windows);
  scratch_free(image.data);
}

// Start of strip `u` in rows (or columns) of C. Edges snap down to the tile
// size so only the last strip of a batch has a ragged tile; every thread
// computes the same edges, so the strips still cover C exactly once.
static ptrdiff_t strip_edge(const struct tl_gemm* g, ptrdiff_t u, ptrdiff_t extent, ptrdiff_t tile) {
  if (u >= UNITS_PER_BATCH) return extent;
  return MIN(extent, u * UNIT / tile * tile);
}

// All of A, KC block after KC block, in `rows`-row panels (MR, or NR for a
// transposed product): done once per weight, so one plain copy of pack_a.
static ONE_COPY void pack_a_once(const struct tl_gemm* g, const float* restrict a, float* restrict panels, int rows) {
  for (ptrdiff_t pc = 0; pc < G_K; pc += KC)
    pack_a(g, a, 0, G_M, pc, MIN(KC, G_K - pc), panels + ROUND_UP(G_M, rows) * pc, rows);
}

// Whether C is computed transposed (gemm_block_t): as the kernel asks (0 or
// 1), or, when it leaves it to the library (-1), where C's columns fill
// MR-row tiles (a half tile for the last few) clearly better than NR-wide
// ones and there are rows enough for both threads: 49 columns (7x7) take 49
// rows against 64 columns on AVX-512, and measured 0.78-0.86x the time from
// k=512 to k=4608 (2 threads, weights streamed from memory). 196 columns
// (14x14) take 196 against 224: 0.83-1.05x, left to the tuner. A few
// columns (a squeeze-and-excite's 1x1 convolutions on one pixel: 1 column
// in an NR-wide panel, 7 in a half tile) are transposed when that at least
// halves the padded width and the tiles then hold more of C, however few
// its rows: 0.26-0.38x the time for 6 to 52 rows, 0.91-1.0x for 104 to
// 1152 (the tuner's choice on EfficientNet-B0's, MobileNetV3's and
// RegNet's).
static int use_transposed(const struct tl_gemm* g) {
  if (g->winograd) return 0;
  if (g->transposed >= 0) return g->transposed;
  if (g->split != 0) return 0;
  const ptrdiff_t rest = G_N % MR, by_rows = G_N - rest + (rest == 0 ? 0 : rest <= MR / 2 ? MR / 2 : MR);
  if (G_N < 2 * MR)
    return by_rows * 2 <= ROUND_UP(G_N, NR) && ROUND_UP(G_M, MR) * ROUND_UP(G_N, NR) > by_rows * ROUND_UP(G_M, NR);
  return G_N <= 512 && G_M >= 4 * NR && by_rows * 100 <= ROUND_UP(G_N, NR) * 85;
}

// All of A in pack_a's panels, KC block after KC block, filled by the first
// call that gets here (the others wait for it) and read by every later call;
// NULL when the kernel takes no packed copy. Header: state (0 empty, 1 being
// filled, 2 filled), then the panel rows (MR, or NR when transposed), the KC
// block (-NR for Winograd's U) and whether it is the transposed layout.
static const float* packed_a(const struct tl_gemm* g, const float* a, void** args) {
  if (g->packed_a < 0) return NULL;
  int* header = (int*)args[g->packed_a];
  float* panels = (float*)((char*)header + 64);
  int state = __atomic_load_n(&header[0], __ATOMIC_ACQUIRE);
  // Panels of NR rows for a transposed product; Winograd's weights (U, in
  // NR-column panels) are marked by a K block of -NR, or -2 NR for F(4x4, 3x3)'s.
  const int transposed = use_transposed(g), rows = transposed ? NR : MR, block = g->winograd ? -NR * g->winograd : (int)KC;
  if (state == 0 && __atomic_compare_exchange_n(&header[0], &state, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    const winograd_weights_fn pack_u = g->winograd ? GEMM_WINOGRAD_WEIGHTS : NULL;
    if (pack_u)
      pack_u(g, a, panels);
    else if (!g->winograd)
      pack_a_once(g, a, panels, rows);
    header[1] = g->winograd && !pack_u ? 0 : rows;  // no U: nobody reads it
    header[2] = block;
    header[3] = transposed;
    __atomic_store_n(&header[0], 2, __ATOMIC_RELEASE);
    return panels;
  }
  while (__atomic_load_n(&header[0], __ATOMIC_ACQUIRE) != 2) sched_yield();
  // A copy packed for another tile height, K block or orientation is not ours to read.
  return header[1] == rows && header[2] == block && header[3] == transposed ? panels : NULL;
}

// All of B in pack_b's panels, KC block after KC block (ROUND_UP(G_N, NR)
// columns each), filled by the first call that gets here and read by every
// later one, as packed_a does for A: a weight B shared by every batch item
// (a linear layer's) is then not copied on every call. NULL when the kernel
// takes no packed copy, or one packed for another tile width or K block.
static const float* packed_b(const struct tl_gemm* g, const float* b, void** args) {
  if (g->packed_b < 0 || GATHERED) return NULL;
  int* header = (int*)args[g->packed_b];
  float* panels = (float*)((char*)header + 64);
  int state = __atomic_load_n(&header[0], __ATOMIC_ACQUIRE);
  if (state == 0 && __atomic_compare_exchange_n(&header[0], &state, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    for (ptrdiff_t pc = 0; pc < G_K; pc += KC) pack_b(g, b, pc, MIN(KC, G_K - pc), 0, G_N, panels + ROUND_UP(G_N, NR) * pc);
    header[1] = NR;
    header[2] = (int)KC;
    __atomic_store_n(&header[0], 2, __ATOMIC_RELEASE);
    return panels;
  }
  while (__atomic_load_n(&header[0], __ATOMIC_ACQUIRE) != 2) sched_yield();
  return header[1] == NR && header[2] == (int)KC ? panels : NULL;
}

// The larger of m and v where NaN wins, as a max pool's graph states it.
static inline float max_nan(float m, float v) { return v > m || v != v ? v : m; }

// A max pool (tl_gather.max) when its extra cannot run: one cell at a
// time, batches [start, end) (units are batches: the renderer splits rows
// of one row).
static void naive_max_pool(const struct tl_gemm* g, float* c, const float* b, ptrdiff_t start, ptrdiff_t end,
                           void** args) {
  const struct tl_gather* x = &g->gather;
  for (ptrdiff_t p = start; p < end; ++p) {
    for (ptrdiff_t n = 0; n < G_N; ++n) {
      const ptrdiff_t oy = n / x->out_w * x->sh - x->pt, ox = n % x->out_w * x->sw - x->pl;
      float m = -INFINITY;
      for (ptrdiff_t i = 0; i < x->kh; ++i)
        for (ptrdiff_t j = 0; j < x->kw; ++j) {
          const ptrdiff_t y = oy + i * x->dh, col = ox + j * x->dw;
          if (y < 0 || y >= x->height || col < 0 || col >= x->width) continue;
          const float v = b[p * SB0 + y * x->width + col];
          m = max_nan(m, v);
        }
      c[p * G_N + n] = m;
    }
    finish_block(g, c + p * G_N, p, 0, 1, 0, G_N, args);
  }
}

// The fused epilogue of a pooled product with few rows, applied to the
// pooled values (the thin path has no fused form): max commutes with
// clamp(x + bias), which never decreases. NaN stays NaN.
static void pooled_epilogue(float* restrict o, ptrdiff_t n, const float* bias, float lo, float hi) {
  if (bias)
    for (ptrdiff_t i = 0; i < n; ++i) o[i] += *bias;
  if (lo > -INFINITY || hi < INFINITY)
    for (ptrdiff_t i = 0; i < n; ++i) o[i] = clamp_nan(o[i], lo, hi);
}

// pooled_product without scratch: each window's cells one dot product at a time.
static void naive_pooled_product(const struct tl_gemm* g, float* c, const float* a, const float* b, ptrdiff_t start,
                                 ptrdiff_t end, void** args) {
  const struct tl_gather* p = &g->pool;
  const float* bias = g->fused && g->bias >= 0 ? (const float*)args[g->bias] : NULL;
  const float lo = g->fused ? g->lo : -INFINITY, hi = g->fused ? g->hi : INFINITY;
  for (ptrdiff_t u = start; u < end; ++u) {
    const ptrdiff_t batch = u / UNITS_PER_BATCH, py0 = u % UNITS_PER_BATCH * UNIT, py1 = MIN(g->pool_h, py0 + UNIT);
    for (ptrdiff_t m = 0; m < G_M; ++m)
      for (ptrdiff_t py = py0; py < py1; ++py)
        for (ptrdiff_t px = 0; px < p->out_w; ++px) {
          float v = -INFINITY;
          for (ptrdiff_t i = 0; i < p->kh; ++i)
            for (ptrdiff_t j = 0; j < p->kw; ++j) {
              const ptrdiff_t y = py * p->sh - p->pt + i * p->dh, x = px * p->sw - p->pl + j * p->dw;
              if (y < 0 || y >= p->height || x < 0 || x >= p->width) continue;
              float s = 0.0f;
              for (ptrdiff_t k = 0; k < G_K; ++k)
                s += a[batch * SA0 + m * SA1 + k * SA2] * gathered_b(&g->gather, b + batch * SB0, k, y * p->width + x);
              v = max_nan(v, s);
            }
          if (bias) v += bias[m];
          c[((batch * G_M + m) * g->pool_h + py) * p->out_w + px] = clamp_nan(v, lo, hi);
        }
  }
}

// A product whose C is max-pooled as it is computed (tl_gemm.pool). Unit u
// of a batch item is UNIT pooled rows: the rows of C their windows read are
// computed, for every row of A, into a band in scratch as a product of
// their own (the same one with the image's top padding moved down, so that
// each row of A's plane of the band is contiguous), then pooled into c as
// planes of those rows (the first unit's windows may start in the top
// padding). The rows the next unit's windows read again are copied to the
// start of the next band rather than computed twice, within one call.
// Returns 0 when scratch is short or the window is too tall for the
// extras' pools.
static int pooled_product(const struct tl_gemm* g, float* c, const float* a, const float* b, ptrdiff_t start,
                          ptrdiff_t end, void** args) {
  const struct tl_gather* p = &g->pool;
  const ptrdiff_t w = p->width, plane = g->pool_h * p->out_w;
  const ptrdiff_t span = (p->kh - 1) * p->dh + 1, most = (UNIT - 1) * p->sh + span;  // rows of C a unit reads
  const pool_planes_fn pool_planes = GEMM_POOL_PLANES;
  float* band = pool_planes ? scratch_alloc((size_t)(G_M * most * w) * sizeof(float)) : NULL;
  float* kept = pool_planes ? scratch_alloc((size_t)(G_M * span * w) * sizeof(float)) : NULL;
  const float* packed = packed_a(g, a, args);
  const float* bias = g->fused && g->bias >= 0 ? (const float*)args[g->bias] : NULL;
  struct gather_work wk = {NULL, 0, 0, 0, 0, 0.0f};
  // The band's epilogue: in registers, as the direct product applies it,
  // except on the thin path (few rows), which has only `finish`: then on
  // the pooled values.
  const int after = g->fused && G_M <= THIN_ROWS;
  struct tl_gemm part = *g;
  part.fused = g->fused && !after, part.finish = NULL, part.pool.kh = 0, part.batch_clamp = 0;
  ptrdiff_t q0 = 0, q1 = 0, batch_of = -1;  // the band holds rows [q0, q1) of C of batch item batch_of
  int done = band && kept;
  for (ptrdiff_t u = start; u < end && done; ++u) {
    const ptrdiff_t batch = u / UNITS_PER_BATCH, py0 = u % UNITS_PER_BATCH * UNIT, py1 = MIN(g->pool_h, py0 + UNIT);
    const ptrdiff_t top = py0 * p->sh - p->pt, r0 = MAX(0, top), r1 = MIN(p->height, (py1 - 1) * p->sh - p->pt + span);
    // Rows [r0, q1) are the band's last ones: moved to its start (through
    // `kept`, since the planes' pitch changes with the band's height).
    const ptrdiff_t again = batch == batch_of && r0 >= q0 && r0 < q1 ? MIN(q1, r1) - r0 : 0;
    for (ptrdiff_t m = 0; m < G_M && again; ++m)
      memcpy(kept + m * again * w, band + (m * (q1 - q0) + r0 - q0) * w, (size_t)(again * w) * sizeof(float));
    part.n = (r1 - r0) * w;
    for (ptrdiff_t m = 0; m < G_M && again; ++m)
      memcpy(band + m * part.n, kept + m * again * w, (size_t)(again * w) * sizeof(float));
    part.gather.pt = g->gather.pt - r0 * g->gather.sh;
    if (again * w < part.n)
      gemm_block(&part, band, a + batch * SA0, b + batch * SB0, 0, G_M, again * w, part.n, batch, packed, NULL, args, &wk);
    q0 = r0, q1 = r1, batch_of = batch;
    struct tl_gather rows = *p;
    rows.height = r1 - r0, rows.pt = r0 - top;
    float* out = c + batch * G_M * plane + py0 * p->out_w;
    done = pool_planes(&rows, band, G_M, part.n, out, plane, py1 - py0);
    for (ptrdiff_t m = 0; m < G_M && done && after; ++m)
      pooled_epilogue(out + m * plane, (py1 - py0) * p->out_w, bias ? bias + m : NULL, g->lo, g->hi);
  }
  scratch_free(band);
  scratch_free(kept);
  free(wk.buf);
  return done;
}

void tinylens_gemm_f32(const struct tl_gemm* g, int start, int end, void** args) {
  float* c = (float*)args[0];
  const float* a = (const float*)args[1];
  const float* b = (const float*)args[2];
  if (GATHERED && g->gather.max) {
    const max_pool_fn pool = GEMM_MAX_POOL;
    if (!pool || !pool(g, c, b, start, end, args)) naive_max_pool(g, c, b, start, end, args);
    return;
  }
  if (g->pool.kh > 0) {
    if (!pooled_product(g, c, a, b, start, end, args)) naive_pooled_product(g, c, a, b, start, end, args);
    return;
  }
  const depthwise_blocked_fn depthwise = GATHERED ? GEMM_DEPTHWISE_BLOCKED : NULL;
  if (depthwise && depthwise(g, c, a, b, start, end, args)) return;
  const float* packed = packed_a(g, a, args);
  const int transposed = use_transposed(g);
  const float* bpacked = transposed ? NULL : packed_b(g, b, args);
  struct gather_work wk = {NULL, 0, 0, 0, 0, 0.0f};
  ptrdiff_t u = start;
  while (u < end) {
    const ptrdiff_t batch = u / UNITS_PER_BATCH;
    const ptrdiff_t first = u % UNITS_PER_BATCH;
    const ptrdiff_t last = MIN(UNITS_PER_BATCH, first + (end - u));  // exclusive
    float* cb = c + batch * G_M * G_N;
    const float* ab = a + batch * SA0;
    const float* bb = b + batch * SB0;
    if (transposed) {
      // Rows snap to the transposed product's NR-row panels, columns to its MR-row tiles.
      const int rows = g->split == 0;
      const ptrdiff_t m0 = rows ? strip_edge(g, first, G_M, NR) : 0, m1 = rows ? strip_edge(g, last, G_M, NR) : G_M;
      const ptrdiff_t n0 = rows ? 0 : strip_edge(g, first, G_N, MR), n1 = rows ? G_N : strip_edge(g, last, G_N, MR);
      const transposed_fn by_columns = GEMM_TRANSPOSED;
      if (m0 < m1 && n0 < n1 && !(by_columns && by_columns(g, cb, ab, bb, m0, m1, n0, n1, batch, packed, args)))
        gemm_block(g, cb, ab, bb, m0, m1, n0, n1, batch, NULL, NULL, args, &wk);
    } else if (g->winograd) {
      // Units are rows of 2x2 tiles (4x4 with winograd 2); without U or
      // buffers, the direct product computes the same output rows.
      const ptrdiff_t f = g->winograd == 2 ? 4 : 2, ow = g->gather.out_w;
      const ptrdiff_t n0 = f * first * ow, n1 = MIN(G_N, f * last * ow);
      const winograd_fn winograd = GEMM_WINOGRAD;
      if (!packed || !winograd || !winograd(g, cb, bb, packed, batch, first, last, args))
        gemm_block(g, cb, ab, bb, 0, G_M, n0, n1, batch, NULL, NULL, args, &wk);
    } else if (g->split == 0) {
      // Strips of rows start at panel boundaries (wide_rows).
      const ptrdiff_t wide = wide_rows(G_M);
      const ptrdiff_t m0 = panel_floor(G_M, wide, strip_edge(g, first, G_M, 1));
      const ptrdiff_t m1 = panel_floor(G_M, wide, strip_edge(g, last, G_M, 1));
      if (m0 < m1) gemm_block(g, cb, ab, bb, m0, m1, 0, G_N, batch, packed, bpacked, args, &wk);
    } else {
      const ptrdiff_t n0 = strip_edge(g, first, G_N, NR), n1 = strip_edge(g, last, G_N, NR);
      if (n0 < n1) gemm_block(g, cb, ab, bb, 0, G_M, n0, n1, batch, packed, bpacked, args, &wk);
    }
    u += last - first;
  }
  free(wk.buf);
}
