// What both halves of the C device's GEMM library share (pasted into
// kernels/gemm_cpu.c and kernels/gemm_cpu_extras.c): the tile shape and cache
// blocks, the micro-kernel, the packing of A and of a gathered B, the phased
// copy of a convolution's image, and register transposes.
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

{{API}}

// The device compiles kernels without fp contraction (see cpu.cpp); the
// micro-kernel's c += a * b must still become fused multiply-adds.
#if defined(__clang__)
#pragma clang fp contract(fast)
#else
#pragma GCC optimize("fp-contract=fast")
#endif

// The shape being computed: every function below that needs it takes it as
// its first parameter, `g`, and reads it through these names.
#define G_M (g->m)
#define G_N (g->n)
#define G_K (g->k)
#define SA0 (g->sa[0])
#define SA1 (g->sa[1])
#define SA2 (g->sa[2])
#define SB0 (g->sb[0])
#define SB1 (g->sb[1])
#define SB2 (g->sb[2])
#define UNIT (g->unit)
#define UNITS_PER_BATCH (g->units_per_batch)
#define GATHERED (g->gather.kh > 0)

// Tile shape: MR rows x NV vectors of VW floats. The MR*NV accumulators plus
// NV vectors of B must fit the vector register file, or the tile spills.
// MR=14 on AVX-512 also divides the 7*2^k row counts of image models.
#if defined(__AVX512F__)
#define VW 16
#ifndef TL_MR
#define TL_MR 14
#endif
#ifndef TL_NV
#define TL_NV 2
#endif
#elif defined(__AVX__)
#define VW 8
#ifndef TL_MR
#define TL_MR 6
#endif
#ifndef TL_NV
#define TL_NV 2
#endif
#elif defined(__aarch64__)
#define VW 4
#ifndef TL_MR
#define TL_MR 8
#endif
#ifndef TL_NV
#define TL_NV 3
#endif
#else
#define VW 4
#ifndef TL_MR
#define TL_MR 4
#endif
#ifndef TL_NV
#define TL_NV 2
#endif
#endif
#define MR TL_MR
#define NV TL_NV
#if MR > 16
#error "the renderer sizes packed A for MR <= 16"
#endif
#define NR (NV * VW)
#if MR == NR
#error "pack_a tells A's MR-row panels from a transposed product's NR-row ones by their height"
#endif
// The last rows of C may go in panels of SR < MR rows where those waste
// fewer rows (wide_rows below); SR = MR: never.
#ifndef TL_SR
#if MR == 14
#define TL_SR 8
#else
#define TL_SR MR
#endif
#endif
#define SR TL_SR

// Cache blocking: a KC x NR sliver of B stays in L1 while the MC x KC block of
// A streams from L2; the KC x NC block of B (1 MiB with AVX-512) stays in L2
// too and is reused across all of the thread's rows.
#ifndef TL_KC
#define TL_KC 256
#endif
#ifndef TL_MC
#define TL_MC (MR * 12)
#endif
#ifndef TL_NC
#define TL_NC (NR * 32)
#endif
// How far ahead (floats) the micro-kernel prefetches its A panels: 4 KiB.
#define A_PREFETCH 1024
// Up to this many rows, B is read in place instead of packed.
#define THIN_ROWS 4
// A kernel may ask for other block sizes (tl_gemm's kc, mc_tiles, nc_tiles).
#define KC_MAX (g->kc > 0 ? g->kc : TL_KC)
// K is cut into equal blocks of at most KC_MAX (K=320 -> 2 x 160, not 256 + 64).
#define KC ((G_K + (G_K + KC_MAX - 1) / KC_MAX - 1) / ((G_K + KC_MAX - 1) / KC_MAX))
#define MC (g->mc_tiles > 0 ? g->mc_tiles * MR : TL_MC)
#define NC (g->nc_tiles > 0 ? g->nc_tiles * NR : TL_NC)

typedef float vf __attribute__((vector_size(VW * 4)));
// Rows of C start anywhere, so C goes through an unaligned view.
typedef float vfu __attribute__((vector_size(VW * 4), aligned(4)));

#define ROUND_UP(x, r) (((x) + (r)-1) / (r) * (r))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
// The library is compiled on a first run: functions that inline copies of
// the micro-kernel are kept to one copy each (GCC would clone them per
// constant argument; each clone costs compile time, not speed).
#if defined(__clang__)
#define ONE_COPY __attribute__((noinline))
#else
#define ONE_COPY __attribute__((noinline, noclone))
#endif
#define MAX(a, b) ((a) > (b) ? (a) : (b))

// Scratch of one call (packed panels, a phased image, Winograd's V and M,
// the transposed product's tiles) comes from the device, which keeps a block
// per thread and hands it out again call after call (core/runtime/scratch.h):
// memory a kernel wrote a moment ago, where malloc may return a block that
// other work evicted or that the allocator gave back to the system. The device
// installs its functions once it loads a half of the library; until then,
// and if it never does, malloc serves. Every scratch_alloc is paired with a
// scratch_free on the same thread before the call returns.
static void* (*scratch_take)(size_t) = NULL;
static void (*scratch_give)(void*) = NULL;
void tinylens_gemm_scratch(void* (*take)(size_t), void (*give)(void*)) {
  scratch_take = take;
  scratch_give = give;
}
static void* scratch_alloc(size_t bytes) {
  return scratch_take ? scratch_take(bytes) : aligned_alloc(64, ROUND_UP(bytes ? bytes : 1, 64));
}
static void scratch_free(void* p) {
  if (scratch_give) scratch_give(p);
  else free(p);
}

// Applies the fused epilogue to C[m0:m1, n0:n1] of one batch once its sums
// are complete: called per MC x NC block, which is still in L2, so each row's
// loop is long and reads the epilogue's full-size inputs (a residual) along
// a row, which the hardware prefetches. Called per micro-tile instead, the
// tile's short rows each paid the loop's set-up and a cache miss on the
// residual: a residual epilogue then took 1.5-2.4x the GEMM's own time
// instead of 1.3x (m=256, n=3136, k=64, one thread).
static inline void finish_block(const struct tl_gemm* g, float* restrict c, ptrdiff_t batch, ptrdiff_t m0, ptrdiff_t m1,
                         ptrdiff_t n0, ptrdiff_t n1, void** args) {
  if (g->finish) g->finish(c, batch, m0, m1, n0, n1, args);
}

// gather_thin_block's buffers (kernels/gemm_cpu_depthwise.c), kept across
// the batches (channels) of one call: the phases' zero borders then stay as
// they are between channels of the same output rows.
// Batch item `batch`'s bias under tl_gemm.batch_clamp (0 when there is none).
static inline float batch_bias(const struct tl_gemm* g, void** args, ptrdiff_t batch) {
  return g->bias >= 0 ? ((const float*)args[g->bias])[batch] : 0.0f;
}

struct gather_work {
  float* buf;
  size_t floats;
  ptrdiff_t oh0, oh1;  // the rows the phases were laid out for
  // Set by the caller per batch where tl_gemm.batch_clamp holds: the
  // batch's bias, which gather_thin_block's whole rows add and clamp as
  // they store (it then returns 2: `finish` is not needed).
  int clamp;
  float bias;
};

// clamp(v, lo, hi) as the fused epilogue computes it (tl_gemm.fused): lo
// where v <= lo, hi where v >= hi, else v, so NaN stays NaN.
static inline float clamp_f(float v, const float* clamp) {
  if (v <= clamp[0]) v = clamp[0];
  if (v >= clamp[1]) v = clamp[1];
  return v;
}
// The same on a vector. x86's max and min return their second operand when
// either is NaN, so max(lo, v) and min(hi, v) keep v's NaN in one
// instruction each (v = lo gives v, equal to lo but for the sign of zero).
#if defined(__AVX512F__) && VW == 16
#include <immintrin.h>
static inline __attribute__((always_inline)) vf clamp_v(vf v, vf lo, vf hi) {
  return (vf)_mm512_min_ps((__m512)hi, _mm512_max_ps((__m512)lo, (__m512)v));
}
#elif defined(__AVX__) && VW == 8
#include <immintrin.h>
static inline __attribute__((always_inline)) vf clamp_v(vf v, vf lo, vf hi) {
  return (vf)_mm256_min_ps((__m256)hi, _mm256_max_ps((__m256)lo, (__m256)v));
}
#else
typedef int vclamp_mask __attribute__((vector_size(VW * 4)));
static inline __attribute__((always_inline)) vf clamp_v(vf v, vf lo, vf hi) {
  vclamp_mask m = v <= lo;
  v = (vf)(((vclamp_mask)lo & m) | ((vclamp_mask)v & ~m));
  m = v >= hi;
  return (vf)(((vclamp_mask)hi & m) | ((vclamp_mask)v & ~m));
}
#endif

// The valid rows x cols of an edge tile (rows NR floats apart in `tile`)
// written to (or added to) c, then clamped when `clamp` ({lo, hi}) is
// given: one copy serves every copy of the micro-kernel, whose compile time
// it would otherwise multiply.
static ONE_COPY void store_edge(const float* restrict tile, int rows, int cols, float* restrict c, ptrdiff_t ldc,
                                int accumulate, const float* restrict clamp) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const float v = accumulate ? c[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
      c[i * ldc + j] = clamp ? clamp_f(v, clamp) : v;
    }
}

// acc[i][j] += a[i] * b[j] over kc steps (B's rows `ldb` apart: NR in a
// packed panel, B's own row stride when read in place), then writes (or adds, when
// `accumulate`) the tile to c. A's steps are `lda` apart (MR in a packed
// panel); B's step p starts at bp + boff[p] when boff is given (a gathered
// B read in place from its phased image). `mr` and `nv` are literals at every call so each
// copy is specialised: the short and narrow copies serve edge tiles of at most
// MR/2 rows or VW columns (m=49, N=16 layers) without the work of a full one.
// A's panels keep their stride (lda) whatever mr is. The fused epilogue
// (tl_gemm.fused): the sums start from `bias` (the tile's rows' values, or
// NULL: zero), and `clamp` ({lo, hi}, or NULL) bounds what is stored.
static inline __attribute__((always_inline)) void micro_tile(int mr, int nv, ptrdiff_t kc, const float* restrict ap,
                                                             ptrdiff_t lda, const float* restrict bp, ptrdiff_t ldb,
                                                             float* restrict c, ptrdiff_t ldc, int accumulate,
                                                             int rows, int cols, int weights_in_b,
                                                             const ptrdiff_t* restrict boff,
                                                             const float* restrict bias,
                                                             const float* restrict clamp) {
  vf acc[MR][NV];
#pragma GCC unroll 64
  for (int i = 0; i < MR; ++i) {
    const float start = bias && i < rows ? bias[i] : 0.0f;
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = (vf){0} + start;
  }

#pragma GCC unroll 2
  for (ptrdiff_t p = 0; p < kc; ++p) {
    vf b[NV];
    const float* brow = boff ? bp + boff[p] : bp;
#pragma GCC unroll 8
    for (int j = 0; j < nv; ++j) b[j] = *(const vfu*)(brow + j * VW);
#pragma GCC unroll 64
    for (int i = 0; i < mr; ++i) {
      const float a = ap[i];
#pragma GCC unroll 8
      for (int j = 0; j < nv; ++j) acc[i][j] += b[j] * a;
    }
    // Weights too large for the cache (ResNet-50's last layers: 9 MB each)
    // stream from memory, and the hardware prefetcher alone fell behind:
    // 117 GFLOP/s against 162 with this (one thread, m=512, n=49, k=4608).
    // They are A's panels, or B's when C is computed transposed.
    if (weights_in_b) {
#pragma GCC unroll 8
      for (int j = 0; j < nv; ++j) __builtin_prefetch(bp + A_PREFETCH + j * VW, 0, 3);
    } else {
      __builtin_prefetch(ap + A_PREFETCH, 0, 3);
    }
    ap += lda;
    bp += ldb;
  }

  // Every store is clamped, by +-infinity when there is nothing to clamp
  // to: one store loop instead of two per copy of the micro-kernel (two
  // made the library's first half compile in 6.7 s instead of 1.7).
  const vf lo = (vf){0} + (clamp ? clamp[0] : -__builtin_inff());
  const vf hi = (vf){0} + (clamp ? clamp[1] : __builtin_inff());
  if (rows == mr && cols == nv * VW) {
#pragma GCC unroll 64
    for (int i = 0; i < mr; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < nv; ++j) {
        vfu* dst = (vfu*)(c + i * ldc + j * VW);
        const vf v = accumulate ? *dst + acc[i][j] : acc[i][j];
        *dst = clamp_v(v, lo, hi);
      }
    return;
  }
  // Edge tile: the padding rows/columns were computed from zeros; only the
  // valid part is written. Full rows (the last rows of a channel count
  // that MR does not divide) are stored as vectors.
  if (cols == nv * VW) {
#pragma GCC unroll 64
    for (int i = 0; i < mr; ++i)
      if (i < rows)
#pragma GCC unroll 8
        for (int j = 0; j < nv; ++j) {
          vfu* dst = (vfu*)(c + i * ldc + j * VW);
          const vf v = accumulate ? *dst + acc[i][j] : acc[i][j];
          *dst = clamp_v(v, lo, hi);
        }
    return;
  }
  float tile[MR][NR] __attribute__((aligned(64)));
  // Already true; stated so the compiler sees the copy stays inside `tile`.
  if (rows > mr) rows = mr;
  if (cols > NR) cols = NR;
#pragma GCC unroll 64
  for (int i = 0; i < mr; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < nv; ++j) *(vf*)&tile[i][j * VW] = acc[i][j];
  store_edge(&tile[0][0], rows, cols, c, ldc, accumulate, clamp);
}

// One tile of C, with the micro-kernel's copy that fits it: A's panel has
// `panel` rows (MR, or SR for the last rows, see wide_rows), and in an MR-row
// panel the short and narrow copies serve edge tiles of at most MR/2 rows or
// VW columns.
static inline __attribute__((always_inline)) void tile(ptrdiff_t kc, const float* restrict ap, int panel,
                                                       const float* restrict bp, ptrdiff_t ldb, float* restrict c,
                                                       ptrdiff_t ldc, int accumulate, int rows, int cols,
                                                       int weights_in_b, const ptrdiff_t* restrict boff,
                                                       const float* restrict bias, const float* restrict clamp) {
  const int narrow = NV > 1 && cols <= VW, short_tile = MR >= 4 && rows <= MR / 2;
  if (SR != MR && panel == SR)
    micro_tile(SR, NV, kc, ap, SR, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff, bias, clamp);
  else if (narrow && short_tile)
    micro_tile(MR / 2, 1, kc, ap, MR, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff, bias, clamp);
  else if (narrow)
    micro_tile(MR, 1, kc, ap, MR, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff, bias, clamp);
  else if (short_tile)
    micro_tile(MR / 2, NV, kc, ap, MR, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff, bias, clamp);
  else
    micro_tile(MR, NV, kc, ap, MR, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff, bias, clamp);
}

// How C's rows are cut into micro-tiles: MR-row panels for rows [0, w),
// then SR-row panels for the rest, with w = wide_rows(m) chosen to compute
// the fewest rows (the last panel may be partial; a last MR-row panel of at
// most MR/2 rows runs the short copy, MR/2 rows). An SR-row tile counts as
// SR + 2 rows: it does fewer products per load, and 4 x 8 rows took 1.08x
// the time of 14 + 14 + 7 (m = 32, k = 256, 2 threads). With MR = 14 and
// SR = 8: m = 64 takes 4 x 14 + 8 rows instead of 5 x 14, m = 16 two
// panels of 8 instead of 14 + 7 (0.85x the time at k = 64 and 128). A's
// packed panels follow the same cut, so the panel that starts at row r
// starts r * kc floats into its K block.
static inline ptrdiff_t wide_rows(ptrdiff_t m) {
  if (SR == MR) return m;
  const ptrdiff_t full = (m + MR - 1) / MR, rest = m - (full - 1) * MR;
  ptrdiff_t best = full, cost = (full - 1) * MR + (MR >= 4 && rest <= MR / 2 ? MR / 2 : MR);
  // SR-row panels that replace more than SR MR-row ones only repeat a cut.
  for (ptrdiff_t a = full - 1; a >= 0 && a >= full - SR; --a) {
    const ptrdiff_t c = a * MR + (m - a * MR + SR - 1) / SR * (SR + 2);
    if (c < cost) cost = c, best = a;
  }
  return MIN(m, best * MR);
}
// The first panel boundary at or below row r (r <= m), for rows cut by
// wide_rows: where thread strips and cache blocks of rows may start.
static inline ptrdiff_t panel_floor(ptrdiff_t m, ptrdiff_t wide, ptrdiff_t r) {
  if (r >= m) return m;
  return r <= wide ? r / MR * MR : wide + (r - wide) / SR * SR;
}

// Rows [m0, m0+mc) x k [k0, k0+kc) of A into `mr`-row panels (MR, or NR
// when the product is computed transposed), k-major inside a panel, zero
// rows past mc. MR-row panels from row wide_rows(m) on have SR rows, as
// gemm_block's tiles do from the same m0.
static inline __attribute__((always_inline)) void pack_a(const struct tl_gemm* g, const float* restrict a,
                                                         ptrdiff_t m0, ptrdiff_t mc, ptrdiff_t k0, ptrdiff_t kc,
                                                         float* restrict dst, int mr) {
  const ptrdiff_t wide = mr == MR ? wide_rows(G_M) : G_M;
  for (ptrdiff_t i0 = 0; i0 < mc;) {
    const int h = m0 + i0 < wide ? mr : SR;
    const ptrdiff_t rows = MIN(h, mc - i0);
    const float* src = a + (m0 + i0) * SA1 + k0 * SA2;
    if (rows == mr) {
      for (ptrdiff_t p = 0; p < kc; ++p)
#pragma GCC unroll 64
        for (int i = 0; i < mr; ++i) dst[p * mr + i] = src[i * SA1 + p * SA2];
    } else {
      for (ptrdiff_t p = 0; p < kc; ++p)
        for (int i = 0; i < h; ++i) dst[p * h + i] = i < rows ? src[i * SA1 + p * SA2] : 0.0f;
    }
    dst += h * kc;
    i0 += h;
  }
}

// B[k, n] of a gathered B (struct tl_gather): the element of the image that
// column n's window reads at tap k, or zero in the padding.
static inline float gathered_b(const struct tl_gather* x, const float* image, ptrdiff_t k, ptrdiff_t n) {
  const ptrdiff_t taps = x->kh * x->kw, c = k / taps, i = k % taps / x->kw, j = k % x->kw;
  const ptrdiff_t y = n / x->out_w * x->sh + i * x->dh - x->pt, col = n % x->out_w * x->sw + j * x->dw - x->pl;
  if (y < 0 || y >= x->height || col < 0 || col >= x->width) return 0.0f;
  return image[(c * x->height + y) * x->width + col];
}

// A gathered B reads its image through a copy with the zero padding made
// real and split by stride into phases (as gather_thin_block does for one
// channel): phase (a, b) of channel c holds padded rows a, a + sh, ... and
// columns b, b + sw, ... Output (oh, ow) at tap (c, i, j) is then element
// oh*pw + ow of its phase, offset by the tap: every panel row is a copy
// with unit stride and no bounds test, whatever the stride and padding.
// Only the rows and columns some window reads are kept, and only for the
// output rows a call computes: a thread that takes half of the columns
// copies half of the image.
struct phased {
  float* data;
  ptrdiff_t ph, pw;  // rows and columns of one phase
  ptrdiff_t oh0;     // the first output row it was made for
};

// Whether a window of n taps, d apart, reads phase `phase` of stride s: some
// tap's offset k*d leaves that remainder.
static inline int phase_read(ptrdiff_t n, ptrdiff_t d, ptrdiff_t s, ptrdiff_t phase) {
  for (ptrdiff_t k = 0; k < n; ++k)
    if (k * d % s == phase) return 1;
  return 0;
}

// The phased copy of `image` (one batch item) for output rows [oh0, oh1), or
// data = NULL when it would be too large or memory is short (the caller then
// takes the slow path). Phases that no tap reads are left unwritten: a 1x1
// window at stride 2 (a ResNet downsampling) reads one phase of four.
static inline struct phased phase_image(const struct tl_gather* x, const float* restrict image, ptrdiff_t oh0,
                                 ptrdiff_t oh1) {
  struct phased out = {NULL, 0, 0, oh0};
  const ptrdiff_t sh = x->sh, sw = x->sw;
  const ptrdiff_t rows = (oh1 - oh0 - 1) * sh + (x->kh - 1) * x->dh + 1;
  const ptrdiff_t cols = (x->out_w - 1) * sw + (x->kw - 1) * x->dw + 1;
  out.ph = (rows + sh - 1) / sh;
  out.pw = (cols + sw - 1) / sw;
  const double floats = (double)x->channels * sh * sw * out.ph * out.pw;
  if (floats > (double)(1 << 28)) return out;
  // NR floats of slack: pack_b_gather copies runs NR wide.
  out.data = scratch_alloc((size_t)(floats + NR) * sizeof(float));
  if (!out.data) return out;
  memset(out.data + (size_t)floats, 0, NR * sizeof(float));
  const ptrdiff_t h = x->height, w = x->width;
  float* dst = out.data;
  for (ptrdiff_t c = 0; c < x->channels; ++c)
    for (ptrdiff_t a = 0; a < sh; ++a)
      for (ptrdiff_t b = 0; b < sw; ++b) {
        if (!phase_read(x->kh, x->dh, sh, a) || !phase_read(x->kw, x->dw, sw, b)) {
          dst += out.ph * out.pw;
          continue;
        }
        for (ptrdiff_t r = 0; r < out.ph; ++r, dst += out.pw) {
          const ptrdiff_t y = (oh0 + r) * sh + a - x->pt, x0 = b - x->pl;
          // Columns q in [lo, hi) read the image (x0 + q*sw in [0, w)); the others are padding.
          const ptrdiff_t lo = y < 0 || y >= h ? out.pw : MIN(out.pw, x0 >= 0 ? 0 : (sw - 1 - x0) / sw);
          const ptrdiff_t hi = MAX(lo, MIN(out.pw, x0 >= w ? 0 : (w - 1 - x0) / sw + 1));
          memset(dst, 0, (size_t)lo * sizeof(float));
          memset(dst + hi, 0, (size_t)(out.pw - hi) * sizeof(float));
          if (lo == hi) continue;
          const float* src = image + (c * h + y) * w;
          if (sw == 1)
            memcpy(dst + lo, src + x0 + lo, (size_t)(hi - lo) * sizeof(float));
          else if (sw == 2)  // a literal stride: the loop vectorises
            for (ptrdiff_t q = lo; q < hi; ++q) dst[q] = src[x0 + q * 2];
          else
            for (ptrdiff_t q = lo; q < hi; ++q) dst[q] = src[x0 + q * sw];
        }
      }
  return out;
}

// Where tap k0 + p starts in the phased copy: its channel's phase for the
// tap's row and column remainders, then the rows and columns the tap skips.
static inline void phased_taps(const struct tl_gather* x, const struct phased* im, ptrdiff_t k0, ptrdiff_t kc,
                        ptrdiff_t* restrict taps) {
  const ptrdiff_t per_tap = x->kh * x->kw, sh = x->sh, sw = x->sw;
  for (ptrdiff_t p = 0; p < kc; ++p) {
    const ptrdiff_t k = k0 + p, c = k / per_tap, dy = k % per_tap / x->kw * x->dh, dx = k % x->kw * x->dw;
    taps[p] = ((c * sh + dy % sh) * sw + dx % sw) * im->ph * im->pw + dy / sh * im->pw + dx / sw;
  }
}

// Where output column n0 + q starts in any phase: (oh - oh0)*pw + ow.
// One division for the first column, then a walk along the rows: with a
// short K (a network's first layer) a division per column cost as much as
// the products.
static inline void phased_columns(const struct tl_gather* x, const struct phased* im, ptrdiff_t n0, ptrdiff_t nc,
                           ptrdiff_t* restrict cols) {
  ptrdiff_t oh = n0 / x->out_w, ow = n0 % x->out_w;
  for (ptrdiff_t q = 0; q < nc; ++q) {
    cols[q] = (oh - im->oh0) * im->pw + ow;
    if (++ow == x->out_w) ow = 0, ++oh;
  }
}

// pack_b's panels (`nr` columns wide: NR, or MR when the product is
// computed transposed) for a gathered B, from the phased copy: the im2col
// columns are made here, a KC x NC block at a time, never stored whole. A
// panel on one output row copies nr contiguous floats per tap, one that
// crosses rows one run per row; columns past nc are zero.
#if MR > NR
#error "gathered panels of MR columns rely on the NR floats of slack"
#endif
static inline __attribute__((always_inline)) void pack_b_gather(const float* restrict image,
                                                                const ptrdiff_t* restrict taps, ptrdiff_t kc,
                                                                ptrdiff_t nc, const ptrdiff_t* restrict cols,
                                                                float* restrict dst, int nr) {
  for (ptrdiff_t j0 = 0; j0 < nc; j0 += nr, dst += nr * kc) {
    const ptrdiff_t* col = cols + j0;
    const int width = (int)MIN(nr, nc - j0);
    if (width == nr && col[nr - 1] - col[0] == nr - 1) {
      for (ptrdiff_t p = 0; p < kc; ++p) memcpy(dst + p * nr, image + taps[p] + col[0], (size_t)nr * sizeof(float));
    } else if (width == nr) {
      // Each run of columns on one output row is copied nr wide: the copy's
      // tail lands where a later run or the next tap's row goes, and is
      // overwritten there (dst and the image have NR floats of slack).
      int starts[NR], runs = 0;
      for (int q = 0; q < nr; ++q)
        if (q == 0 || col[q] != col[q - 1] + 1) starts[runs++] = q;
      for (ptrdiff_t p = 0; p < kc; ++p) {
        const float* src = image + taps[p];
        for (int r = 0; r < runs; ++r)
          memcpy(dst + p * nr + starts[r], src + col[starts[r]], (size_t)nr * sizeof(float));
      }
    } else {
      for (ptrdiff_t p = 0; p < kc; ++p) {
        const float* src = image + taps[p];
        for (int q = 0; q < nr; ++q) dst[p * nr + q] = q < width ? src[col[q]] : 0.0f;
      }
    }
  }
}

#if (VW == 16 || VW == 8) && !defined(__clang__)
typedef int vi __attribute__((vector_size(VW * 4)));
// Transposes a VW x VW block held as VW rows, in place: rounds that each
// swap the off-diagonal h x h blocks of every 2h x 2h block (h = VW / 2, ...,
// 2, 1), two two-register shuffles per pair of rows.
#if VW == 16
#define TRANSPOSE_ROUNDS 4
static const vi transpose_lo[4] = {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                                   {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                                   {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                                   {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}};
static const vi transpose_hi[4] = {{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                                   {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                                   {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                                   {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}};
#else
#define TRANSPOSE_ROUNDS 3
static const vi transpose_lo[3] = {{0, 1, 2, 3, 8, 9, 10, 11}, {0, 1, 8, 9, 4, 5, 12, 13}, {0, 8, 2, 10, 4, 12, 6, 14}};
static const vi transpose_hi[3] = {{4, 5, 6, 7, 12, 13, 14, 15}, {2, 3, 10, 11, 6, 7, 14, 15}, {1, 9, 3, 11, 5, 13, 7, 15}};
#endif
static inline __attribute__((always_inline)) void transpose_vw(vf r[VW]) {
#pragma GCC unroll 4
  for (int s = 0, h = VW / 2; s < TRANSPOSE_ROUNDS; ++s, h /= 2)
#pragma GCC unroll 16
    for (int i = 0; i < VW; ++i)
      if (!(i & h)) {
        const vf a = r[i], b = r[i + h];
        r[i] = __builtin_shuffle(a, b, transpose_lo[s]);
        r[i + h] = __builtin_shuffle(a, b, transpose_hi[s]);
      }
}
// dst's rows t (dst_stride apart) = src's columns t, for the VW x VW block
// at src (rows src_stride apart).
static inline __attribute__((always_inline)) void transpose_block(const float* restrict src, ptrdiff_t src_stride,
                                                                  float* restrict dst, ptrdiff_t dst_stride) {
  vf r[VW];
#pragma GCC unroll 16
  for (int i = 0; i < VW; ++i) r[i] = *(const vfu*)(src + i * src_stride);
  transpose_vw(r);
#pragma GCC unroll 16
  for (int t = 0; t < VW; ++t) *(vfu*)(dst + t * dst_stride) = r[t];
}
#define FAST_TRANSPOSE 1
#else
#define FAST_TRANSPOSE 0
#endif
