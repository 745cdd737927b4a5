// Depthwise convolutions in the C device's GEMM library, pasted into its
// second half (kernels/gemm_cpu_extras.c), which exports them to the first
// (kernels/gemm_cpu.c): a gathered B of one channel per batch (struct
// tl_gather), computed without packing it; and grouped convolutions of few
// channels a group (grouped_blocked), the same way across output channels.

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

// The batch's bias and clamp, which whole_rows applies as it stores
// (tl_gemm.batch_clamp), as vectors.
struct store_clamp {
  vf bias, lo, hi;
};

// `nq` vectors of one output row (literal at each call): every vector sums all
// of its taps in a register, nq independent chains of multiply-adds, and is
// stored straight into C, through the clamp when one is given. at[q] is
// where vector q starts in the row.
static inline __attribute__((always_inline)) void row_vectors(int nq, const float* const* tap, const float* w,
                                                              int taps, ptrdiff_t from, const ptrdiff_t* at,
                                                              const struct store_clamp* sc, float* restrict out) {
  vf acc[4] = {{0}, {0}, {0}, {0}};
#pragma GCC unroll 25
  for (int t = 0; t < taps; ++t) {
    const float* src = tap[t] + from;
#pragma GCC unroll 4
    for (int q = 0; q < nq; ++q) acc[q] += *(const vfu*)(src + at[q]) * w[t];
  }
  if (sc)
#pragma GCC unroll 4
    for (int q = 0; q < nq; ++q) acc[q] = clamp_v(acc[q] + sc->bias, sc->lo, sc->hi);
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
// vector ends at the row's end, overlapping the one before it. With `sc`,
// the epilogue is applied as the rows are stored, not in a pass of
// `finish` over them (3x3 on 112x112, 32 channels, one thread: 267 us
// against 283).
static void whole_rows(const struct tl_gemm* g, float* restrict c, const float* restrict a, const float* planes,
                       ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t oh0, ptrdiff_t oh1, ptrdiff_t phase, ptrdiff_t pitch,
                       const struct store_clamp* sc) {
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
        if (nq == 4 && taps == 9) row_vectors(4, tap, w, 9, from, at, sc, out);
        else if (nq == 4 && taps == 25) row_vectors(4, tap, w, 25, from, at, sc, out);
        else if (nq == 4) row_vectors(4, tap, w, taps, from, at, sc, out);
        else if (nq == 3) row_vectors(3, tap, w, taps, from, at, sc, out);
        else if (nq == 2 && taps == 9) row_vectors(2, tap, w, 9, from, at, sc, out);
        else if (nq == 2 && taps == 25) row_vectors(2, tap, w, 25, from, at, sc, out);
        else if (nq == 2) row_vectors(2, tap, w, taps, from, at, sc, out);
        else row_vectors(1, tap, w, taps, from, at, sc, out);
      }
    }
  }
}

// Widest window row, and largest padded image (floats), gather_thin_block takes.
#define GATHER_KW_MAX 16
#define GATHER_PLANE_MAX (1 << 22)

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
// would be too large: the packed path runs instead; 2 when it applied the
// batch's epilogue (gather_work.clamp) itself, else 1.
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
    const struct store_clamp sc = {(vf){0} + wk->bias, (vf){0} + g->lo, (vf){0} + g->hi};
    whole_rows(g, c, a, planes, m0, m1, oh0, oh1, phase, pitch, wk->clamp ? &sc : NULL);
    return wk->clamp ? 2 : 1;
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

#if FAST_TRANSPOSE
// VW outputs of one row of a channel block, each a vector over the block's
// channels (`off`: where each tap starts from `at`; outputs `step` apart),
// through the clamp when one is given, turned in registers and stored
// straight into the block's planes of C (`plane` floats apart, `lanes` of
// them) at `dst`.
static inline __attribute__((always_inline)) void blocked_store(const float* at, ptrdiff_t step, const ptrdiff_t* off,
                                                                const float* w, int taps, const struct store_clamp* sc,
                                                                float* restrict dst, ptrdiff_t plane, int lanes) {
  vf acc[VW];
#pragma GCC unroll 16
  for (int q = 0; q < VW; ++q) acc[q] = (vf){0};
  for (int t = 0; t < taps; ++t) {
    const vf wt = *(const vf*)(w + t * VW);
    const float* p = at + off[t];
#pragma GCC unroll 16
    for (int q = 0; q < VW; ++q) acc[q] += wt * *(const vf*)(p + q * step);
  }
  if (sc)
#pragma GCC unroll 16
    for (int q = 0; q < VW; ++q) acc[q] = clamp_v(acc[q] + sc->bias, sc->lo, sc->hi);
  transpose_vw(acc);
  for (int l = 0; l < lanes; ++l) *(vfu*)(dst + l * plane) = acc[l];
}

// The same for the common windows: kh x kw at stride sw without dilation,
// all three literals at each call, the window's rows `pitch` floats apart.
// Every tap's offset is then a constant: no table of offsets and no address
// arithmetic per tap, the loads folded into the multiply-adds. Each output
// still adds its taps in k order.
static inline __attribute__((always_inline)) void blocked_store_fixed(int kh, int kw, int sw, const float* at,
                                                                      ptrdiff_t pitch, const float* w,
                                                                      const struct store_clamp* sc,
                                                                      float* restrict dst, ptrdiff_t plane, int lanes) {
  vf acc[VW];
#pragma GCC unroll 16
  for (int q = 0; q < VW; ++q) acc[q] = (vf){0};
  for (int i = 0; i < kh; ++i) {
    const float* r = at + i * pitch;
#pragma GCC unroll 8
    for (int j = 0; j < kw; ++j) {
      const vf wt = *(const vf*)(w + (i * kw + j) * VW);
#pragma GCC unroll 16
      for (int q = 0; q < VW; ++q) acc[q] += wt * *(const vf*)(r + (q * sw + j) * VW);
    }
  }
  if (sc)
#pragma GCC unroll 16
    for (int q = 0; q < VW; ++q) acc[q] = clamp_v(acc[q] + sc->bias, sc->lo, sc->hi);
  transpose_vw(acc);
  for (int l = 0; l < lanes; ++l) *(vfu*)(dst + l * plane) = acc[l];
}
#endif

// Output rows oh0..oh1 of every channel, one multiply-add at a time, for
// depthwise_blocked's share of the rows when it gets no scratch; `finish`
// applies the epilogue (with batch_clamp too, it holds the same one).
static void depthwise_rows(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                           const float* restrict b, ptrdiff_t oh0, ptrdiff_t oh1, void** args) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t ow_n = x->out_w;
  for (ptrdiff_t ch = 0; ch < g->batch; ++ch) {
    const float* src = b + ch * SB0;
    for (ptrdiff_t oh = oh0; oh < oh1; ++oh)
      for (ptrdiff_t ow = 0; ow < ow_n; ++ow) {
        float s = 0.0f;
        for (ptrdiff_t i = 0; i < x->kh; ++i)
          for (ptrdiff_t j = 0; j < x->kw; ++j) {
            const ptrdiff_t y = oh * x->sh + i * x->dh - x->pt, col = ow * x->sw + j * x->dw - x->pl;
            if (y >= 0 && y < x->height && col >= 0 && col < x->width)
              s += a[ch * SA0 + (i * x->kw + j) * SA2] * src[y * x->width + col];
          }
        c[ch * G_N + oh * ow_n + ow] = s;
      }
    finish_block(g, c + ch * G_N, ch, 0, 1, oh0 * ow_n, oh1 * ow_n, args);
  }
}

// A depthwise convolution on a small map (7x7 to 16x16, or up to 32x32 when
// strided): gather_thin_block's work per channel is then mostly its set-up
// and its copy of the plane (7x7, 5x5 taps: 2.4x slower than this, one
// thread), so here the vectors run across VW channels instead. Each block
// of channels is turned into a zero-padded image with the channels
// innermost, every output is `taps` vector multiply-adds, and the outputs
// are turned back per channel. With the turns in registers (AVX-512, AVX2)
// it also pays up to 112x112 outputs, where a thread's channels fill their
// blocks (at least 4 lanes in 5: a part block computes all VW). Best of 400
// runs on AVX-512, one thread / two, against the per-channel planes: 3x3 at
// 28x28 192 channels 111 / 76 us against 150 / 98; stride 2 from 112x112,
// 96 channels, 365 / 212 against 400 / 236; 5x5 at 28x28 40 channels, one
// thread 34 against 43, but two threads (20 channels each, 32 lanes) 30
// against 23. On AVX2 (8 x 8 turns), medians of 200: 3x3 at 56x56 144
// channels 0.87 / 0.77 of the planes' time, 5x5 at 28x28 240 channels 0.70;
// once rows at least VW wide were stored straight from registers
// (blocked_store), 3x3 at 112x112 with 32 channels 0.83 on one thread.
#define BLOCKED_MAP_SMALL(strided) ((strided) ? 1024 : 256)
#define BLOCKED_MAP_MAX 12544
static int depthwise_blocked(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                             const float* restrict b, ptrdiff_t start, ptrdiff_t end, void** args) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t kh = x->kh, kw = x->kw, taps = kh * kw, ow_n = x->out_w;
  if (!GATHERED || x->channels != 1 || G_M != 1 || g->split != 0 || UNITS_PER_BATCH != 1 || G_K != taps ||
      G_N > BLOCKED_MAP_MAX || taps > DEPTHWISE_TAPS_MAX)
    return 0;
  // Few channels (at most 4 blocks): the launch's range [start, end) of
  // channels stands for the same share of the output rows, of every
  // channel, so that two threads' halves of 24 channels are not 12 each,
  // one block and a half, but whole blocks (stride 2 from 112x112, 24
  // channels, two threads: 48 us against 62, which took the per-channel
  // planes). Every call decides by the shape alone, so the shares still
  // cover C once.
  const ptrdiff_t oh_n = G_N / ow_n;  // a plain B has no map: only now is out_w known to be set
  const int by_rows = g->batch <= 4 * VW;
  const ptrdiff_t first = by_rows ? 0 : start, last = by_rows ? g->batch : end;
  const ptrdiff_t oh0 = by_rows ? start * oh_n / g->batch : 0, oh1 = by_rows ? end * oh_n / g->batch : oh_n;
  if (G_N > BLOCKED_MAP_SMALL(x->sh * x->sw > 1) && (!FAST_TRANSPOSE || (last - first) * 5 < ROUND_UP(last - first, VW) * 4))
    return 0;
  if (oh0 >= oh1) return 1;
  // The padded rows that output rows oh0..oh1 read, from padded row oh0 * sh on.
  const ptrdiff_t ph = (oh1 - oh0 - 1) * x->sh + (kh - 1) * x->dh + 1, pw = (ow_n - 1) * x->sw + (kw - 1) * x->dw + 1;
  const ptrdiff_t n0 = oh0 * ow_n, n1 = oh1 * ow_n;  // their outputs
  // Rows at least VW wide go straight from registers to C (blocked_store);
  // narrower ones through `out`, whose flat turns cross the rows.
  const int direct = FAST_TRANSPOSE && ow_n >= VW;
  const size_t img_floats = (size_t)(ph * pw) * VW, out_floats = direct ? 0 : (size_t)(n1 - n0) * VW,
               w_floats = (size_t)taps * VW;
  float* buf = scratch_alloc((img_floats + out_floats + w_floats) * sizeof(float));
  if (!buf) {
    if (!by_rows) return 0;  // the caller's paths take these channels
    depthwise_rows(g, c, a, b, oh0, oh1, args);  // they would take other channels' rows
    return 1;
  }
  float* im = buf;
  float* out = im + img_floats;
  float* w = out + out_floats;
  ptrdiff_t off[DEPTHWISE_TAPS_MAX];
  for (ptrdiff_t i = 0; i < kh; ++i)
    for (ptrdiff_t j = 0; j < kw; ++j) off[i * kw + j] = (i * x->dh * pw + j * x->dw) * VW;
  // Zeros where the window hangs over the image: the same cells for every
  // block of channels, so they are set once here, and each block writes
  // only the image's cells (576 channels at 7x7, 5x5: three memsets a row
  // for each of 36 blocks before).
  const ptrdiff_t q0 = MAX(0, x->pl), q1 = MIN(pw, x->width + x->pl), plane = x->height * x->width;
  for (ptrdiff_t r = 0; r < ph; ++r) {
    const ptrdiff_t y = oh0 * x->sh + r - x->pt;
    if (y < 0 || y >= x->height) {
      memset(im + r * pw * VW, 0, (size_t)(pw * VW) * sizeof(float));
      continue;
    }
    memset(im + r * pw * VW, 0, (size_t)(q0 * VW) * sizeof(float));
    memset(im + (r * pw + q1) * VW, 0, (size_t)((pw - q1) * VW) * sizeof(float));
  }
  for (ptrdiff_t c0 = first; c0 < last; c0 += VW) {
    const int lanes = (int)MIN(VW, last - c0);
    if (c0 == first || lanes < VW) memset(w, 0, w_floats * sizeof(float));  // a part block's spare lanes weigh 0
    const float* src[VW];
    for (int l = 0; l < VW; ++l) src[l] = b + (c0 + MIN(l, lanes - 1)) * SB0;
    for (ptrdiff_t r = 0; r < ph; ++r) {
      const ptrdiff_t y = oh0 * x->sh + r - x->pt;
      if (y < 0 || y >= x->height) continue;
      ptrdiff_t q = q0;
#if FAST_TRANSPOSE
      // VW columns of the VW channels at a time, turned in registers (loads
      // that run on into the next image row, never past the plane, fill
      // only columns that are not stored); then one column at a time.
      for (; q < q1 && y * x->width + q - x->pl + VW <= plane; q += VW) {
        vf v[VW];
#pragma GCC unroll 16
        for (int l = 0; l < VW; ++l) v[l] = *(const vfu*)(src[l] + y * x->width + q - x->pl);
        transpose_vw(v);
        for (ptrdiff_t j = 0; j < MIN(VW, q1 - q); ++j) *(vf*)(im + (r * pw + q + j) * VW) = v[j];
      }
#endif
      for (; q < q1; ++q) {
        const ptrdiff_t at = y * x->width + q - x->pl;
        float* dst = im + (r * pw + q) * VW;
        for (int l = 0; l < VW; ++l) dst[l] = src[l][at];  // spare lanes repeat a channel; their weights are 0
      }
    }
    for (int l = 0; l < lanes; ++l)
      for (ptrdiff_t t = 0; t < taps; ++t) w[t * VW + l] = a[(c0 + l) * SA0 + t * SA2];
    const ptrdiff_t step = x->sw * VW;
    struct store_clamp sc = {{0}, (vf){0} + g->lo, (vf){0} + g->hi};
    for (int l = 0; l < lanes && g->batch_clamp; ++l) sc.bias[l] = batch_bias(g, args, c0 + l);
#if FAST_TRANSPOSE
    if (direct) {
      // VW outputs of a row at a time; a row's last VW end at its end,
      // overlapping the ones before (the same values stored again). 3x3 at
      // 56x56, 144 channels, one thread: 0.81 of the time of going through
      // `out` (after a 1x1 convolution, medians of 200, 3 alternations).
      // 3x3 and 5x5 windows at stride 1 or 2 and 7x7 at stride 1, without
      // dilation, take blocked_store_fixed. After a 1x1 convolution, one
      // thread, medians of 200, 3 alternations on a quiet machine: 3x3 at
      // 14x14 to 112x112 0.75-0.93 of the time, 5x5 0.86-0.87, stride 2
      // 0.75-0.94, 7x7 at 14x14 to 56x56 0.73-0.87. (The same for the
      // four-output loop below, on 7x7 maps, took 1.02-1.05.)
      const int window = x->dh == 1 && x->dw == 1 && (x->sw == 1 || x->sw == 2) && kh == kw ? (int)kh : 0;
      const struct store_clamp* clamp = g->batch_clamp ? &sc : NULL;
      for (ptrdiff_t oh = oh0; oh < oh1; ++oh) {
        const float* row = im + (oh - oh0) * x->sh * pw * VW;
        for (ptrdiff_t ow0 = 0; ow0 < ow_n; ow0 += VW) {
          const ptrdiff_t ow = MIN(ow0, ow_n - VW);
          const float* at = row + ow * step;
          float* dst = c + c0 * G_N + oh * ow_n + ow;
          if (window == 3 && x->sw == 1)
            blocked_store_fixed(3, 3, 1, at, pw * VW, w, clamp, dst, G_N, lanes);
          else if (window == 3)
            blocked_store_fixed(3, 3, 2, at, pw * VW, w, clamp, dst, G_N, lanes);
          else if (window == 5 && x->sw == 1)
            blocked_store_fixed(5, 5, 1, at, pw * VW, w, clamp, dst, G_N, lanes);
          else if (window == 5)
            blocked_store_fixed(5, 5, 2, at, pw * VW, w, clamp, dst, G_N, lanes);
          else if (window == 7 && x->sw == 1)
            blocked_store_fixed(7, 7, 1, at, pw * VW, w, clamp, dst, G_N, lanes);
          else
            blocked_store(at, step, off, w, (int)taps, clamp, dst, G_N, lanes);
        }
      }
      for (int l = 0; l < lanes && !g->batch_clamp; ++l) finish_block(g, c + (c0 + l) * G_N, c0 + l, 0, 1, n0, n1, args);
      continue;
    }
#endif
    // Four outputs of a row at a time: four independent chains of
    // multiply-adds instead of one that waits on each add. A row's last four
    // end at its end, overlapping the four before (the same sums again),
    // rather than going one at a time on one chain: a 7x7 map's 5x5 window
    // over 576 channels took 0.93-0.96 of the time.
    for (ptrdiff_t oh = oh0; oh < oh1; ++oh) {
      const float* row = im + (oh - oh0) * x->sh * pw * VW;
      float* o = out + (oh - oh0) * ow_n * VW;
      if (ow_n < 4) {  // a map narrower than four outputs: one at a time
        for (ptrdiff_t ow = 0; ow < ow_n; ++ow) {
          const float* at = row + ow * step;
          vf acc = {0};
          for (ptrdiff_t t = 0; t < taps; ++t) acc += *(const vf*)(w + t * VW) * *(const vf*)(at + off[t]);
          *(vf*)(o + ow * VW) = acc;
        }
        continue;
      }
      for (ptrdiff_t ow0 = 0; ow0 < ow_n; ow0 += 4) {
        const ptrdiff_t ow = MIN(ow0, ow_n - 4);
        const float* at = row + ow * step;
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
    }
    // The epilogue in registers when it is a bias per channel and a clamp
    // (tl_gemm.batch_clamp): one vector of the block's biases, no pass of
    // `finish` over C (3x3 on 7x7, 960 channels: 0.81 of the time on one
    // thread, 0.59 on two).
    if (g->batch_clamp)
      for (ptrdiff_t n = 0; n < n1 - n0; ++n) *(vf*)(out + n * VW) = clamp_v(*(vf*)(out + n * VW) + sc.bias, sc.lo, sc.hi);
    // Back to one plane per channel, VW outputs at a time as above.
    ptrdiff_t n = n0;
#if FAST_TRANSPOSE
    for (; n + VW <= n1; n += VW) {
      vf v[VW];
#pragma GCC unroll 16
      for (int j = 0; j < VW; ++j) v[j] = *(const vf*)(out + (n - n0 + j) * VW);
      transpose_vw(v);
      for (int l = 0; l < lanes; ++l) *(vfu*)(c + (c0 + l) * G_N + n) = v[l];
    }
#endif
    for (int l = 0; l < lanes; ++l) {
      float* dst = c + (c0 + l) * G_N;
      for (ptrdiff_t m = n; m < n1; ++m) dst[m] = out[(m - n0) * VW + l];
      if (!g->batch_clamp) finish_block(g, dst, c0 + l, 0, 1, n0, n1, args);
    }
  }
  scratch_free(buf);
  return 1;
}

#if FAST_TRANSPOSE
// Most channels a group grouped_blocked takes: its weights are G_K =
// channels x taps vectors, read once per VW outputs.
#define GROUPED_CHANNELS_MAX 64

// Outputs [n0, n1) of group `grp` (all of its G_M rows) for
// grouped_blocked: `im` (ph x pw a channel, `plane` floats apart, its
// padding zeroed) takes the rows of the group's channels that those
// outputs read, `w` its weights as vectors over its output channels; `off`
// holds each tap's pixel from an output's first.
static void grouped_range(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                          const float* restrict b, ptrdiff_t grp, ptrdiff_t n0, ptrdiff_t n1, ptrdiff_t ph,
                          ptrdiff_t pw, float* restrict w, const ptrdiff_t* off, float* restrict im, void** args) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t cg = x->channels, ow_n = x->out_w, oh0 = n0 / ow_n, plane = ph * pw, count = MIN(VW, n1 - n0);
  const int fused = g->fused && !g->finish;
  const float* bias = fused && g->bias >= 0 ? (const float*)args[g->bias] : NULL;
  // The channels' pixels inside the padding: rows of a few floats each,
  // copied by a loop, not a call (55 groups of 8 channels on 7x7 maps took
  // 1.3x the time with memset and memcpy per row).
  const ptrdiff_t q0 = MIN(pw, MAX(0, x->pl)), q1 = MAX(q0, MIN(pw, x->width + x->pl));
  const ptrdiff_t r0 = MAX(0, x->pt - oh0 * x->sh), r1 = MIN(ph, x->height + x->pt - oh0 * x->sh);
  const float* src = b + grp * SB0;
  for (ptrdiff_t ch = 0; ch < cg; ++ch)
    for (ptrdiff_t r = r0; r < r1; ++r) {
      float* restrict dst = im + ch * plane + r * pw;
      const float* restrict row = src + (ch * x->height + oh0 * x->sh + r - x->pt) * x->width - x->pl;
      for (ptrdiff_t q = q0; q < q1; ++q) dst[q] = row[q];
    }
  float* cb = c + grp * G_M * G_N;
  // Weights as vectors over the output channels (spare lanes 0), and biases.
  const vf lo = (vf){0} + g->lo, hi = (vf){0} + g->hi;
  vf bv = {0};
  for (ptrdiff_t l = 0; l < G_M && bias; ++l) bv[l] = bias[l];
  for (ptrdiff_t k = 0; k < G_K; ++k)
    for (ptrdiff_t l = 0; l < VW; ++l) w[k * VW + l] = l < G_M ? a[grp * SA0 + l * SA1 + k * SA2] : 0.0f;
  // VW outputs at a time; the last VW end at n1, overlapping the ones
  // before (the same values stored again). Each output's first pixel is
  // found by stepping along its row, not by dividing.
  for (ptrdiff_t nb = n0; nb < n1; nb += VW) {
    const ptrdiff_t n = MAX(n0, MIN(nb, n1 - VW));
    const float* pix[VW];
    ptrdiff_t oh = n / ow_n, ow = n % ow_n;
    for (int q = 0; q < VW; ++q) {
      pix[q] = im + (oh - oh0) * x->sh * pw + ow * x->sw;
      if (n + q + 1 < n1 && ++ow == ow_n) ow = 0, ++oh;  // past n1: the last output again
    }
    vf acc[VW];
#pragma GCC unroll 16
    for (int q = 0; q < VW; ++q) acc[q] = (vf){0};
    for (ptrdiff_t k = 0; k < G_K; ++k) {
      const vf wk = *(const vf*)(w + k * VW);
      const ptrdiff_t o = off[k];
#pragma GCC unroll 16
      for (int q = 0; q < VW; ++q) acc[q] += wk * pix[q][o];
    }
    if (fused)
#pragma GCC unroll 16
      for (int q = 0; q < VW; ++q) acc[q] = clamp_v(acc[q] + bv, lo, hi);
    transpose_vw(acc);
    if (count == VW)
      for (ptrdiff_t l = 0; l < G_M; ++l) *(vfu*)(cb + l * G_N + n) = acc[l];
    else
      for (ptrdiff_t l = 0; l < G_M; ++l)
        for (ptrdiff_t q = 0; q < count; ++q) cb[l * G_N + n + q] = acc[l][q];
  }
  if (!fused) finish_block(g, cb, grp, 0, G_M, n0, n1, args);
}

// A grouped convolution with few channels a group (RegNet's 8, ResNeXt's 4
// to 32): batch item b is group b's product of at most VW output channels
// over its channels x taps. The packed path spent more on each group's
// packing and on its few rows of C (8 of a 6-row micro-tile's 12) than on
// the product. Here the vectors run across the group's output channels
// instead: every output is G_K multiply-adds of a vector of weights (one
// per output channel) by one pixel of a zero-padded copy of the group's
// channels, VW outputs at a time (any stride, any width: each output reads
// its pixels through its own pointer), turned in registers into VW outputs
// of each channel and stored. Taps are added in k order. The launch's
// range is split as depthwise_blocked splits it: by rows of every group
// when the groups are few, else by groups. Returns 0 where it does not
// apply. (RGB stems, one image of 3 channels to 16 or 32, took 0.89-1.22x
// the packed path's time this way: left to it.)
static int grouped_blocked(const struct tl_gemm* g, float* restrict c, const float* restrict a,
                           const float* restrict b, ptrdiff_t start, ptrdiff_t end, void** args) {
  const struct tl_gather* x = &g->gather;
  const ptrdiff_t cg = x->channels, kh = x->kh, kw = x->kw, ow_n = x->out_w;
  if (!GATHERED || x->max || cg < 2 || cg > GROUPED_CHANNELS_MAX || G_M > VW || G_K != cg * kh * kw ||
      g->split != 0 || UNITS_PER_BATCH != 1 || g->batch_clamp || G_N < VW)
    return 0;
  const ptrdiff_t oh_n = G_N / ow_n;
  const int by_rows = g->batch <= 4 * VW;
  const ptrdiff_t first = by_rows ? 0 : start, last = by_rows ? g->batch : end;
  const ptrdiff_t n0 = by_rows ? start * oh_n / g->batch * ow_n : 0, n1 = by_rows ? end * oh_n / g->batch * ow_n : G_N;
  if (n0 >= n1) return 1;
  // The padded rows and columns that outputs n0..n1 read, per channel.
  const ptrdiff_t rows = (n1 - 1) / ow_n - n0 / ow_n + 1;
  const ptrdiff_t ph = (rows - 1) * x->sh + (kh - 1) * x->dh + 1, pw = (ow_n - 1) * x->sw + (kw - 1) * x->dw + 1;
  const size_t floats = (size_t)G_K * VW + (size_t)(ph * pw * cg);
  float* buf = scratch_alloc(floats * sizeof(float) + (size_t)G_K * sizeof(ptrdiff_t));
  if (!buf) {  // one multiply-add at a time, the same outputs (other threads take the others)
    const int fused = g->fused && !g->finish;
    const float* bias = fused && g->bias >= 0 ? (const float*)args[g->bias] : NULL;
    const float clamp[2] = {g->lo, g->hi};
    for (ptrdiff_t grp = first; grp < last; ++grp) {
      float* cb = c + grp * G_M * G_N;
      for (ptrdiff_t i = 0; i < G_M; ++i)
        for (ptrdiff_t n = n0; n < n1; ++n) {
          float s = bias ? bias[i] : 0.0f;
          for (ptrdiff_t k = 0; k < G_K; ++k) s += a[grp * SA0 + i * SA1 + k * SA2] * gathered_b(x, b + grp * SB0, k, n);
          cb[i * G_N + n] = fused ? clamp_f(s, clamp) : s;
        }
      if (!fused) finish_block(g, cb, grp, 0, G_M, n0, n1, args);
    }
    return 1;
  }
  float* w = buf;  // first, then the offsets: both stay aligned
  ptrdiff_t* off = (ptrdiff_t*)(w + G_K * VW);
  float* im = (float*)(off + G_K);
  // The same for every group: the taps' offsets, and the padding (each
  // group's pixels are copied inside it).
  for (ptrdiff_t ch = 0; ch < cg; ++ch)
    for (ptrdiff_t i = 0; i < kh; ++i)
      for (ptrdiff_t j = 0; j < kw; ++j) off[(ch * kh + i) * kw + j] = (ch * ph + i * x->dh) * pw + j * x->dw;
  memset(im, 0, (size_t)(ph * pw * cg) * sizeof(float));
  for (ptrdiff_t grp = first; grp < last; ++grp) grouped_range(g, c, a, b, grp, n0, n1, ph, pw, w, off, im, args);
  scratch_free(buf);
  return 1;
}
#endif

// Max pools (tl_gather.max): C[b, 0, n] is the largest cell of output n's
// window over plane b, leaving out the cells outside the image (A is not
// read). NaN wins, as in the generic kernels' maximum. One pass,
// the window's rows and columns both in registers: the generic rendering
// takes two (rows, then columns) and its column pass ends every row with a
// scalar tail.

#include <math.h>  // INFINITY
#if defined(__AVX__)
#include <immintrin.h>
#endif

typedef int vlane __attribute__((vector_size(VW * 4)));

// Lane l holds start + l * step: a constant once inlined.
static inline vlane lanes_from(int start, int step) {
  vlane v;
  for (int l = 0; l < VW; ++l) v[l] = start + step * l;
  return v;
}

// The larger of a and b in each lane, NaN where either is. The instruction's
// max returns its second operand when one is NaN, so the OR of both orders
// keeps a NaN from either side (a compare and blend took 1.8x as long for
// a 3x3 pool on AVX-512).
static inline vf max_nan(vf a, vf b) {
#if defined(__AVX512F__) && VW == 16
  return (vf)((vlane)_mm512_max_ps(a, b) | (vlane)_mm512_max_ps(b, a));
#elif defined(__AVX__) && VW == 8
  return (vf)((vlane)_mm256_max_ps(a, b) | (vlane)_mm256_max_ps(b, a));
#else
  const vlane pick = (b > a) | (b != b);
  return (vf)(((vlane)b & pick) | ((vlane)a & ~pick));
#endif
}
// The same for one float, without a branch that random data would mispredict.
static inline float max_nan1(float a, float b) { return max_nan((vf){a}, (vf){b})[0]; }

// The largest of rows r[0..kh) at columns q .. q + VW.
static inline __attribute__((always_inline)) vf rows_max(const float* const* r, int kh, ptrdiff_t q) {
  vf m = *(const vfu*)(r[0] + q);
  for (int i = 1; i < kh; ++i) m = max_nan(m, *(const vfu*)(r[i] + q));
  return m;
}

// One output row of at least VW outputs from the window's rows r[0..kh),
// each read from column 0 up to the last the row's windows cover; kh and
// kw are literals at each call. Stride 2 (kw <= 3, dilation 1): the even
// and odd lanes of two vectors of row maxima, and for kw = 3 the even lanes
// moved down one with the next column's maximum last. Stride 1: kw
// overlapping vectors. A row's last VW outputs overlap the ones before.
// (kw = 1 at stride 2 would read a column past its windows.)
static inline __attribute__((always_inline)) void pool_row(const float* const* r, int kh, int kw, int sw,
                                                            ptrdiff_t dw, float* o, ptrdiff_t ow) {
  for (ptrdiff_t j0 = 0; j0 < ow; j0 += VW) {
    const ptrdiff_t j = MIN(j0, ow - VW);
    vf m;
    if (sw == 2) {
      const ptrdiff_t b = 2 * j;
      const vf v0 = rows_max(r, kh, b), v1 = rows_max(r, kh, b + VW);
      const vf even = __builtin_shuffle(v0, v1, lanes_from(0, 2));
      m = max_nan(even, __builtin_shuffle(v0, v1, lanes_from(1, 2)));
      if (kw == 3) {
        float next = r[0][b + 2 * VW];
        for (int i = 1; i < kh; ++i) next = max_nan1(next, r[i][b + 2 * VW]);
        m = max_nan(m, __builtin_shuffle(even, (vf){next}, lanes_from(1, 1)));
      }
    } else {
      m = rows_max(r, kh, j);
      for (int k = 1; k < kw; ++k) m = max_nan(m, rows_max(r, kh, j + k * dw));
    }
    *(vfu*)(o + j) = m;
  }
}

// Any window, one output at a time.
static inline void pool_row_any(const float* const* r, int kh, int kw, ptrdiff_t sw, ptrdiff_t dw, float* o,
                                ptrdiff_t ow) {
  for (ptrdiff_t j = 0; j < ow; ++j) {
    float m = r[0][j * sw];
    for (int i = 0; i < kh; ++i)
      for (int k = 0; k < kw; ++k) m = max_nan1(m, r[i][j * sw + k * dw]);
    o[j] = m;
  }
}

// `rows` output rows of `ow` outputs each, o_pitch apart in o, whose windows
// start every sh rows of `in` (rows `pitch` floats apart) and every sw
// columns from its column 0. One loop over the rows inside each copy: a call
// per row cost a 3x3 pool of 111 x 111 half its time again.
static inline __attribute__((always_inline)) void pool_span(const float* in, ptrdiff_t pitch, ptrdiff_t sh,
                                                             ptrdiff_t dh, int kh, int kw, int sw, ptrdiff_t dw,
                                                             int vector, ptrdiff_t rows, float* o, ptrdiff_t o_pitch,
                                                             ptrdiff_t ow) {
  const float* r[DEPTHWISE_TAPS_MAX];
  for (ptrdiff_t oh = 0; oh < rows; ++oh) {
    for (int i = 0; i < kh; ++i) r[i] = in + (oh * sh + i * dh) * pitch;
    if (vector) pool_row(r, kh, kw, sw, dw, o + oh * o_pitch, ow);
    else pool_row_any(r, kh, kw, sw, dw, o + oh * o_pitch, ow);
  }
}

// pool_span with copies for the common windows; rows at least VW outputs
// wide at stride 1 or 2 (kw <= 3) vectorise.
static void pool_rows(const struct tl_gather* x, const float* in, ptrdiff_t pitch, ptrdiff_t rows, float* o,
                      ptrdiff_t o_pitch, ptrdiff_t ow) {
  const int kh = (int)x->kh, kw = (int)x->kw;
  const ptrdiff_t sh = x->sh, dh = x->dh;
  const int vector = ow >= VW && x->dw == 1 && ((x->sw == 2 && kw >= 2 && kw <= 3) || x->sw == 1);
  if (vector && x->sw == 2 && kh == 3 && kw == 3) pool_span(in, pitch, sh, dh, 3, 3, 2, 1, 1, rows, o, o_pitch, ow);
  else if (vector && x->sw == 2 && kh == 2 && kw == 2) pool_span(in, pitch, sh, dh, 2, 2, 2, 1, 1, rows, o, o_pitch, ow);
  else if (vector && x->sw == 1 && kh == 3 && kw == 3) pool_span(in, pitch, sh, dh, 3, 3, 1, 1, 1, rows, o, o_pitch, ow);
  else if (vector) pool_span(in, pitch, sh, dh, kh, kw, (int)x->sw, 1, 1, rows, o, o_pitch, ow);
  else pool_span(in, pitch, sh, dh, kh, kw, (int)x->sw, x->dw, 0, rows, o, o_pitch, ow);
}

// Floats of a padded band (pool_plane) at most, unless one window's rows need more.
#define POOL_BAND_FLOATS 8192

// The band's row pitch: the columns the windows of a row cover, or of a
// row of VW outputs when that is wider, rounded up, and 2 VW more for a
// vector row's reads past them.
static ptrdiff_t pool_pitch(const struct tl_gather* x) {
  return ROUND_UP((MAX(x->out_w, VW) - 1) * x->sw + (x->kw - 1) * x->dw + 1, VW) + 2 * VW;
}

// Plane `image` pooled into `out` (oh_n x out_w). Windows inside the image
// read it in place: rows at least VW outputs wide straight into `out`,
// narrower ones VW wide into `narrow` (then copied out) while those reads,
// which run on into the next rows, stay before `end`, the end of the
// images. Otherwise bands of output rows read a copy of their input rows,
// padded with -inf on every side and past the last column any window reads
// (narrow rows again through `narrow`): `band` holds band_floats, `narrow`
// band_floats / pool_pitch rows of VW.
static void pool_plane(const struct tl_gather* x, const float* image, const float* end, float* out, ptrdiff_t oh_n,
                       float* band, ptrdiff_t band_floats, float* narrow) {
  const ptrdiff_t ow_n = x->out_w, span = (x->kh - 1) * x->dh + 1;
  const ptrdiff_t pw = (ow_n - 1) * x->sw + (x->kw - 1) * x->dw + 1;  // columns the windows cover
  const ptrdiff_t pitch = pool_pitch(x), narrow_n = band_floats / pitch;
  const int inside = x->pt == 0 && x->pl == 0 && (oh_n - 1) * x->sh + span <= x->height && pw <= x->width;
  if (inside && ow_n >= VW) {
    pool_rows(x, image, x->width, oh_n, out, ow_n, ow_n);
    return;
  }
  if (inside && image + ((oh_n - 1) * x->sh + span - 1) * x->width + pitch <= end) {
    for (ptrdiff_t oh0 = 0; oh0 < oh_n; oh0 += narrow_n) {
      const ptrdiff_t rows = MIN(narrow_n, oh_n - oh0);
      pool_rows(x, image + oh0 * x->sh * x->width, x->width, rows, narrow, VW, VW);
      for (ptrdiff_t r = 0; r < rows; ++r) memcpy(out + (oh0 + r) * ow_n, narrow + r * VW, (size_t)ow_n * sizeof(float));
    }
    return;
  }
  const ptrdiff_t band_n = MAX(1, (narrow_n - span) / x->sh + 1);
  for (ptrdiff_t oh0 = 0; oh0 < oh_n; oh0 += band_n) {
    const ptrdiff_t oh1 = MIN(oh_n, oh0 + band_n), rows = (oh1 - 1 - oh0) * x->sh + span;
    for (ptrdiff_t q = 0; q < rows; ++q) {
      float* d = band + q * pitch;
      const ptrdiff_t y = oh0 * x->sh - x->pt + q, c0 = MIN(x->pl, pitch), c1 = MAX(c0, MIN(pitch, x->pl + x->width));
      if (y < 0 || y >= x->height) {
        for (ptrdiff_t c = 0; c < pitch; ++c) d[c] = -INFINITY;
        continue;
      }
      for (ptrdiff_t c = 0; c < c0; ++c) d[c] = -INFINITY;
      if (c1 > c0) memcpy(d + c0, image + y * x->width + (c0 - x->pl), (size_t)(c1 - c0) * sizeof(float));
      for (ptrdiff_t c = c1; c < pitch; ++c) d[c] = -INFINITY;
    }
    if (ow_n >= VW) {
      pool_rows(x, band, pitch, oh1 - oh0, out + oh0 * ow_n, ow_n, ow_n);
    } else {
      pool_rows(x, band, pitch, oh1 - oh0, narrow, VW, VW);
      for (ptrdiff_t oh = oh0; oh < oh1; ++oh)
        memcpy(out + oh * ow_n, narrow + (oh - oh0) * VW, (size_t)ow_n * sizeof(float));
    }
  }
}

// Planes [0, count) of `in`, plane_stride floats apart (x->height x
// x->width each), max-pooled into oh_n x x->out_w planes of `out`,
// out_stride apart; reads may run on to `end`, no further. With g, plane p
// is then finished as batch item first + p. Returns 0, with nothing
// written, when a window has more rows than the row pointers here hold or
// the band's buffer cannot be had.
static int pool_planes(const struct tl_gather* x, const float* in, const float* end, ptrdiff_t count,
                       ptrdiff_t plane_stride, float* out, ptrdiff_t out_stride, ptrdiff_t oh_n,
                       const struct tl_gemm* g, ptrdiff_t first, void** args) {
  if (x->kh > DEPTHWISE_TAPS_MAX) return 0;
  const ptrdiff_t pitch = pool_pitch(x), band_floats = MAX(POOL_BAND_FLOATS, ((x->kh - 1) * x->dh + 1) * pitch);
  // The band, then VW floats per output row it can hold.
  float* band = scratch_alloc((size_t)(band_floats + (band_floats / pitch) * VW) * sizeof(float));
  if (!band) return 0;
  for (ptrdiff_t p = 0; p < count; ++p) {
    pool_plane(x, in + p * plane_stride, end, out + p * out_stride, oh_n, band, band_floats, band + band_floats);
    if (g) finish_block(g, out + p * out_stride, first + p, 0, 1, 0, G_N, args);
  }
  scratch_free(band);
  return 1;
}

// kernels/gemm_cpu.c's pooled_product: a band of a convolution's output
// rows for every channel, pooled (pool_planes, reading no further than the
// last plane).
int tinylens_gemm_pool_planes(const struct tl_gather* x, const float* in, ptrdiff_t count, ptrdiff_t plane_stride,
                              float* out, ptrdiff_t out_stride, ptrdiff_t oh_n) {
  const float* end = in + (count - 1) * plane_stride + x->height * x->width;
  return pool_planes(x, in, end, count, plane_stride, out, out_stride, oh_n, NULL, 0, NULL);
}

// tinylens_gemm_f32's max pools: planes [start, end), each then finished.
int tinylens_gemm_max_pool(const struct tl_gemm* g, float* restrict c, const float* restrict b, ptrdiff_t start,
                           ptrdiff_t end, void** args) {
  const struct tl_gather* x = &g->gather;
  const float* images_end = b + (g->batch - 1) * SB0 + x->height * x->width;
  return pool_planes(x, b + start * SB0, images_end, end - start, SB0, c + start * G_N, G_N, G_N / x->out_w, g,
                     start, args);
}
