// The C device's GEMM library (kernels/gemm_cpu.c) as its kernels see it.
// The library is compiled once per machine and kept in the kernel cache; a
// GEMM kernel (kernels/gemm_cpu_call.c) only names its sizes and its fused
// epilogue and calls tinylens_gemm_f32, so a first run compiles the blocked
// GEMM once instead of once per shape.
#ifndef TINYLENS_GEMM_CPU_H
#define TINYLENS_GEMM_CPU_H
#include <stddef.h>

// Applied to C[m0:m1, n0:n1] of one batch (c points at that batch) once its
// sums are complete, while the block is still in cache.
typedef void (*tl_gemm_finish)(float* c, ptrdiff_t batch, ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1,
                               void** args);

// B of a convolution, gathered from its image x (channels x height x width
// per batch, row-major; sb[0] is the batch stride) instead of read from
// im2col columns: B[(c, i, j), (oh, ow)] = x[c, oh*sh + i*dh - pt,
// ow*sw + j*dw - pl], zero outside x. kh = 0: B is a plain strided matrix.
// max: C is not a product but each column's largest cell inside x (a max
// pool of one channel per batch; A is not read).
struct tl_gather {
  ptrdiff_t channels, height, width;
  ptrdiff_t kh, kw, sh, sw, dh, dw, pt, pl;
  ptrdiff_t out_w;  // n = oh * out_w + ow
  int max;
};

// C[b] = A[b] @ B[b]: C is contiguous (batch x m x n); A and B are read
// through their strides in elements. One unit of the launch's range is
// `unit` rows (split 0) or `unit` columns (split 1) of C of one batch.
struct tl_gemm {
  ptrdiff_t batch, m, n, k;
  ptrdiff_t sa[3];  // A: batch, m, k
  ptrdiff_t sb[3];  // B: batch, k, n
  int split;
  ptrdiff_t unit, units_per_batch;
  int packed_a;           // -1, or the argument that holds A packed (A is a weight)
  int packed_b;           // -1, or the argument that holds B packed (B is a weight shared by every batch)
  tl_gemm_finish finish;  // NULL: C is the plain product
  // Cache blocks, 0 = the library's default: at most `kc` of K per block
  // (K is cut into equal blocks), `mc_tiles` micro-tile rows of A and
  // `nc_tiles` micro-tile columns of B. The tuner (core/tune.h) tries others.
  ptrdiff_t kc;
  int mc_tiles, nc_tiles;
  // Nonzero: B's rows are contiguous and the micro-kernel reads them in
  // place rather than from packed panels (small K: packing would copy all of
  // B to read it once).
  int b_in_place;
  struct tl_gather gather;
  // Nonzero: a 3x3 window at stride 1 computed by Winograd's F(2x2, 3x3)
  // (1) or F(4x4, 3x3) (2) (kernels/gemm_cpu_winograd.c); units are then
  // rows of 2x2 (4x4) output tiles, and packed_a holds the transformed weights.
  int winograd;
  // 1: C is computed as C^T = B^T A^T (few columns, many rows: a 7x7 map's
  // 49 fit the micro-kernel's rows better than its columns), its rows or
  // its columns split; 0: as C; -1: the library decides by its tile shape
  // (split 0 only). packed_a then holds A in the other orientation's panels.
  int transposed;
  // The epilogue's most common form, which the direct product (the
  // library's blocked path) and Winograd's output transform apply in
  // registers instead of in a pass of `finish` over C:
  //   C = clamp(sum + bias[row], lo, hi), NaN kept,
  // where bias is the argument that holds one float per row of C (-1: none)
  // and lo, hi may be infinite. `finish` is the same epilogue, for the
  // library's other paths. fused = 0: `finish` alone.
  int fused, bias;
  float lo, hi;
  // batch_clamp = 1 (fused 0): `finish` is clamp(sum + bias[batch], lo, hi)
  // (a depthwise convolution's bias, one per channel, and its ReLU or
  // ReLU6), which the depthwise paths (depthwise_blocked, gather_thin's
  // whole rows) apply in registers instead.
  int batch_clamp;
  // kh > 0: C's planes (one per batch item and row of C, pool.height x
  // pool.width, the convolution's output) are max-pooled through this
  // window as they are computed, into planes of pool_h x pool.out_w, and
  // only those are stored (batch x m planes); a unit is then `unit` pooled
  // rows of one batch item. The fused epilogue is applied to the pooled
  // values, and there is no `finish`.
  struct tl_gather pool;
  ptrdiff_t pool_h;
};

void tinylens_gemm_f32(const struct tl_gemm* g, int start, int end, void** args);
#endif
