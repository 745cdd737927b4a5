// Single-precision GEMM for OpenCL devices that are CPUs (PoCL and the like),
// specialised with constants by core/codegen/gemm_opencl.cpp:
//   C[b, m, n] = sum_k A[b*SA0 + m*SA1 + k*SA2] * B[b*SB0 + k*SB1 + n*SB2]
// A CPU runs a work-group as a loop over its work-items, so the tiling that
// pays on a GPU (many items cooperating on one tile, double buffering) only
// adds copies. Here each work-item keeps an MR x (VW*NV) block of C in vector
// registers: per k it takes one row segment of the B panel as NV vectors of
// VW floats and broadcasts MR values of A, the shape of a register-blocked CPU
// micro-kernel. VW is the device's vector width (16 on AVX-512, 8 on AVX2):
// wider vectors are split by LLVM into several registers each, and MR x NV
// accumulators that no longer fit the register file spill on every k step.
// The items of a work-group are row blocks of one column block and share its
// panel, copied KC rows at a time into local memory: contiguous, whatever the
// operand's strides, and free of the cache-set conflicts of a large row pitch.
//
// Three layouts, chosen on the host from the unit strides:
//   VEC_N: B walks N with unit stride -> vectors along N (the forward matmul).
//   VEC_M: A walks M with unit stride -> vectors along M, stored transposed.
//   DOT:   both walk K with unit stride (A times B transposed) -> vectors
//          along K, summed across lanes at the end.
// Any other layout uses VEC_N, whose panel copy then gathers.
#define M {{M}}
#define N {{N}}
#define K {{K}}
#define SA0 {{SA0}}
#define SA1 {{SA1}}
#define SA2 {{SA2}}
#define SB0 {{SB0}}
#define SB1 {{SB1}}
#define SB2 {{SB2}}
#define MR {{MR}}
#define NV {{NV}}
#define KC {{KC}}
#define VW {{VW}}
#define LAYOUT_{{LAYOUT}} 1
// Macros, and helpers named after the kernel: several kernels may share one
// program (core/runtime/together.h), which #undefs each one's macros after it.
#define idx_t {{IDX}}
// The elementwise ops fused after the product (bias, batch-norm, activation,
// residual add): every element of C is stored as epilogue(sum, ...).
#define epilogue {{NAME}}_epilogue
{{EPILOGUE}}

#define NR (VW * NV)
#define floatv float{{VW}}
#define vloadv vload{{VW}}
#define vstorev vstore{{VW}}

#if defined(LAYOUT_VEC_N) || defined(LAYOUT_VEC_M)
#if defined(LAYOUT_VEC_N)
// Rows of the block run along M (broadcast from A), vectors along N (from B).
#define ROWS M
#define COLS N
#define R_STRIDE SA1
#define RK_STRIDE SA2
#define C_STRIDE SB2
#define CK_STRIDE SB1
#define R_BASE A
#define C_BASE B
#define R_BATCH SA0
#define C_BATCH SB0
#else
// The same with the roles swapped: C^T = B^T A^T.
#define ROWS N
#define COLS M
#define R_STRIDE SB2
#define RK_STRIDE SB1
#define C_STRIDE SA1
#define CK_STRIDE SA2
#define R_BASE B
#define C_BASE A
#define R_BATCH SB0
#define C_BATCH SA0
#endif

__kernel void {{NAME}}(__global float* restrict C, __global const float* restrict A,
                       __global const float* restrict B EPILOGUE_PARAMS) {
  // The work-group's items share one column block: they copy its next KC
  // rows of the panel into local memory (contiguous, so unit-stride vector
  // loads whatever the operand's strides, and no cache-set conflicts from a
  // large row pitch), then each multiplies its own rows against it.
  __local float panel[KC * NR];
  // Column blocks are dimension 0, so consecutive work-groups reuse the same
  // rows of the other operand from cache while each brings its own panel.
  const int r0 = get_global_id(1) * MR;
  const int c0 = get_group_id(0) * NR;
  const idx_t batch = get_global_id(2);
  const int lid = get_local_id(1), lsize = get_local_size(1);
  __global const float* V = C_BASE + batch * (idx_t)C_BATCH + c0 * (idx_t)C_STRIDE;
  // Items past the last row still help to copy; they compute nothing.
  const int cols = min(NR, COLS - c0);
  // The last block of rows ends at the last row (it overlaps the block
  // before, whose rows it does not store again), and with fewer than MR rows
  // in all the last one repeats: every row it reads is valid and every row
  // offset below is a constant.
  const int first = max(0, min(r0, ROWS - MR));
  const int skip = r0 - first;  // rows of the block that an earlier one stores
  __global const float* R = R_BASE + batch * (idx_t)R_BATCH + first * (idx_t)R_STRIDE;

  floatv acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (floatv)(0.0f);

  for (int k0 = 0; k0 < K; k0 += KC) {
    const int kc = min(KC, K - k0);
    barrier(CLK_LOCAL_MEM_FENCE);
    // A row of the panel per item and turn: vector loads when the panel's
    // rows are contiguous in memory and whole.
    for (int kk = lid; kk < KC; kk += lsize) {
      __global const float* src = V + (k0 + kk) * (idx_t)CK_STRIDE;
      if (C_STRIDE == 1 && cols == NR && kk < kc) {
#pragma unroll
        for (int j = 0; j < NV; ++j) vstorev(vloadv(j, src), j, panel + kk * NR);
      } else {
        for (int c = 0; c < NR; ++c) panel[kk * NR + c] = (kk < kc && c < cols) ? src[c * (idx_t)C_STRIDE] : 0.0f;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (r0 < ROWS) {
      __global const float* a = R + k0 * (idx_t)RK_STRIDE;
      for (int kk = 0; kk < kc; ++kk, a += RK_STRIDE) {
        floatv v[NV];
#pragma unroll
        for (int j = 0; j < NV; ++j) v[j] = vloadv(j, panel + kk * NR);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          const floatv r = (floatv)(a[min(i, ROWS - 1) * R_STRIDE]);
#pragma unroll
          for (int j = 0; j < NV; ++j) acc[i][j] = fma(r, v[j], acc[i][j]);
        }
      }
    }
  }
  if (c0 >= COLS) return;

  const idx_t first_flat = batch * ((idx_t)M * N);  // C's flat index of this batch's first element
  __global float* out = C + first_flat;
  // acc goes to a private tile with constant indices (so it stays in
  // registers until here); the epilogue then runs once in a loop over the
  // stored rows and columns. Unrolled per lane, it was MR x NV x VW copies of
  // the epilogue: twice the LLVM time of the whole kernel on PoCL's first run.
  float tile[MR][NR];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) vstorev(acc[i][j], j, tile[i]);
  for (int i = skip; i < MR && first + i < ROWS; ++i) {
    const int r = first + i;
    for (int l = 0; l < cols; ++l) {
#if defined(LAYOUT_VEC_N)
      const int col = c0 + l;
      const idx_t at = r * (idx_t)N + col;
      out[at] = epilogue(tile[i][l], batch, r, col, first_flat + at, A, B EPILOGUE_ARGS);
#else
      const int row = c0 + l;
      const idx_t at = row * (idx_t)N + r;
      out[at] = epilogue(tile[i][l], batch, row, r, first_flat + at, A, B EPILOGUE_ARGS);
#endif
    }
  }
}
#endif

#if defined(LAYOUT_DOT)
// SA2 == 1 and SB1 == 1: each work-item computes MR x NV results (NV is the
// column count here), each as a floatv of partial sums over K.
__kernel void {{NAME}}(__global float* restrict C, __global const float* restrict A,
                       __global const float* restrict B EPILOGUE_PARAMS) {
  const int m0 = get_global_id(0) * MR;
  const int n0 = get_global_id(1) * NV;
  const idx_t batch = get_global_id(2);
  if (m0 >= M || n0 >= N) return;
  // As in the other layouts, the last block along each axis ends at the
  // edge (or repeats its last row when the axis is shorter than the block):
  // every row offset is a constant and every read is valid.
  const int m_first = max(0, min(m0, M - MR)), n_first = max(0, min(n0, N - NV));
  __global const float* a = A + batch * (idx_t)SA0 + m_first * (idx_t)SA1;
  __global const float* b = B + batch * (idx_t)SB0 + n_first * (idx_t)SB2;

  floatv acc[MR][NV];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < NV; ++j) acc[i][j] = (floatv)(0.0f);
  int k = 0;
  for (; k + VW <= K; k += VW) {
    floatv bv[NV];
#pragma unroll
    for (int j = 0; j < NV; ++j) bv[j] = vloadv(0, b + min(j, N - 1) * SB2 + k);
#pragma unroll
    for (int i = 0; i < MR; ++i) {
      const floatv av = vloadv(0, a + min(i, M - 1) * SA1 + k);
#pragma unroll
      for (int j = 0; j < NV; ++j) acc[i][j] = fma(av, bv[j], acc[i][j]);
    }
  }
  const idx_t first_flat = batch * ((idx_t)M * N);
  __global float* out = C + first_flat;
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int j = 0; j < NV; ++j) {
      const int row = m_first + i, col = n_first + j;
      if (row < m0 || row >= M || col < n0 || col >= N) continue;
      float lanes[VW];
      vstorev(acc[i][j], 0, lanes);
      float s = 0.0f;
      for (int l = 0; l < VW; ++l) s += lanes[l];
      for (int t = k; t < K; ++t) s = fma(a[min(i, M - 1) * SA1 + t], b[min(j, N - 1) * SB2 + t], s);
      const idx_t at = row * (idx_t)N + col;
      out[at] = epilogue(s, batch, row, col, first_flat + at, A, B EPILOGUE_ARGS);
    }
  }
}
#endif
