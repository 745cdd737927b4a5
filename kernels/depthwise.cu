// One-row products over single planes in CUDA C++: depthwise convolutions
// and max pools (a GemmShape with M = 1 and a ConvGather of one channel per
// batch item, core/ops.h), specialised with constants by
// core/codegen/gemm_cuda.cpp and compiled by NVRTC:
//   C[b, 0, n] = epilogue(sum over taps t of A[b*SA0 + t*SA2] * x_b(tap t of output n))
// or, with MAX, the largest cell of output n's window inside the plane (NaN
// wins). x_b is plane b of the image (SB0 floats apart), zero outside it.
// gemm.cu would compute this as 32-row tiles with 31 rows of zeros. Here a
// block of TW x TY threads computes TW x (TY * R) outputs of one plane: it
// stages the input cells they read (the window's halo included, padding as
// zeros, or -inf for a pool) in shared memory once; each thread keeps its
// tap weights in registers and computes R outputs of one column on
// consecutive rows, so that a cell read from shared memory serves each of
// those outputs whose window holds it (up to KH of them at stride 1).
typedef {{IDX}} idx_t;
constexpr idx_t N = {{N}}, K = {{K}};
constexpr idx_t SA0 = {{SA0}}, SA2 = {{SA2}}, SB0 = {{SB0}};
constexpr idx_t GH = {{GH}}, GW = {{GW}}, GKH = {{GKH}}, GKW = {{GKW}}, GSH = {{GSH}}, GSW = {{GSW}};
constexpr idx_t GDH = {{GDH}}, GDW = {{GDW}}, GPT = {{GPT}}, GPL = {{GPL}}, GOW = {{GOW}};
constexpr bool MAX = {{MAX}};
// A_PERIOD > 0: batch item b reads A's row b % A_PERIOD (N images share C
// channels' weights, MatmulHint::a_period).
constexpr idx_t A_PERIOD = {{A_PERIOD}};
constexpr int TW = {{TW}}, TY = {{TY}}, R = {{R}};
constexpr idx_t GOH = N / GOW;
// Blocks along a row of the plane; x of the grid counts them for every batch
// item in turn (y and z stop at 65535: EfficientNet-B0 has 1152 channels x
// 64 images).
constexpr idx_t TILES_X = (GOW + TW - 1) / TW;
// The input cells a block reads: rows and columns of its window's span.
constexpr int IH = (TY * R - 1) * GSH + (GKH - 1) * GDH + 1, IW = (TW - 1) * GSW + (GKW - 1) * GDW + 1;
// Cells one thread's column reads for one tap column: R rows GSH apart, each
// with a window of GKH rows GDH apart.
constexpr int SPAN = (R - 1) * GSH + (GKH - 1) * GDH + 1;

// The elementwise ops fused after the product (bias, activation): every
// element of C is stored as epilogue(sum, ...).
{{EPILOGUE}}

extern "C" __global__ void __launch_bounds__(TW * TY) {{NAME}}(float* __restrict__ C, const float* __restrict__ A,
                                                               const float* __restrict__ B EPILOGUE_PARAMS) {
  __shared__ float cells[IH][IW];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TW + tx;
  const idx_t batch = idx_t(blockIdx.x) / TILES_X;
  const idx_t ow0 = idx_t(blockIdx.x) % TILES_X * TW, oh0 = idx_t(blockIdx.y) * (TY * R);
  const float* __restrict__ plane = B + batch * SB0;
  const float outside = MAX ? __int_as_float(0xff800000) : 0.f;  // -inf: a pool leaves the padding out
  const idx_t y0 = oh0 * GSH - GPT, x0 = ow0 * GSW - GPL;
  for (int e = tid; e < IH * IW; e += TW * TY) {
    const int r = e / IW, c = e % IW;
    const idx_t y = y0 + r, x = x0 + c;
    cells[r][c] = y >= 0 && y < GH && x >= 0 && x < GW ? plane[y * GW + x] : outside;
  }
  float w[MAX ? 1 : GKH * GKW];
  if constexpr (!MAX) {
    idx_t row = batch;
    if constexpr (A_PERIOD > 0) row = batch % A_PERIOD;
    const float* __restrict__ taps = A + row * SA0;
#pragma unroll
    for (int t = 0; t < GKH * GKW; ++t) w[t] = taps[t * SA2];
  }
  __syncthreads();

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = outside;
  // Thread (tx, ty): column tx, rows ty * R .. ty * R + R - 1 of the block's outputs.
  const int row0 = ty * R * GSH, col = tx * GSW;
#pragma unroll
  for (int j = 0; j < GKW; ++j) {
#pragma unroll
    for (int q = 0; q < SPAN; ++q) {
      const float v = cells[row0 + q][col + j * GDW];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        // Cell q is tap row i of output r when q = r * GSH + i * GDH.
        const int d = q - r * GSH;
        if (d < 0 || d % GDH != 0 || d / GDH >= GKH) continue;
        if constexpr (MAX)
          acc[r] = v > acc[r] || v != v ? v : acc[r];
        else
          acc[r] = fmaf(w[(d / GDH) * GKW + j], v, acc[r]);
      }
    }
  }
  const idx_t ow = ow0 + tx;
  if (ow >= GOW) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const idx_t oh = oh0 + ty * R + r;
    if (oh >= GOH) continue;
    const idx_t n = oh * GOW + ow;
    C[batch * N + n] = epilogue(acc[r], batch, 0, n, A, B EPILOGUE_ARGS);
  }
}
