// Winograd's F(2x2, 3x3) for a GEMM whose B is gathered from an image by a
// 3x3 window at stride 1 (struct tl_gemm's winograd; part of the library's
// second half, kernels/gemm_cpu_extras.c, which it is pasted into). Each
// 2x2 block ("tile") of output pixels comes from a 4x4 patch d of the image
// and each weight g from
//   Y = At [ (G g Gt) . (Bt d B) ] A
// with the usual constant matrices (entries 0, +-1, 1/2): 16 products per
// tile and channel pair instead of 36, so the GEMM does 2.25x fewer
// multiply-adds, for a few additions before and after it. Rounding stays
// within a few units of float32's at these sizes (tests/test_conv_renderings.cpp).
//
// The work is 16 GEMMs, one per position t of the 4x4 transform:
//   M_t (tiles x Cout) = V_t (tiles x Cin) @ U_t (Cin x Cout)
// with tiles as rows, so the micro-kernel's MR = 14 rows divide the tile
// rows of 56x56, 28x28 and 14x14 maps. U = G g Gt is computed once per
// weight into the packed-A buffer, in pack_b's NR-column panels. A thread
// takes whole rows of tiles; it transforms a chunk of them into V (tile
// index fastest, so the micro-kernel reads V in place with A's stride
// `lda`), runs the 16 products into M, transforms M back into C and
// applies the fused epilogue to the chunk's output rows while they are in
// cache.

// F(4x4, 3x3) (tl_gemm.winograd = 2, a rendering the tuner may pick) takes
// 6x6 patches to 4x4 tiles through the same steps: 36 GEMMs, 0.56x the
// multiply-adds of F(2x2, 3x3), larger constants in its transforms (up to
// 8 and 1/24) and about 10x its rounding. Its transforms mix every column
// of a patch into every output, so a value that is not finite would reach
// outputs whose windows lack it: a call that meets one computes its rows
// by the direct product instead.

// Floats of V and M per chunk: small enough to stay in L2 (256 KiB, a part
// of it beside the image, C and U), unless U is large. Each chunk reads all
// of U, so a chunk then takes twice U's size (up to 16 MiB), and only one V_t
// and one panel of U_t stay in L2. With 768 KiB chunks SqueezeNet's 55x55
// Winograd kernels took 500-560 us in profiled runs against 195-220 with
// these (alternating builds, medians of 40 profiled runs); unprofiled runs
// and ResNet-50's Winograd kernels did not change.
#define WINO_CHUNK_FLOATS (64 * 1024)
#define WINO_CHUNK_FLOATS_MAX (4 * 1024 * 1024)
#if NR > 64
#error "the renderer sizes Winograd's packed weights for NR <= 64"
#endif

// U_t = (G g Gt)[t] of every weight (cout, cin), at
// u[t][cout / NR][cin][cout % NR], zero columns past Cout.
static void winograd_pack_u(const struct tl_gemm* g, const float* restrict a, float* restrict u) {
  const ptrdiff_t cin = g->gather.channels, cout = G_M, coutp = ROUND_UP(cout, NR);
  memset(u, 0, (size_t)(16 * cin * coutp) * sizeof(float));
  for (ptrdiff_t o = 0; o < cout; ++o)
    for (ptrdiff_t ci = 0; ci < cin; ++ci) {
      float w[9], gw[4][3];
      for (int q = 0; q < 9; ++q) w[q] = a[o * SA1 + (ci * 9 + q) * SA2];
      for (int j = 0; j < 3; ++j) {  // G g
        gw[0][j] = w[j];
        gw[1][j] = 0.5f * (w[j] + w[3 + j] + w[6 + j]);
        gw[2][j] = 0.5f * (w[j] - w[3 + j] + w[6 + j]);
        gw[3][j] = w[6 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) Gt
        const float row[4] = {gw[i][0], 0.5f * (gw[i][0] + gw[i][1] + gw[i][2]),
                              0.5f * (gw[i][0] - gw[i][1] + gw[i][2]), gw[i][2]};
        for (int j = 0; j < 4; ++j) u[((i * 4 + j) * coutp + o / NR * NR) * cin + ci * NR + o % NR] = row[j];
      }
    }
}

// Image rows y0 .. y0 + n - 1 of `plane` into `rows` (n x pw floats), from
// the window's first padded column on, zero outside the image.
static void padded_rows(const struct tl_gather* x, const float* restrict plane, ptrdiff_t y0, int n, ptrdiff_t pw,
                        float* restrict rows) {
  const ptrdiff_t h = x->height, w = x->width, x0 = -x->pl;
  // Padded columns [lo, hi) hold image columns x0 + lo ...; the rest are zero.
  const ptrdiff_t lo = MIN(pw, MAX(0, -x0)), hi = MAX(lo, MIN(pw, w - x0));
  for (int r = 0; r < n; ++r) {
    float* dst = rows + r * pw;
    const ptrdiff_t y = y0 + r;
    if (y < 0 || y >= h) {
      memset(dst, 0, (size_t)pw * sizeof(float));
      continue;
    }
    memset(dst, 0, (size_t)lo * sizeof(float));
    memcpy(dst + lo, plane + y * w + x0 + lo, (size_t)(hi - lo) * sizeof(float));
    memset(dst + hi, 0, (size_t)(pw - hi) * sizeof(float));
  }
}

// Bt d B of every tile of tile row `ty` for channel plane `plane`, into
// v[t * vt + q0 + tx]: the tile row's four image rows are copied zero-padded
// into `rows` (4 x pw floats), combined down the columns (Bt d), then along
// the rows (d B), one vectorisable loop over the tiles per t.
static void winograd_input_row(const struct tl_gather* x, const float* restrict plane, ptrdiff_t ty, ptrdiff_t tw,
                               ptrdiff_t pw, float* restrict rows, float* restrict v, ptrdiff_t vt) {
  padded_rows(x, plane, 2 * ty - x->pt, 4, pw, rows);
  float* restrict r0 = rows;
  float* restrict r1 = rows + pw;
  float* restrict r2 = rows + 2 * pw;
  float* restrict r3 = rows + 3 * pw;
  for (ptrdiff_t p = 0; p < pw; ++p) {  // Bt d, in place
    const float a0 = r0[p], a1 = r1[p], a2 = r2[p], a3 = r3[p];
    r0[p] = a0 - a2, r1[p] = a1 + a2, r2[p] = a2 - a1, r3[p] = a1 - a3;
  }
  for (int i = 0; i < 4; ++i) {  // (Bt d) B
    const float* restrict t = rows + i * pw;
    float* restrict v0 = v + (4 * i) * vt;
    float* restrict v1 = v0 + vt;
    float* restrict v2 = v1 + vt;
    float* restrict v3 = v2 + vt;
    for (ptrdiff_t q = 0; q < tw; ++q) {
      const float e = t[2 * q], o = t[2 * q + 1], e2 = t[2 * q + 2], o2 = t[2 * q + 3];
      v0[q] = e - e2, v1[q] = o + e2, v2[q] = e2 - o, v3[q] = o - o2;
    }
  }
}

// At m A of tile q's VW output channels from c0: its 2x2 outputs, y[0] y[1]
// on the upper row, y[2] y[3] on the lower.
static inline __attribute__((always_inline)) void winograd_tile_out(const float* restrict m, ptrdiff_t mt,
                                                                    ptrdiff_t at, vf y[4]) {
  vf s[16];
#pragma GCC unroll 16
  for (int t = 0; t < 16; ++t) s[t] = *(const vf*)(m + t * mt + at);
  vf r0[4], r1[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) r0[j] = s[j] + s[4 + j] + s[8 + j], r1[j] = s[4 + j] - s[8 + j] - s[12 + j];
  y[0] = r0[0] + r0[1] + r0[2], y[1] = r0[1] - r0[2] - r0[3];
  y[2] = r1[0] + r1[1] + r1[2], y[3] = r1[1] - r1[2] - r1[3];
}

// The fused epilogue (tl_gemm.fused) on tile outputs y of output channels
// [c0, c0 + VW) (lanes past the last channel take no bias).
static inline __attribute__((always_inline)) void winograd_fused(const struct tl_gemm* g, void** args, ptrdiff_t c0,
                                                                 vf* y, int n) {
  if (!g->fused) return;
  vf bias = {0};
  if (g->bias >= 0) {
    const float* b = (const float*)args[g->bias] + c0;
    if (c0 + VW <= G_M)
      bias = *(const vfu*)b;
    else
      for (int l = 0; l < G_M - c0; ++l) bias[l] = b[l];
  }
  const vf lo = (vf){0} + g->lo, hi = (vf){0} + g->hi;
#pragma GCC unroll 16
  for (int k = 0; k < n; ++k) y[k] = clamp_v(y[k] + bias, lo, hi);
}

#if FAST_TRANSPOSE && VW == 16
#include <immintrin.h>
#endif

// F(4x4, 3x3) (tl_gemm.winograd = 2): 6x6 patches give 4x4 output tiles,
// 36 products per tile and channel pair for 16 outputs where F(2x2, 3x3)
// takes 64, with the points 0, +-1, +-2 (constants up to 8 and 1/24), so
// rounding grows a few times more. The same steps as F(2x2, 3x3)'s, with
// G (6x3), Bt (6x6) and At (4x6):
static const float wino4_g[6][3] = {{0.25f, 0, 0},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0, 0, 1}};

// U_t = (G g Gt)[t] of every weight, laid out as winograd_pack_u's (36 t).
static void winograd4_pack_u(const struct tl_gemm* g, const float* restrict a, float* restrict u) {
  const ptrdiff_t cin = g->gather.channels, cout = G_M, coutp = ROUND_UP(cout, NR);
  memset(u, 0, (size_t)(36 * cin * coutp) * sizeof(float));
  for (ptrdiff_t o = 0; o < cout; ++o)
    for (ptrdiff_t ci = 0; ci < cin; ++ci) {
      double w[3][3], gw[6][3];
      for (int q = 0; q < 9; ++q) w[q / 3][q % 3] = a[o * SA1 + (ci * 9 + q) * SA2];
      for (int i = 0; i < 6; ++i)  // G g
        for (int j = 0; j < 3; ++j) gw[i][j] = wino4_g[i][0] * w[0][j] + wino4_g[i][1] * w[1][j] + wino4_g[i][2] * w[2][j];
      for (int i = 0; i < 6; ++i)  // (G g) Gt
        for (int j = 0; j < 6; ++j)
          u[((i * 6 + j) * coutp + o / NR * NR) * cin + ci * NR + o % NR] =
              (float)(gw[i][0] * wino4_g[j][0] + gw[i][1] * wino4_g[j][1] + gw[i][2] * wino4_g[j][2]);
    }
}

#if FAST_TRANSPOSE && VW == 16
// Columns 4 q + k (k = 0..5) of 16 tiles q from t: o[k] along the tiles.
// Reads t[0 .. 67].
static inline __attribute__((always_inline)) void wino4_columns(const float* restrict t, vf o[6]) {
  static const vi even = {0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29};
  static const vi odd = {2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31};
  static const vi lo = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
  static const vi hi = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
#pragma GCC unroll 2
  for (int s = 0; s < 2; ++s) {  // s = 1: columns 4 and 5 are columns 0 and 1 of the next tile
    const float* p = t + 4 * s;
    const vf a = *(const vfu*)p, b = *(const vfu*)(p + 16), c = *(const vfu*)(p + 32), d = *(const vfu*)(p + 48);
    const vf ab = __builtin_shuffle(a, b, even), cd = __builtin_shuffle(c, d, even);
    o[4 * s] = __builtin_shuffle(ab, cd, lo);
    o[4 * s + 1] = __builtin_shuffle(ab, cd, hi);
    if (s == 0) {
      const vf ab2 = __builtin_shuffle(a, b, odd), cd2 = __builtin_shuffle(c, d, odd);
      o[2] = __builtin_shuffle(ab2, cd2, lo);
      o[3] = __builtin_shuffle(ab2, cd2, hi);
    }
  }
}
#endif

// b = Bt a for F(4x4, 3x3), six values of a (floats or vectors) to six of b.
#define WINO4_BT(b, a)                                                                        \
  ((b)[0] = 4 * (a)[0] - 5 * (a)[2] + (a)[4], (b)[1] = -4 * (a)[1] - 4 * (a)[2] + (a)[3] + (a)[4], \
   (b)[2] = 4 * (a)[1] - 4 * (a)[2] - (a)[3] + (a)[4], (b)[3] = -2 * (a)[1] - (a)[2] + 2 * (a)[3] + (a)[4], \
   (b)[4] = 2 * (a)[1] - (a)[2] - 2 * (a)[3] + (a)[4], (b)[5] = 4 * (a)[1] - 5 * (a)[3] + (a)[5])

// One row of 4x4 tiles (tile row ty, tw tiles) of one channel into V, as
// winograd_input_row does for 2x2 tiles: six image rows zero-padded into
// `rows` (6 x pw floats, pw = 4 tw + 2), Bt d down the columns, then d B
// along the rows, one loop over the tiles per t. Returns whether V got a
// value that is not finite: F(4x4, 3x3) would spread it to outputs whose
// windows lack it (F(2x2, 3x3)'s transforms never mix a column or row into
// outputs that do not read it), so the caller computes those rows directly.
static int winograd4_input_row(const struct tl_gather* x, const float* restrict plane, ptrdiff_t ty, ptrdiff_t tw,
                               ptrdiff_t pw, float* restrict rows, float* restrict v, ptrdiff_t vt) {
  padded_rows(x, plane, 4 * ty - x->pt, 6, pw, rows);
  float* restrict r[6];
  for (int i = 0; i < 6; ++i) r[i] = rows + i * pw;
  for (ptrdiff_t p = 0; p < pw; ++p) {  // Bt d, in place
    const float a[6] = {r[0][p], r[1][p], r[2][p], r[3][p], r[4][p], r[5][p]};
    float b[6];
    WINO4_BT(b, a);
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) r[j][p] = b[j];
  }
  int spread = 0;  // x - x is 0 for every finite x, NaN for infinities and NaN
  for (int i = 0; i < 6; ++i) {  // (Bt d) B
    const float* restrict t = r[i];
    float* restrict vj[6];
    for (int j = 0; j < 6; ++j) vj[j] = v + (6 * i + j) * vt;
    ptrdiff_t q = 0;
#if FAST_TRANSPOSE && VW == 16
    // 16 tiles at a time, their columns 4 q + k turned into vectors; the
    // reads run past the row (into the next, or the buffer's slack), and
    // only the row's tiles are stored and checked.
    for (; q < tw; q += 16) {
      vf a[6], b[6];
      wino4_columns(t + 4 * q, a);
      WINO4_BT(b, a);
      const __mmask16 lanes = (__mmask16)(tw - q >= 16 ? 0xffffu : (1u << (tw - q)) - 1);
#pragma GCC unroll 6
      for (int j = 0; j < 6; ++j) {
        _mm512_mask_storeu_ps(vj[j] + q, lanes, (__m512)b[j]);
        spread |= (lanes & _mm512_cmp_ps_mask((__m512)(b[j] - b[j]), _mm512_setzero_ps(), _CMP_NEQ_UQ)) != 0;
      }
    }
#endif
    for (; q < tw; ++q) {
      float b[6];
      WINO4_BT(b, t + 4 * q);
      for (int j = 0; j < 6; ++j) vj[j][q] = b[j], spread |= b[j] - b[j] != 0;
    }
  }
  return spread;
}

// At applied to s[0], s[st], ... s[5 st]: four outputs.
static inline __attribute__((always_inline)) void wino4_at(const vf* s, int st, vf* o, int ot) {
  const vf a = s[st] + s[2 * st], b = s[st] - s[2 * st], c = s[3 * st] + s[4 * st], d = s[3 * st] - s[4 * st];
  o[0] = s[0] + a + c;
  o[ot] = b + 2 * d;
  o[2 * ot] = a + 4 * c;
  o[3 * ot] = b + 8 * d + s[5 * st];
}

// At m A of tile `at`'s VW output channels: its 4x4 outputs, y[4 k + l] at
// row k, column l of the tile.
static inline __attribute__((always_inline)) void winograd4_tile_out(const float* restrict m, ptrdiff_t mt,
                                                                     ptrdiff_t at, vf y[16]) {
  vf s[36], r[24];
#pragma GCC unroll 36
  for (int t = 0; t < 36; ++t) s[t] = *(const vf*)(m + t * mt + at);
#pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) wino4_at(s + j, 6, r + j, 6);  // down the columns: r[6 k + j]
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) wino4_at(r + 6 * k, 1, y + 4 * k, 1);  // along the rows
}

// At m A of tile `at`'s VW output channels for F(f x f, 3x3): y[f k + l]
// at row k, column l of the tile.
static inline __attribute__((always_inline)) void winograd_tile_out_f(const float* restrict m, ptrdiff_t mt,
                                                                      ptrdiff_t at, vf* y, const int f) {
  if (f == 4)
    winograd4_tile_out(m, mt, at, y);
  else
    winograd_tile_out(m, mt, at, y);
}

#if FAST_TRANSPOSE && VW == 16
// The chunk's outputs (F(f x f, 3x3), f a literal), 16 tiles of a tile row
// x 16 output channels at a time: each tile's outputs are computed across
// channels, then turned in registers (transpose_vw) so that a channel's
// outputs lie along the tiles, and the f columns of 16 tiles are
// interleaved into 16 f pixels of each of their f output rows.
static inline __attribute__((always_inline)) void winograd_output_f(const struct tl_gemm* g, float* restrict c,
                                                                    const float* restrict m, ptrdiff_t mt,
                                                                    ptrdiff_t coutp, ptrdiff_t ty0, ptrdiff_t nt,
                                                                    ptrdiff_t tw, void** args, const int f) {
  static const vi lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
  static const vi hi = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  static const vi lo2 = {0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23};
  static const vi hi2 = {8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31};
  const ptrdiff_t cout = G_M, ow = g->gather.out_w, oh = G_N / ow;
  for (ptrdiff_t q0 = 0; q0 < nt; q0 += tw) {
    const ptrdiff_t oy = f * (ty0 + q0 / tw);
    for (ptrdiff_t tx0 = 0; tx0 < tw; tx0 += 16) {
      const int tiles = (int)MIN(16, tw - tx0);
      const ptrdiff_t ox = f * tx0, width = MIN(16 * f, ow - ox);  // output columns of these tiles
      for (ptrdiff_t c0 = 0; c0 < cout; c0 += VW) {
        vf y[16][16];
        for (int i = 0; i < 16; ++i) {  // spare rows repeat the last tile
          vf one[16];
          winograd_tile_out_f(m, mt, (q0 + tx0 + MIN(i, tiles - 1)) * coutp + c0, one, f);
          winograd_fused(g, args, c0, one, f * f);
#pragma GCC unroll 16
          for (int k = 0; k < f * f; ++k) y[k][i] = one[k];
        }
#pragma GCC unroll 16
        for (int k = 0; k < f * f; ++k) transpose_vw(y[k]);
        const int lanes = (int)MIN(VW, cout - c0);
        for (int l = 0; l < lanes; ++l)
          for (int r = 0; r < f && oy + r < oh; ++r) {
            float* out = c + (c0 + l) * G_N + (oy + r) * ow + ox;
            // Columns 0 and 1 of the tiles interleaved (and 2 and 3, then the pairs).
            const vf a = y[f * r][l], b = y[f * r + 1][l];
            vf px[4] = {__builtin_shuffle(a, b, lo), __builtin_shuffle(a, b, hi)};
            if (f == 4) {
              const vf a2 = y[f * r + 2][l], b2 = y[f * r + 3][l];
              const vf p0 = px[0], p1 = px[1], q0v = __builtin_shuffle(a2, b2, lo), q1v = __builtin_shuffle(a2, b2, hi);
              px[0] = __builtin_shuffle(p0, q0v, lo2), px[1] = __builtin_shuffle(p0, q0v, hi2);
              px[2] = __builtin_shuffle(p1, q1v, lo2), px[3] = __builtin_shuffle(p1, q1v, hi2);
            }
#pragma GCC unroll 4
            for (int part = 0; part < f; ++part) {  // masked where the map ends
              const ptrdiff_t left = width - 16 * part;
              if (left >= 16)
                *(vfu*)(out + 16 * part) = px[part];
              else if (left > 0)
                _mm512_mask_storeu_ps(out + 16 * part, (__mmask16)((1u << left) - 1), (__m512)px[part]);
            }
          }
      }
    }
  }
}
#else
// At m A of the chunk's tiles (F(f x f, 3x3), f a literal): each tile's f x
// f outputs for VW output channels at a time, written to C (skipping
// pixels past the map's edge).
static inline __attribute__((always_inline)) void winograd_output_f(const struct tl_gemm* g, float* restrict c,
                                                                    const float* restrict m, ptrdiff_t mt,
                                                                    ptrdiff_t coutp, ptrdiff_t ty0, ptrdiff_t nt,
                                                                    ptrdiff_t tw, void** args, const int f) {
  const ptrdiff_t cout = G_M, ow = g->gather.out_w, oh = G_N / ow;
  for (ptrdiff_t q = 0; q < nt; ++q) {
    const ptrdiff_t oy = f * (ty0 + q / tw), ox = f * (q % tw);
    for (ptrdiff_t c0 = 0; c0 < cout; c0 += VW) {
      vf y[16];
      winograd_tile_out_f(m, mt, q * coutp + c0, y, f);
      winograd_fused(g, args, c0, y, f * f);
      const int lanes = (int)MIN(VW, cout - c0);
      for (int l = 0; l < lanes; ++l)
        for (int k = 0; k < f && oy + k < oh; ++k)
          for (int j = 0; j < f && ox + j < ow; ++j) c[(c0 + l) * G_N + (oy + k) * ow + ox + j] = y[f * k + j][l];
    }
  }
}
#endif
// One copy of each size (their own names in a profile).
static ONE_COPY void winograd_output(const struct tl_gemm* g, float* restrict c, const float* restrict m,
                                     ptrdiff_t mt, ptrdiff_t coutp, ptrdiff_t ty0, ptrdiff_t nt, ptrdiff_t tw,
                                     void** args) {
  winograd_output_f(g, c, m, mt, coutp, ty0, nt, tw, args, 2);
}
static ONE_COPY void winograd4_output(const struct tl_gemm* g, float* restrict c, const float* restrict m,
                                      ptrdiff_t mt, ptrdiff_t coutp, ptrdiff_t ty0, ptrdiff_t nt, ptrdiff_t tw,
                                      void** args) {
  winograd_output_f(g, c, m, mt, coutp, ty0, nt, tw, args, 4);
}

// Output rows [f * ty0, f * ty1) of one batch item (c and image point at
// it), every output channel, epilogue applied, by F(f x f, 3x3) (f = 2 or
// 4, a literal at each call). Returns 0 when its buffers cannot be had, or
// F(4x4, 3x3) meets a value it would spread: the caller then runs the
// direct product for all of the rows.
static inline __attribute__((always_inline)) int winograd_rows_f(const struct tl_gemm* g, float* restrict c,
                                                                 const float* restrict image, const float* restrict u,
                                                                 ptrdiff_t batch, ptrdiff_t ty0, ptrdiff_t ty1,
                                                                 void** args, const int f) {
  const int T = (f + 2) * (f + 2);  // transform positions
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t cin = x->channels, cout = G_M, coutp = ROUND_UP(cout, NR);
  const ptrdiff_t ow = x->out_w, oh = G_N / ow, tw = (ow + f - 1) / f, pw = f * tw + 2;
  // Tile rows per chunk: as many as the budget allows, in equal chunks.
  const ptrdiff_t budget = MIN(WINO_CHUNK_FLOATS_MAX, MAX(WINO_CHUNK_FLOATS, 2 * T * cin * coutp));
  const ptrdiff_t cap = MAX(1, budget / (T * (cin + coutp) * tw));
  const ptrdiff_t chunks = (ty1 - ty0 + cap - 1) / cap, chunk = (ty1 - ty0 + chunks - 1) / chunks;
  const ptrdiff_t tpad = ROUND_UP(chunk * tw, MR);  // V's and M's tiles, rounded up to whole panels
  // M starts on a cache line, as its aligned loads want (36 x cin x tpad may not).
  const size_t vfloats = ROUND_UP((size_t)(T * cin * tpad), 16), mfloats = (size_t)(T * tpad * coutp);
  // 68 floats of slack after the rows: winograd4_input_row reads past them.
  float* v = scratch_alloc((vfloats + mfloats + (f + 2) * pw + 68) * sizeof(float));
  if (!v) return 0;
  float* m = v + vfloats;
  float* rows = m + mfloats;
  memset(rows + (f + 2) * pw, 0, 68 * sizeof(float));
  // Lanes read but never written are zeroed so they hold ordinary numbers:
  // V's rows past a chunk's tiles (the micro-kernel reads whole panels) and,
  // when Cout is not a whole number of vectors, M's lanes past it (the output
  // transform reads whole vectors). Not all of V and M on every call: that
  // was about 1 MB of stores per call for 256 channels on a 14x14 map.
  const ptrdiff_t used = chunk * tw;
  for (ptrdiff_t r = 0; r < T * cin; ++r) memset(v + r * tpad + used, 0, (size_t)(tpad - used) * sizeof(float));
  if (G_M % VW) memset(m, 0, mfloats * sizeof(float));
  for (ptrdiff_t cy = ty0; cy < ty1; cy += chunk) {
    const ptrdiff_t cy1 = MIN(ty1, cy + chunk), nt = (cy1 - cy) * tw;
    int spread = 0;  // a value F(4x4, 3x3) would spread (winograd4_input_row)
    for (ptrdiff_t ci = 0; ci < cin; ++ci)
      for (ptrdiff_t ty = cy; ty < cy1; ++ty) {
        const float* plane = image + ci * x->height * x->width;
        float* vq = v + ci * tpad + (ty - cy) * tw;
        if (f == 4)
          spread |= winograd4_input_row(x, plane, ty, tw, pw, rows, vq, cin * tpad);
        else
          winograd_input_row(x, plane, ty, tw, pw, rows, vq, cin * tpad);
      }
    if (spread) {
      scratch_free(v);
      return 0;
    }
    for (int t = 0; t < T; ++t)
      for (ptrdiff_t j0 = 0; j0 < cout; j0 += NR) {
        const float* bp = u + (t * coutp + j0) * cin;
        for (ptrdiff_t q = 0; q < nt; q += MR)
          tile_weights_in_b(cin, v + t * cin * tpad + q, tpad, bp, m + (t * tpad + q) * coutp + j0, coutp, 0,
                            (int)MIN(MR, nt - q), (int)MIN(NR, cout - j0));
      }
    if (f == 4)
      winograd4_output(g, c, m, tpad * coutp, coutp, cy, nt, tw, args);
    else
      winograd_output(g, c, m, tpad * coutp, coutp, cy, nt, tw, args);
    if (!g->fused) finish_block(g, c, batch, 0, cout, f * cy * ow, MIN(f * cy1, oh) * ow, args);
  }
  scratch_free(v);
  return 1;
}

// Rows [ty0, ty1) of tiles of tl_gemm.winograd's size: 2x2 (1) or 4x4 (2).
static ONE_COPY int winograd_rows(const struct tl_gemm* g, float* restrict c, const float* restrict image,
                                  const float* restrict u, ptrdiff_t batch, ptrdiff_t ty0, ptrdiff_t ty1, void** args) {
  return g->winograd == 2 ? winograd_rows_f(g, c, image, u, batch, ty0, ty1, args, 4)
                          : winograd_rows_f(g, c, image, u, batch, ty0, ty1, args, 2);
}
