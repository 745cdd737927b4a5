// Tiled single-precision GEMM, specialised by core/codegen/gemm_opencl.cpp
// with its tiles as constants and its sizes as arguments:
//   C[b, m, n] = sum_k A[b*SA0 + m*SA1 + k*SA2] * B[b*SB0 + k*SB1 + n*SB2]
// C is contiguous (batch x M x N). A work-group computes a TM x TN tile of C
// with (TN/WN) x (TM/WM) work-items; each work-item keeps WM x WN results in
// registers. The K loop walks TK-wide slices staged in local memory, double
// buffered so one barrier per slice suffices, and the next slice's global
// loads are issued before the current slice is multiplied to hide latency.
// M, N, K and the strides are kernel arguments, not constants: every GEMM
// with the same tiles, flags and epilogue shares one compiled kernel, which
// is what a first run on a GPU driver (about 0.14 s per GEMM kernel built on
// NVIDIA's OpenCL) pays for. Their index math is a multiply-add per load.
#define TM {{TM}}
#define TN {{TN}}
#define TK {{TK}}
#define WM {{WM}}
#define WN {{WN}}
// Which way consecutive work-items walk a tile when loading it: along the
// operand's unit-stride axis, so global reads coalesce.
#define A_K_FAST {{A_K_FAST}}
#define B_N_FAST {{B_N_FAST}}
// 1 when K is a multiple of TK: no bounds checks along K. (Rows and columns
// are always checked, a compare per load: flags for them too would split
// the GEMMs that share a kernel four ways.)
#define EVEN_K {{EVEN_K}}
// Macros, and helpers named after the kernel: several kernels may share one
// program (core/runtime/together.h), which #undefs each one's macros after it.
#define idx_t {{IDX}}
// The elementwise ops fused after the product (bias, batch-norm, activation,
// residual add): every element of C is stored as epilogue(sum, ...).
#define epilogue {{NAME}}_epilogue
{{EPILOGUE}}

#define TX (TN / WN)
#define TY (TM / WM)
#define THREADS (TX * TY)
#define LOADS_A (TM * TK / THREADS)
#define LOADS_B (TK * TN / THREADS)
#define NTILES ((K + TK - 1) / TK)
// Rows of the local tiles are padded by one float4 to spread the transposing
// stores of A over more banks while keeping float4 reads aligned.
#define AROW (TM / 4 + 1)
#define BROW (TN / 4 + 1)

// Bounds tests; the one along K vanishes when K is a multiple of TK.
#define IN_M(i) ((i) < M)
#define IN_N(i) ((i) < N)
#if EVEN_K
#define IN_K(i) 1
#else
#define IN_K(i) ((i) < K)
#endif
#define ROW_HAS_4(i) ((i) + 3 < N)

__kernel __attribute__((reqd_work_group_size(TX, TY, 1))) void {{NAME}}(__global float* restrict C,
                                                                       __global const float* restrict A,
                                                                       __global const float* restrict B
                                                                           EPILOGUE_PARAMS,
                                                                       const idx_t M, const idx_t N,
                                                                       const idx_t K, const idx_t SA0,
                                                                       const idx_t SA1, const idx_t SA2,
                                                                       const idx_t SB0, const idx_t SB1,
                                                                       const idx_t SB2) {
  __local float4 As[2 * TK * AROW];
  __local float4 Bs[2 * TK * BROW];

  const int tx = get_local_id(0);
  const int ty = get_local_id(1);
  const int tid = ty * TX + tx;
  const int m0 = get_group_id(1) * TM;
  const int n0 = get_group_id(0) * TN;
  const idx_t batch = get_group_id(2);
  __global const float* Ab = A + batch * (idx_t)SA0;
  __global const float* Bb = B + batch * (idx_t)SB0;

  float ra[LOADS_A];
  float rb[LOADS_B];
  float4 acc[WM][WN / 4];
  for (int i = 0; i < WM; ++i)
    for (int j = 0; j < WN / 4; ++j) acc[i][j] = (float4)(0.0f);

#if A_K_FAST
#define A_TILE_M(e) ((e) / TK)
#define A_TILE_K(e) ((e) % TK)
#else
#define A_TILE_M(e) ((e) % TM)
#define A_TILE_K(e) ((e) / TM)
#endif
#if B_N_FAST
#define B_TILE_N(e) ((e) % TN)
#define B_TILE_K(e) ((e) / TN)
#else
#define B_TILE_N(e) ((e) / TK)
#define B_TILE_K(e) ((e) % TK)
#endif

  // Global -> registers for the slice starting at k0.
#define LOAD_SLICE(k0)                                                                          \
  for (int l = 0; l < LOADS_A; ++l) {                                                           \
    const int e = tid + l * THREADS;                                                            \
    const int gm = m0 + A_TILE_M(e), gk = (k0) + A_TILE_K(e);                                   \
    ra[l] = (IN_M(gm) && IN_K(gk)) ? Ab[gm * (idx_t)SA1 + gk * (idx_t)SA2] : 0.0f;         \
  }                                                                                             \
  for (int l = 0; l < LOADS_B; ++l) {                                                           \
    const int e = tid + l * THREADS;                                                            \
    const int gn = n0 + B_TILE_N(e), gk = (k0) + B_TILE_K(e);                                   \
    rb[l] = (IN_N(gn) && IN_K(gk)) ? Bb[gk * (idx_t)SB1 + gn * (idx_t)SB2] : 0.0f;         \
  }

  // Registers -> local buffer `buf`, A stored k-major so a row of the
  // work-item's results reads as float4.
#define STORE_SLICE(buf)                                                                 \
  {                                                                                      \
    __local float* as = (__local float*)(As + (buf) * TK * AROW);                        \
    __local float* bs = (__local float*)(Bs + (buf) * TK * BROW);                        \
    for (int l = 0; l < LOADS_A; ++l) {                                                  \
      const int e = tid + l * THREADS;                                                   \
      as[A_TILE_K(e) * AROW * 4 + A_TILE_M(e)] = ra[l];                                  \
    }                                                                                    \
    for (int l = 0; l < LOADS_B; ++l) {                                                  \
      const int e = tid + l * THREADS;                                                   \
      bs[B_TILE_K(e) * BROW * 4 + B_TILE_N(e)] = rb[l];                                  \
    }                                                                                    \
  }

  if (NTILES > 0) {
    LOAD_SLICE(0)
    STORE_SLICE(0)
  }
  barrier(CLK_LOCAL_MEM_FENCE);

  for (int t = 0; t < NTILES; ++t) {
    const int buf = t & 1;
    const int more = t + 1 < NTILES;
    if (more) {
      LOAD_SLICE((t + 1) * TK)
    }
    __local const float4* as = As + buf * TK * AROW;
    __local const float4* bs = Bs + buf * TK * BROW;
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      // Work-item rows are (ty + i*TY)*4 + 0..3, columns (tx + j*TX)*4 + 0..3:
      // neighbouring work-items read neighbouring float4s, without conflicts.
      float4 a[WM / 4], b[WN / 4];
      for (int i = 0; i < WM / 4; ++i) a[i] = as[kk * AROW + ty + i * TY];
      for (int j = 0; j < WN / 4; ++j) b[j] = bs[kk * BROW + tx + j * TX];
      for (int i = 0; i < WM / 4; ++i) {
        for (int j = 0; j < WN / 4; ++j) {
          acc[4 * i + 0][j] = fma((float4)(a[i].x), b[j], acc[4 * i + 0][j]);
          acc[4 * i + 1][j] = fma((float4)(a[i].y), b[j], acc[4 * i + 1][j]);
          acc[4 * i + 2][j] = fma((float4)(a[i].z), b[j], acc[4 * i + 2][j]);
          acc[4 * i + 3][j] = fma((float4)(a[i].w), b[j], acc[4 * i + 3][j]);
        }
      }
    }
    if (more) {
      STORE_SLICE(buf ^ 1)
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  __global float* Cb = C + batch * ((idx_t)M * N);
  for (int i = 0; i < WM / 4; ++i) {
    for (int r = 0; r < 4; ++r) {
      const int gm = m0 + (ty + i * TY) * 4 + r;
      if (!IN_M(gm)) continue;
      const idx_t row_flat = (batch * M + gm) * N;
      for (int j = 0; j < WN / 4; ++j) {
        const int gn = n0 + (tx + j * TX) * 4;
        float4 v = acc[4 * i + r][j];
        if (gn + 0 < N) v.x = epilogue(v.x, batch, gm, gn + 0, row_flat + gn + 0, A, B EPILOGUE_ARGS);
        if (gn + 1 < N) v.y = epilogue(v.y, batch, gm, gn + 1, row_flat + gn + 1, A, B EPILOGUE_ARGS);
        if (gn + 2 < N) v.z = epilogue(v.z, batch, gm, gn + 2, row_flat + gn + 2, A, B EPILOGUE_ARGS);
        if (gn + 3 < N) v.w = epilogue(v.w, batch, gm, gn + 3, row_flat + gn + 3, A, B EPILOGUE_ARGS);
        __global float* out = Cb + gm * (idx_t)N + gn;
        if (ROW_HAS_4(gn)) {
          vstore4(v, 0, out);
        } else {
          if (gn + 0 < N) out[0] = v.x;
          if (gn + 1 < N) out[1] = v.y;
          if (gn + 2 < N) out[2] = v.z;
        }
      }
    }
  }
}
