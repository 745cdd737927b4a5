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
// The micro-kernel uses GCC vector extensions rather than intrinsics so the
// same text builds on any x86-64 or ARM compiler; only the tile shape depends
// on the instruction set (it must fit the register file). Sizes are run-time
// values: only the packing loops see them, and they are a small part of the
// work next to the micro-kernel, whose loops do not depend on them.
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

// Applies the fused epilogue to C[m0:m1, n0:n1] of one batch once its sums
// are complete: called per MC x NC block, which is still in L2, so each row's
// loop is long and reads the epilogue's full-size inputs (a residual) along
// a row, which the hardware prefetches. Called per micro-tile instead, the
// tile's short rows each paid the loop's set-up and a cache miss on the
// residual: a residual epilogue then took 1.5-2.4x the GEMM's own time
// instead of 1.3x (m=256, n=3136, k=64, one thread).
static void finish_block(const struct tl_gemm* g, float* restrict c, ptrdiff_t batch, ptrdiff_t m0, ptrdiff_t m1,
                         ptrdiff_t n0, ptrdiff_t n1, void** args) {
  if (g->finish) g->finish(c, batch, m0, m1, n0, n1, args);
}

// acc[i][j] += a[i] * b[j] over kc steps (B's rows `ldb` apart: NR in a
// packed panel, B's own row stride when read in place), then writes (or adds, when
// `accumulate`) the tile to c. A's steps are `lda` apart (MR in a packed
// panel); B's step p starts at bp + boff[p] when boff is given (a gathered
// B read in place from its phased image). `mr` and `nv` are literals at every call so each
// copy is specialised: the short and narrow copies serve edge tiles of at most
// MR/2 rows or VW columns (m=49, N=16 layers) without the work of a full one.
// A panels keep their MR stride whatever mr is.
static inline __attribute__((always_inline)) void micro_tile(int mr, int nv, ptrdiff_t kc, const float* restrict ap,
                                                             ptrdiff_t lda, const float* restrict bp, ptrdiff_t ldb,
                                                             float* restrict c, ptrdiff_t ldc, int accumulate,
                                                             int rows, int cols, int weights_in_b,
                                                             const ptrdiff_t* restrict boff) {
  vf acc[MR][NV];
#pragma GCC unroll 64
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = (vf){0};

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

  if (rows == mr && cols == nv * VW) {
#pragma GCC unroll 64
    for (int i = 0; i < mr; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < nv; ++j) {
        vfu* dst = (vfu*)(c + i * ldc + j * VW);
        *dst = accumulate ? *dst + acc[i][j] : acc[i][j];
      }
    return;
  }
  // Edge tile: the padding rows/columns were computed from zeros; only the
  // valid part is written.
  float tile[MR][NR] __attribute__((aligned(64)));
  // Already true; stated so the compiler sees the copy stays inside `tile`.
  if (rows > mr) rows = mr;
  if (cols > NR) cols = NR;
#pragma GCC unroll 64
  for (int i = 0; i < mr; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < nv; ++j) *(vf*)&tile[i][j * VW] = acc[i][j];
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i][j] : tile[i][j];
}

// One tile of C, with the micro-kernel's copy that fits it: the short and
// narrow copies serve edge tiles of at most MR/2 rows or VW columns.
static inline __attribute__((always_inline)) void tile(ptrdiff_t kc, const float* restrict ap, ptrdiff_t lda,
                                                       const float* restrict bp, ptrdiff_t ldb, float* restrict c,
                                                       ptrdiff_t ldc, int accumulate, int rows, int cols,
                                                       int weights_in_b, const ptrdiff_t* restrict boff) {
  const int narrow = NV > 1 && cols <= VW, short_tile = MR >= 4 && rows <= MR / 2;
  if (narrow && short_tile)
    micro_tile(MR / 2, 1, kc, ap, lda, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff);
  else if (narrow)
    micro_tile(MR, 1, kc, ap, lda, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff);
  else if (short_tile)
    micro_tile(MR / 2, NV, kc, ap, lda, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff);
  else
    micro_tile(MR, NV, kc, ap, lda, bp, ldb, c, ldc, accumulate, rows, cols, weights_in_b, boff);
}

// A tile whose B side holds the weights, in NR-column panels: the
// transposed product's and Winograd's, one copy for both. Their panels are
// zero-padded to NR columns, so a narrow edge runs the full-width copy.
static ONE_COPY void tile_weights_in_b(ptrdiff_t kc, const float* restrict ap, ptrdiff_t lda,
                                       const float* restrict bp, float* restrict c, ptrdiff_t ldc, int accumulate,
                                       int rows, int cols) {
  if (MR >= 4 && rows <= MR / 2)
    micro_tile(MR / 2, NV, kc, ap, lda, bp, NR, c, ldc, accumulate, rows, cols, 1, NULL);
  else
    micro_tile(MR, NV, kc, ap, lda, bp, NR, c, ldc, accumulate, rows, cols, 1, NULL);
}

// Rows [m0, m0+mc) x k [k0, k0+kc) of A into `mr`-row panels (MR, or NR
// when the product is computed transposed), k-major inside a panel, zero
// rows past mc.
static inline __attribute__((always_inline)) void pack_a(const struct tl_gemm* g, const float* restrict a,
                                                         ptrdiff_t m0, ptrdiff_t mc, ptrdiff_t k0, ptrdiff_t kc,
                                                         float* restrict dst, int mr) {
  for (ptrdiff_t i0 = 0; i0 < mc; i0 += mr) {
    const ptrdiff_t rows = MIN(mr, mc - i0);
    const float* src = a + (m0 + i0) * SA1 + k0 * SA2;
    if (rows == mr) {
      for (ptrdiff_t p = 0; p < kc; ++p)
#pragma GCC unroll 64
        for (int i = 0; i < mr; ++i) dst[p * mr + i] = src[i * SA1 + p * SA2];
    } else {
      for (ptrdiff_t p = 0; p < kc; ++p)
        for (int i = 0; i < mr; ++i) dst[p * mr + i] = i < rows ? src[i * SA1 + p * SA2] : 0.0f;
    }
    dst += mr * kc;
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
static int phase_read(ptrdiff_t n, ptrdiff_t d, ptrdiff_t s, ptrdiff_t phase) {
  for (ptrdiff_t k = 0; k < n; ++k)
    if (k * d % s == phase) return 1;
  return 0;
}

// The phased copy of `image` (one batch item) for output rows [oh0, oh1), or
// data = NULL when it would be too large or memory is short (the caller then
// takes the slow path). Phases that no tap reads are left unwritten: a 1x1
// window at stride 2 (a ResNet downsampling) reads one phase of four.
static struct phased phase_image(const struct tl_gather* x, const float* restrict image, ptrdiff_t oh0,
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
  out.data = aligned_alloc(64, ROUND_UP((size_t)(floats + NR) * sizeof(float), 64));
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
static void phased_taps(const struct tl_gather* x, const struct phased* im, ptrdiff_t k0, ptrdiff_t kc,
                        ptrdiff_t* restrict taps) {
  const ptrdiff_t per_tap = x->kh * x->kw, sh = x->sh, sw = x->sw;
  for (ptrdiff_t p = 0; p < kc; ++p) {
    const ptrdiff_t k = k0 + p, c = k / per_tap, dy = k % per_tap / x->kw * x->dh, dx = k % x->kw * x->dw;
    taps[p] = ((c * sh + dy % sh) * sw + dx % sw) * im->ph * im->pw + dy / sh * im->pw + dx / sw;
  }
}

// Where output column n0 + q starts in any phase: (oh - oh0)*pw + ow.
static void phased_columns(const struct tl_gather* x, const struct phased* im, ptrdiff_t n0, ptrdiff_t nc,
                           ptrdiff_t* restrict cols) {
  for (ptrdiff_t q = 0; q < nc; ++q) cols[q] = ((n0 + q) / x->out_w - im->oh0) * im->pw + (n0 + q) % x->out_w;
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

#if VW == 16 && !defined(__clang__)
typedef int vi __attribute__((vector_size(64)));
// Transposes a 16 x 16 block held as 16 rows, in place: four rounds that
// each swap the off-diagonal h x h blocks of every 2h x 2h block (h = 8, 4,
// 2, 1), two two-register shuffles per pair of rows.
static inline __attribute__((always_inline)) void transpose16(vf r[16]) {
  static const vi lo[4] = {{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                           {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                           {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                           {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30}};
  static const vi hi[4] = {{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                           {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                           {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                           {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31}};
#pragma GCC unroll 4
  for (int s = 0, h = 8; s < 4; ++s, h /= 2)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (!(i & h)) {
        const vf a = r[i], b = r[i + h];
        r[i] = __builtin_shuffle(a, b, lo[s]);
        r[i + h] = __builtin_shuffle(a, b, hi[s]);
      }
}
// dst's rows t (dst_stride apart) = src's columns t, for the 16 x 16 block
// at src (rows src_stride apart).
static inline __attribute__((always_inline)) void transpose_block16(const float* restrict src,
                                                                   ptrdiff_t src_stride, float* restrict dst,
                                                                   ptrdiff_t dst_stride) {
  vf r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = *(const vfu*)(src + i * src_stride);
  transpose16(r);
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) *(vfu*)(dst + t * dst_stride) = r[t];
}
#define FAST_TRANSPOSE 1
#else
#define FAST_TRANSPOSE 0
#endif

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
      // columns): read along k, the contiguous direction, 16 x 16 blocks at
      // a time turned in registers, then the rest one element at a time.
      ptrdiff_t p0 = 0;
#if FAST_TRANSPOSE
      if (SB1 == 1)
        for (; p0 + 16 <= kc; p0 += 16)
          for (int j0 = 0; j0 < NR; j0 += 16) transpose_block16(src + j0 * SB2 + p0, SB2, dst + p0 * NR + j0, NR);
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

// Without packing buffers there is still a (slow) answer.
static void naive_block(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* restrict b,
                        ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1) {
  for (ptrdiff_t i = m0; i < m1; ++i)
    for (ptrdiff_t j = n0; j < n1; ++j) {
      float s = 0.0f;
      for (ptrdiff_t p = 0; p < G_K; ++p)
        s += a[i * SA1 + p * SA2] * (GATHERED ? gathered_b(&g->gather, b, p, j) : b[p * SB1 + j * SB2]);
      c[i * G_N + j] = s;
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

// C[m0:m1, n0:n1] of batch `batch`; c, a, b already point at that batch.
// `packed` is all of A in pack_a's panels (see packed_a), or NULL.
// acc[p] += sum over j < kw of w[j] * src[j][p]: one window row's taps, each
// read from its own plane at its own offset. kw is a literal at each call, so
// the taps unroll and the loop over p vectorises with unit-stride loads.
static inline __attribute__((always_inline)) void window_taps(float* restrict acc, const float* const* src,
                                                              const float* restrict w, ptrdiff_t len, int kw) {
  for (ptrdiff_t p = 0; p < len; ++p) {
    float s = acc[p];
    for (int j = 0; j < kw; ++j) s += w[j] * src[j][p];
    acc[p] = s;
  }
}

// `nq` vectors of one output row (literal at each call): every vector sums all
// of its taps in a register, nq independent chains of multiply-adds, and is
// stored straight into C. at[q] is where vector q starts in the row.
static inline __attribute__((always_inline)) void row_vectors(int nq, const float* const* tap, const float* w,
                                                              int taps, ptrdiff_t from, const ptrdiff_t* at,
                                                              float* restrict out) {
  vf acc[4] = {{0}, {0}, {0}, {0}};
#pragma GCC unroll 25
  for (int t = 0; t < taps; ++t) {
    const float* src = tap[t] + from;
#pragma GCC unroll 4
    for (int q = 0; q < nq; ++q) acc[q] += *(const vfu*)(src + at[q]) * w[t];
  }
#pragma GCC unroll 4
  for (int q = 0; q < nq; ++q) *(vfu*)(out + at[q]) = acc[q];
}

// Most taps (kh * kw) the depthwise paths keep in arrays on the stack.
#define DEPTHWISE_TAPS_MAX 49

// Where window tap (row, col) (dilation applied) of output row oh0 starts in
// gather_thin_block's phases: its phase for the remainders by the stride,
// then the rows and columns it skips.
static inline const float* phase_tap(const struct tl_gather* x, const float* planes, ptrdiff_t phase,
                                     ptrdiff_t pitch, ptrdiff_t row, ptrdiff_t col) {
  return planes + ((row % x->sh) * x->sw + col % x->sw) * phase + (row / x->sh) * pitch + col / x->sw;
}

// gather_thin_block's outputs when its range is whole output rows at least a
// vector wide (56x56 and 112x112 maps): no accumulator array, no copy out.
// Output row r reads the phases from (r - oh0) * pitch on; a row's last
// vector ends at the row's end, overlapping the one before it.
static void whole_rows(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* planes,
                       ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t oh0, ptrdiff_t oh1, ptrdiff_t phase, ptrdiff_t pitch) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t kh = x->kh, kw = x->kw, ow_n = x->out_w;
  const int taps = (int)(kh * kw), vectors = (int)((ow_n + VW - 1) / VW);
  const float* tap[DEPTHWISE_TAPS_MAX];
  float w[DEPTHWISE_TAPS_MAX];
  for (ptrdiff_t ti = 0; ti < kh; ++ti)
    for (ptrdiff_t j = 0; j < kw; ++j) tap[ti * kw + j] = phase_tap(x, planes, phase, pitch, ti * x->dh, j * x->dw);
  for (ptrdiff_t i = m0; i < m1; ++i) {
    for (int t = 0; t < taps; ++t) w[t] = a[i * SA1 + t * SA2];
    for (ptrdiff_t r = oh0; r < oh1; ++r) {
      float* out = c + i * G_N + r * ow_n;
      const ptrdiff_t from = (r - oh0) * pitch;
      for (int v0 = 0; v0 < vectors; v0 += 4) {
        ptrdiff_t at[4];
        for (int q = 0; q < 4; ++q) at[q] = MIN((ptrdiff_t)(v0 + q) * VW, ow_n - VW);
        const int nq = MIN(4, vectors - v0);
        // 3x3 and 5x5 windows get copies with their taps unrolled.
        if (nq == 4 && taps == 9) row_vectors(4, tap, w, 9, from, at, out);
        else if (nq == 4 && taps == 25) row_vectors(4, tap, w, 25, from, at, out);
        else if (nq == 4) row_vectors(4, tap, w, taps, from, at, out);
        else if (nq == 3) row_vectors(3, tap, w, taps, from, at, out);
        else if (nq == 2 && taps == 9) row_vectors(2, tap, w, 9, from, at, out);
        else if (nq == 2 && taps == 25) row_vectors(2, tap, w, 25, from, at, out);
        else if (nq == 2) row_vectors(2, tap, w, taps, from, at, out);
        else row_vectors(1, tap, w, taps, from, at, out);
      }
    }
  }
}

// Widest window row, and largest padded image (floats), gather_thin_block takes.
#define GATHER_KW_MAX 16
#define GATHER_PLANE_MAX (1 << 22)

// gather_thin_block's buffers, kept across the batches (channels) of one
// call: the phases' zero borders then stay as they are between channels of
// the same output rows.
struct gather_work {
  float* buf;
  size_t floats;
  ptrdiff_t oh0, oh1;  // the rows the phases were laid out for
};

// A few rows of C over a gathered B of one channel: a depthwise convolution
// is a batch of one-row products, one per channel, each gathering from its
// own plane. Packing B would build the im2col block only to use it once.
// Instead the zero-padded image is copied once, split by stride into phases:
// phase (a, b) holds padded rows a, a + sh, ... and columns b, b + sw, ...
// Tap (i, j) then reads phase ((i*dh) % sh, (j*dw) % sw) from row
// (i*dh) / sh and column (j*dw) / sw on, with unit stride and no bounds
// test. Outputs are computed at the phases' pitch, every row in one loop
// (the few columns past the output width are computed and dropped), so a
// 7x7 map is one 77-long loop, not seven 7-wide ones. Taps are added in k
// order. Returns 0 for gathers over several channels, or when the phases
// would be too large: the packed path runs instead.
static int gather_thin_block(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                             const float* restrict image, ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1,
                             struct gather_work* wk) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t kh = x->kh, kw = x->kw, sh = x->sh, sw = x->sw, dh = x->dh, dw = x->dw;
  const ptrdiff_t ow_n = x->out_w, oh0 = n0 / ow_n, oh1 = (n1 - 1) / ow_n + 1;
  // The padded rows (from oh0 * sh on) and columns that outputs oh0..oh1 read.
  const ptrdiff_t ph = (oh1 - 1 - oh0) * sh + (kh - 1) * dh + 1, pw = (ow_n - 1) * sw + (kw - 1) * dw + 1;
  // A phase's pitch and rows; one row more for the dropped columns' reads.
  const ptrdiff_t pitch = (pw + sw - 1) / sw, prows = (ph + sh - 1) / sh + 1;
  const ptrdiff_t phase = prows * pitch, len = (oh1 - oh0) * pitch;
  if (x->channels != 1 || kw > GATHER_KW_MAX || sh * sw * phase > GATHER_PLANE_MAX) return 0;
  const size_t floats = (size_t)(sh * sw * phase + len);
  if (wk->floats < floats) {
    free(wk->buf);
    wk->buf = calloc(floats, sizeof(float));
    wk->floats = wk->buf ? floats : 0;
    wk->oh0 = oh0, wk->oh1 = oh1;
    if (!wk->buf) return 0;
  } else if (wk->oh0 != oh0 || wk->oh1 != oh1) {
    memset(wk->buf, 0, floats * sizeof(float));
    wk->oh0 = oh0, wk->oh1 = oh1;
  }
  float* planes = wk->buf;
  float* acc = planes + sh * sw * phase;
  for (ptrdiff_t r = 0; r < ph; ++r) {
    const ptrdiff_t y = oh0 * sh + r - x->pt;
    if (y < 0 || y >= x->height) continue;
    const float* src = image + y * x->width;
    for (ptrdiff_t b = 0; b < sw; ++b) {
      float* dst = planes + ((r % sh) * sw + b) * phase + (r / sh) * pitch;
      // Window columns q*sw + b (below pw) that hold image column q*sw + off.
      const ptrdiff_t off = b - x->pl, end = MIN(pw - b, x->width - off);
      if (end <= 0) continue;
      const ptrdiff_t first = off < 0 ? (-off + sw - 1) / sw : 0, last = (end - 1) / sw + 1;
      if (sw == 1)
        memcpy(dst + first, src + first + off, (size_t)MAX(last - first, 0) * sizeof(float));
      else if (sw == 2)  // a literal stride: the loop vectorises
        for (ptrdiff_t q = first; q < last; ++q) dst[q] = src[q * 2 + off];
      else
        for (ptrdiff_t q = first; q < last; ++q) dst[q] = src[q * sw + off];
    }
  }
  if (n0 == oh0 * ow_n && n1 == oh1 * ow_n && ow_n >= VW && kh * kw <= DEPTHWISE_TAPS_MAX) {
    whole_rows(g, c, a, planes, m0, m1, oh0, oh1, phase, pitch);
    return 1;
  }
  const float* taps[GATHER_KW_MAX];
  float w[GATHER_KW_MAX];
  for (ptrdiff_t i = m0; i < m1; ++i) {
    const float* ai = a + i * SA1;
    for (ptrdiff_t p = 0; p < len; ++p) acc[p] = 0.0f;
    for (ptrdiff_t ti = 0; ti < kh; ++ti) {
      for (ptrdiff_t j = 0; j < kw; ++j) {
        taps[j] = phase_tap(x, planes, phase, pitch, ti * dh, j * dw);
        w[j] = ai[(ti * kw + j) * SA2];
      }
      if (kw == 3) window_taps(acc, taps, w, len, 3);
      else if (kw == 5) window_taps(acc, taps, w, len, 5);
      else
        for (ptrdiff_t p = 0; p < len; ++p)
          for (ptrdiff_t j = 0; j < kw; ++j) acc[p] += w[j] * taps[j][p];
    }
    // The outputs of [n0, n1): output row r's sit at (r - oh0) * pitch.
    for (ptrdiff_t r = oh0; r < oh1; ++r) {
      const ptrdiff_t from = r * ow_n > n0 ? r * ow_n : n0, to = MIN(n1, (r + 1) * ow_n);
      memcpy(c + i * G_N + from, acc + (r - oh0) * pitch + (from - r * ow_n), (size_t)(to - from) * sizeof(float));
    }
  }
  return 1;
}

// A depthwise convolution on a small map (7x7 to 16x16, or up to 32x32 when
// strided): gather_thin_block's work per channel is then mostly its set-up
// (7x7, 5x5 taps: 2.4x slower than this, one thread), so here the vectors run
// across VW channels instead. Each block of channels is copied into a
// zero-padded image with the channels innermost, every output is `taps`
// vector multiply-adds, and the outputs are copied back per channel. On a
// 56x56 map the per-channel planes are faster again.
#define BLOCKED_MAP_MAX 256
#define BLOCKED_STRIDED_MAP_MAX 1024
static int depthwise_blocked(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                             const float* restrict b, ptrdiff_t start, ptrdiff_t end, void** args) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t kh = x->kh, kw = x->kw, taps = kh * kw, ow_n = x->out_w;
  if (!GATHERED || x->channels != 1 || G_M != 1 || g->split != 0 || UNITS_PER_BATCH != 1 || G_K != taps ||
      G_N > (x->sh * x->sw > 1 ? BLOCKED_STRIDED_MAP_MAX : BLOCKED_MAP_MAX) || taps > DEPTHWISE_TAPS_MAX)
    return 0;
  const ptrdiff_t oh_n = G_N / ow_n;  // a plain B has no map: only now is out_w known to be set
  const ptrdiff_t ph = (oh_n - 1) * x->sh + (kh - 1) * x->dh + 1, pw = (ow_n - 1) * x->sw + (kw - 1) * x->dw + 1;
  const size_t img_floats = (size_t)(ph * pw) * VW, out_floats = (size_t)G_N * VW, w_floats = (size_t)taps * VW;
  float* buf = aligned_alloc(64, (img_floats + out_floats + w_floats) * sizeof(float));
  if (!buf) return 0;
  float* im = buf;
  float* out = im + img_floats;
  float* w = out + out_floats;
  ptrdiff_t off[DEPTHWISE_TAPS_MAX];
  for (ptrdiff_t i = 0; i < kh; ++i)
    for (ptrdiff_t j = 0; j < kw; ++j) off[i * kw + j] = (i * x->dh * pw + j * x->dw) * VW;
  for (ptrdiff_t c0 = start; c0 < end; c0 += VW) {
    const int lanes = (int)MIN(VW, end - c0);
    memset(im, 0, img_floats * sizeof(float));
    memset(w, 0, w_floats * sizeof(float));
    const float* src[VW];
    for (int l = 0; l < VW; ++l) src[l] = b + (c0 + MIN(l, lanes - 1)) * SB0;
    const ptrdiff_t q0 = MAX(0, x->pl), q1 = MIN(pw, x->width + x->pl);
    for (ptrdiff_t r = 0; r < ph; ++r) {
      const ptrdiff_t y = r - x->pt;
      if (y < 0 || y >= x->height) continue;
      for (ptrdiff_t q = q0; q < q1; ++q) {
        const ptrdiff_t at = y * x->width + q - x->pl;
        float* dst = im + (r * pw + q) * VW;
        for (int l = 0; l < VW; ++l) dst[l] = src[l][at];  // spare lanes repeat a channel; their weights are 0
      }
    }
    for (int l = 0; l < lanes; ++l)
      for (ptrdiff_t t = 0; t < taps; ++t) w[t * VW + l] = a[(c0 + l) * SA0 + t * SA2];
    // Four outputs of a row at a time: four independent chains of
    // multiply-adds instead of one that waits on each add.
    for (ptrdiff_t oh = 0; oh < oh_n; ++oh) {
      const float* row = im + oh * x->sh * pw * VW;
      float* o = out + oh * ow_n * VW;
      ptrdiff_t ow = 0;
      for (; ow + 4 <= ow_n; ow += 4) {
        const float* at = row + ow * x->sw * VW;
        const ptrdiff_t step = x->sw * VW;
        vf acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
        for (ptrdiff_t t = 0; t < taps; ++t) {
          const vf wt = *(const vf*)(w + t * VW);
          const float* p = at + off[t];
          acc0 += wt * *(const vf*)p;
          acc1 += wt * *(const vf*)(p + step);
          acc2 += wt * *(const vf*)(p + 2 * step);
          acc3 += wt * *(const vf*)(p + 3 * step);
        }
        *(vf*)(o + ow * VW) = acc0;
        *(vf*)(o + (ow + 1) * VW) = acc1;
        *(vf*)(o + (ow + 2) * VW) = acc2;
        *(vf*)(o + (ow + 3) * VW) = acc3;
      }
      for (; ow < ow_n; ++ow) {
        const float* at = row + ow * x->sw * VW;
        vf acc = {0};
        for (ptrdiff_t t = 0; t < taps; ++t) acc += *(const vf*)(w + t * VW) * *(const vf*)(at + off[t]);
        *(vf*)(o + ow * VW) = acc;
      }
    }
    for (int l = 0; l < lanes; ++l) {
      float* dst = c + (c0 + l) * G_N;
      for (ptrdiff_t n = 0; n < G_N; ++n) dst[n] = out[n * VW + l];
      finish_block(g, dst, c0 + l, 0, 1, 0, G_N, args);
    }
  }
  free(buf);
  return 1;
}

static ONE_COPY void gemm_block(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* restrict b,
                       ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t batch, const float* packed,
                       void** args, struct gather_work* wk) {
  if (m1 - m0 <= THIN_ROWS && (GATHERED ? gather_thin_block(g, c, a, b, m0, m1, n0, n1, wk)
                                        : thin_block(g, c, a, b, m0, m1, n0, n1))) {
    finish_block(g, c, batch, m0, m1, n0, n1, args);
    return;
  }
  const ptrdiff_t kcap = MIN(KC, G_K);
  const ptrdiff_t mcap = ROUND_UP(MIN(MC, m1 - m0), MR);
  const ptrdiff_t ncap = ROUND_UP(MIN(NC, n1 - n0), NR);
  const size_t abytes = ROUND_UP((size_t)(mcap * kcap) * sizeof(float), 64);
  // B read in place needs a buffer only for a ragged last sliver. With more
  // rows than one block of A, a packed B would serve every block: packing
  // is then cheaper than reading B's scattered rows again.
  // A gathered B in place: panels whose columns lie on one output row are
  // read from the phased image, one offset per tap; the others are packed.
  const int in_place = g->b_in_place && (GATHERED || SB2 == 1) && m1 - m0 <= MC;
  // NR floats of slack for pack_b_gather's runs.
  const size_t bbytes = ROUND_UP((size_t)((in_place ? NR : ncap) * kcap + NR) * sizeof(float), 64);
  float* abuf = packed ? NULL : aligned_alloc(64, abytes);
  float* bbuf = aligned_alloc(64, bbytes);
  // A gathered B: its phased image, and where each column and tap of a
  // block starts in it (columns first).
  // B read in place: where each of its rows starts (a plain B's are SB1
  // apart).
  struct phased image = {NULL, 0, 0, 0};
  ptrdiff_t* windows = NULL;
  if (GATHERED) image = phase_image(&g->gather, b, n0 / g->gather.out_w, (n1 - 1) / g->gather.out_w + 1);
  if (GATHERED || in_place) windows = malloc((size_t)(ncap + kcap) * sizeof(ptrdiff_t));
  if (windows && !GATHERED)
    for (ptrdiff_t p = 0; p < kcap; ++p) windows[ncap + p] = p * SB1;
  if ((!packed && !abuf) || !bbuf || ((GATHERED || in_place) && !windows) || (GATHERED && !image.data)) {
    free(abuf);
    free(bbuf);
    free(windows);
    free(image.data);
    naive_block(g, c, a, b, m0, m1, n0, n1);
    finish_block(g, c, batch, m0, m1, n0, n1, args);
    return;
  }
  for (ptrdiff_t jc = n0; jc < n1; jc += NC) {
    const ptrdiff_t nc = MIN(NC, n1 - jc);
    if (GATHERED) phased_columns(&g->gather, &image, jc, nc, windows);
    for (ptrdiff_t pc = 0; pc < G_K; pc += KC) {
      const ptrdiff_t kc = MIN(KC, G_K - pc);
      if (GATHERED) {
        phased_taps(&g->gather, &image, pc, kc, windows + ncap);
        if (!in_place) pack_b_gather(image.data, windows + ncap, kc, nc, windows, bbuf, NR);
      } else if (!in_place)
        pack_b(g, b, pc, kc, jc, nc, bbuf);
      for (ptrdiff_t ic = m0; ic < m1; ic += MC) {
        const ptrdiff_t mc = MIN(MC, m1 - ic);
        // ic is a multiple of MR, so the packed panels of these rows start
        // at row ic of block pc.
        const float* apanels = packed ? packed + ROUND_UP(G_M, MR) * pc + ic * kc : abuf;
        if (!packed) pack_a(g, a, ic, mc, pc, kc, abuf, MR);
        for (ptrdiff_t jr = 0; jr < nc; jr += NR) {
          const int cols = (int)MIN(NR, nc - jr);
          const float* bp = bbuf + jr * kc;
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
          for (ptrdiff_t ir = 0; ir < mc; ir += MR) {
            const int rows = (int)MIN(MR, mc - ir);
            float* ct = c + (ic + ir) * G_N + jc + jr;
            const float* ap = apanels + ir * kc;
            // A literal stride for packed panels keeps their addressing
            // constant; B in place is read through its rows' offsets.
            if (boff)
              tile(kc, ap, MR, bp, 0, ct, G_N, pc > 0, rows, cols, 0, boff);
            else
              tile(kc, ap, MR, bp, NR, ct, G_N, pc > 0, rows, cols, 0, NULL);
          }
        }
        if (pc + kc == G_K) finish_block(g, c, batch, ic, ic + mc, jc, jc + nc, args);
      }
    }
  }
  free(abuf);
  free(bbuf);
  free(windows);
  free(image.data);
}

// Columns [n0, n0+nc) x k [k0, k0+kc) of a plain B into MR-column panels
// (the transposed product's A side), k-major inside a panel, zero columns
// past nc.
static void pack_b_columns(const struct tl_gemm* g, const float* restrict b, ptrdiff_t k0, ptrdiff_t kc, ptrdiff_t n0,
                           ptrdiff_t nc, float* restrict dst) {
  for (ptrdiff_t j0 = 0; j0 < nc; j0 += MR, dst += MR * kc) {
    const int cols = (int)MIN(MR, nc - j0);
    const float* src = b + k0 * SB1 + (n0 + j0) * SB2;
    for (ptrdiff_t p = 0; p < kc; ++p)
      for (int j = 0; j < MR; ++j) dst[p * MR + j] = j < cols ? src[p * SB1 + j * SB2] : 0.0f;
  }
}

// dst[j][i] = src[i][j] for a rows x cols src (rows of dst `ld` apart), in
// 16 x 16 blocks turned in registers where the instruction set allows.
static void transpose_into(const float* restrict src, ptrdiff_t rows, ptrdiff_t cols, float* restrict dst,
                           ptrdiff_t ld) {
  ptrdiff_t i0 = 0;
#if FAST_TRANSPOSE
  for (; i0 + 16 <= rows; i0 += 16) {
    ptrdiff_t j0 = 0;
    for (; j0 + 16 <= cols; j0 += 16) transpose_block16(src + i0 * cols + j0, cols, dst + j0 * ld + i0, ld);
    for (ptrdiff_t j = j0; j < cols; ++j)
      for (ptrdiff_t i = i0; i < i0 + 16; ++i) dst[j * ld + i] = src[i * cols + j];
  }
#endif
  // The rest (all of it without fast transposes), a few rows at a time so
  // that reads and writes both stay within a few cache lines.
  for (; i0 < rows; i0 += 8) {
    const ptrdiff_t i1 = MIN(rows, i0 + 8);
    for (ptrdiff_t j = 0; j < cols; ++j)
      for (ptrdiff_t i = i0; i < i1; ++i) dst[j * ld + i] = src[i * cols + j];
  }
}

// C[m0:m1, n0:n1] computed as its transpose (struct tl_gemm's transposed),
// C^T = B^T A^T, whose micro-tile rows are C's columns: a 7x7 map's 49
// columns take 64 in NR = 32 wide tiles but 3 x 14 + 7 in MR = 14 rows. The
// products accumulate in a buffer laid out as C^T, which is turned into C
// at the end. `packed` is all of A in NR-row panels, or NULL. Returns 0
// when its buffers cannot be had (the caller then runs gemm_block).
static ONE_COPY int gemm_block_t(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                        const float* restrict b, ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1,
                        ptrdiff_t batch, const float* packed, void** args) {
  const ptrdiff_t kcap = MIN(KC, G_K), nn = n1 - n0, mm = m1 - m0, npad = ROUND_UP(nn, MR);
  // NR floats of slack for pack_b_gather's runs.
  float* bt = aligned_alloc(64, ROUND_UP((size_t)(npad * kcap + NR) * sizeof(float), 64));
  float* at = packed ? NULL : aligned_alloc(64, ROUND_UP((size_t)(NR * kcap) * sizeof(float), 64));
  float* ct = aligned_alloc(64, ROUND_UP((size_t)(nn * mm) * sizeof(float), 64));
  struct phased image = {NULL, 0, 0, 0};
  ptrdiff_t* windows = NULL;
  if (GATHERED) {
    image = phase_image(&g->gather, b, n0 / g->gather.out_w, (n1 - 1) / g->gather.out_w + 1);
    windows = malloc((size_t)(npad + kcap) * sizeof(ptrdiff_t));
  }
  if (!bt || (!packed && !at) || !ct || (GATHERED && (!windows || !image.data))) {
    free(bt), free(at), free(ct), free(windows), free(image.data);
    return 0;
  }
  if (GATHERED) phased_columns(&g->gather, &image, n0, nn, windows);
  for (ptrdiff_t pc = 0; pc < G_K; pc += KC) {
    const ptrdiff_t kc = MIN(KC, G_K - pc);
    if (GATHERED) {
      phased_taps(&g->gather, &image, pc, kc, windows + npad);
      pack_b_gather(image.data, windows + npad, kc, nn, windows, bt, MR);
    } else {
      pack_b_columns(g, b, pc, kc, n0, nn, bt);
    }
    for (ptrdiff_t jr = 0; jr < mm; jr += NR) {
      const int cols = (int)MIN(NR, mm - jr);
      // m0 is a multiple of NR here, so these rows' panel starts at row m0 + jr of block pc.
      const float* bp = packed ? packed + ROUND_UP(G_M, NR) * pc + (m0 + jr) * kc : at;
      if (!packed) pack_a(g, a, m0 + jr, cols, pc, kc, at, NR);
      for (ptrdiff_t ir = 0; ir < nn; ir += MR)
        tile_weights_in_b(kc, bt + ir * kc, MR, bp, ct + ir * mm + jr, mm, pc > 0, (int)MIN(MR, nn - ir), cols);
    }
  }
  transpose_into(ct, nn, mm, c + m0 * G_N + n0, G_N);
  finish_block(g, c, batch, m0, m1, n0, n1, args);
  free(bt), free(at), free(ct), free(windows), free(image.data);
  return 1;
}

{{WINOGRAD}}

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
// (14x14) take 196 against 224: 0.83-1.05x, left to the tuner.
static int use_transposed(const struct tl_gemm* g) {
  if (g->winograd || g->split != 0) return 0;
  if (g->transposed >= 0) return g->transposed;
  const ptrdiff_t rest = G_N % MR, by_rows = G_N - rest + (rest == 0 ? 0 : rest <= MR / 2 ? MR / 2 : MR);
  return G_N >= 2 * MR && G_N <= 512 && G_M >= 4 * NR && by_rows * 100 <= ROUND_UP(G_N, NR) * 85;
}

// All of A in pack_a's panels, KC block after KC block, filled by the first
// call that gets here (the others wait for it) and read by every later call;
// NULL when the kernel takes no packed copy. Header: state (0 empty, 1 being
// filled, 2 filled), then the MR and the KC it was packed for.
static const float* packed_a(const struct tl_gemm* g, const float* a, void** args) {
  if (g->packed_a < 0) return NULL;
  int* header = (int*)args[g->packed_a];
  float* panels = (float*)((char*)header + 64);
  int state = __atomic_load_n(&header[0], __ATOMIC_ACQUIRE);
  // Panels of NR rows for a transposed product; Winograd's weights (U, in
  // NR-column panels) are marked by a K block of -NR.
  const int transposed = use_transposed(g), rows = transposed ? NR : MR, block = g->winograd ? -NR : (int)KC;
  if (state == 0 && __atomic_compare_exchange_n(&header[0], &state, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    if (g->winograd)
      winograd_pack_u(g, a, panels);
    else
      pack_a_once(g, a, panels, rows);
    header[1] = rows;
    header[2] = block;
    header[3] = transposed;
    __atomic_store_n(&header[0], 2, __ATOMIC_RELEASE);
    return panels;
  }
  while (__atomic_load_n(&header[0], __ATOMIC_ACQUIRE) != 2) sched_yield();
  // A copy packed for another tile height, K block or orientation is not ours to read.
  return header[1] == rows && header[2] == block && header[3] == transposed ? panels : NULL;
}

void tinylens_gemm_f32(const struct tl_gemm* g, int start, int end, void** args) {
  float* c = (float*)args[0];
  const float* a = (const float*)args[1];
  const float* b = (const float*)args[2];
  if (depthwise_blocked(g, c, a, b, start, end, args)) return;
  const float* packed = packed_a(g, a, args);
  const int transposed = use_transposed(g);
  struct gather_work wk = {NULL, 0, 0, 0};
  ptrdiff_t u = start;
  while (u < end) {
    const ptrdiff_t batch = u / UNITS_PER_BATCH;
    const ptrdiff_t first = u % UNITS_PER_BATCH;
    const ptrdiff_t last = MIN(UNITS_PER_BATCH, first + (end - u));  // exclusive
    float* cb = c + batch * G_M * G_N;
    const float* ab = a + batch * SA0;
    const float* bb = b + batch * SB0;
    if (transposed) {
      // Rows snap to the transposed product's NR-row panels.
      const ptrdiff_t m0 = strip_edge(g, first, G_M, NR), m1 = strip_edge(g, last, G_M, NR);
      if (m0 < m1 && !gemm_block_t(g, cb, ab, bb, m0, m1, 0, G_N, batch, packed, args))
        gemm_block(g, cb, ab, bb, m0, m1, 0, G_N, batch, NULL, args, &wk);
    } else if (g->winograd) {
      // Units are rows of 2x2 tiles; without U or buffers, the direct
      // product computes the same output rows.
      const ptrdiff_t ow = g->gather.out_w, n0 = 2 * first * ow, n1 = MIN(G_N, 2 * last * ow);
      if (!packed || !winograd_rows(g, cb, bb, packed, batch, first, last, args))
        gemm_block(g, cb, ab, bb, 0, G_M, n0, n1, batch, NULL, args, &wk);
    } else if (g->split == 0) {
      const ptrdiff_t m0 = strip_edge(g, first, G_M, MR), m1 = strip_edge(g, last, G_M, MR);
      if (m0 < m1) gemm_block(g, cb, ab, bb, m0, m1, 0, G_N, batch, packed, args, &wk);
    } else {
      const ptrdiff_t n0 = strip_edge(g, first, G_N, NR), n1 = strip_edge(g, last, G_N, NR);
      if (n0 < n1) gemm_block(g, cb, ab, bb, 0, G_M, n0, n1, batch, packed, args, &wk);
    }
    u += last - first;
  }
  free(wk.buf);
}
