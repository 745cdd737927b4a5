// The second half of the C device's GEMM library (the first is
// kernels/gemm_cpu.c, which calls these by name): Winograd's F(2x2, 3x3)
// convolutions (kernels/gemm_cpu_winograd.c, pasted in), the depthwise
// convolutions (kernels/gemm_cpu_depthwise.c, pasted in) and the product
// computed as C^T. Compiled beside the first half on a first run (the halves
// take about the same time), and loaded before it into the global scope.
{{SHARED}}
// A tile whose B side holds the weights, in NR-column panels: the
// transposed product's and Winograd's, one copy for both. Their panels are
// zero-padded to NR columns, so a narrow edge runs the full-width copy.
static ONE_COPY void tile_weights_in_b(ptrdiff_t kc, const float* restrict ap, ptrdiff_t lda,
                                       const float* restrict bp, float* restrict c, ptrdiff_t ldc, int accumulate,
                                       int rows, int cols) {
  if (MR >= 4 && rows <= MR / 2)
    micro_tile(MR / 2, NV, kc, ap, lda, bp, NR, c, ldc, accumulate, rows, cols, 1, NULL, NULL, NULL);
  else
    micro_tile(MR, NV, kc, ap, lda, bp, NR, c, ldc, accumulate, rows, cols, 1, NULL, NULL, NULL);
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
// VW x VW blocks turned in registers where the instruction set allows.
static void transpose_into(const float* restrict src, ptrdiff_t rows, ptrdiff_t cols, float* restrict dst,
                           ptrdiff_t ld) {
  ptrdiff_t i0 = 0;
#if FAST_TRANSPOSE
  for (; i0 + VW <= rows; i0 += VW) {
    ptrdiff_t j0 = 0;
    for (; j0 + VW <= cols; j0 += VW) transpose_block(src + i0 * cols + j0, cols, dst + j0 * ld + i0, ld);
    for (ptrdiff_t j = j0; j < cols; ++j)
      for (ptrdiff_t i = i0; i < i0 + VW; ++i) dst[j * ld + i] = src[i * cols + j];
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
  float* bt = scratch_alloc((size_t)(npad * kcap + NR) * sizeof(float));
  float* at = packed ? NULL : scratch_alloc((size_t)(NR * kcap) * sizeof(float));
  float* ct = scratch_alloc((size_t)(nn * mm) * sizeof(float));
  struct phased image = {NULL, 0, 0, 0};
  ptrdiff_t* windows = NULL;
  if (GATHERED) {
    image = phase_image(&g->gather, b, n0 / g->gather.out_w, (n1 - 1) / g->gather.out_w + 1);
    windows = scratch_alloc((size_t)(npad + kcap) * sizeof(ptrdiff_t));
  }
  if (!bt || (!packed && !at) || !ct || (GATHERED && (!windows || !image.data))) {
    scratch_free(bt), scratch_free(at), scratch_free(ct), scratch_free(windows), scratch_free(image.data);
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
  scratch_free(bt), scratch_free(at), scratch_free(ct), scratch_free(windows), scratch_free(image.data);
  return 1;
}

{{WINOGRAD}}

{{DEPTHWISE}}

// What kernels/gemm_cpu.c calls.
int tinylens_gemm_transposed(const struct tl_gemm* g, float* c, const float* a, const float* b, ptrdiff_t m0,
                             ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t batch, const float* packed,
                             void** args) {
  return gemm_block_t(g, c, a, b, m0, m1, n0, n1, batch, packed, args);
}
int tinylens_gemm_winograd(const struct tl_gemm* g, float* c, const float* image, const float* u, ptrdiff_t batch,
                           ptrdiff_t ty0, ptrdiff_t ty1, void** args) {
  return winograd_rows(g, c, image, u, batch, ty0, ty1, args);
}
void tinylens_gemm_winograd_weights(const struct tl_gemm* g, const float* a, float* u) {
  if (g->winograd == 2)
    winograd4_pack_u(g, a, u);
  else
    winograd_pack_u(g, a, u);
}
int tinylens_gemm_gather_thin(const struct tl_gemm* g, float* c, const float* a, const float* image, ptrdiff_t m0,
                              ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1, struct gather_work* wk) {
  return gather_thin_block(g, c, a, image, m0, m1, n0, n1, wk);
}
int tinylens_gemm_depthwise_blocked(const struct tl_gemm* g, float* c, const float* a, const float* b, ptrdiff_t start,
                                    ptrdiff_t end, void** args) {
#if FAST_TRANSPOSE
  if (g->gather.channels > 1) return grouped_blocked(g, c, a, b, start, end, args);
#endif
  return depthwise_blocked(g, c, a, b, start, end, args);
}

// The library's entry point, named like the library (the device loads a
// library through its entry); it does nothing.
void tinylens_gemm_extras(int start, int end, void** args) { (void)start, (void)end, (void)args; }
