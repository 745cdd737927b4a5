// Tiled single-precision GEMM in CUDA C++, specialised with constants by
// core/codegen/gemm_cuda.cpp and compiled by NVRTC:
//   C[b, m, n] = epilogue(sum_k A[b*SA0 + m*SA1 + k*SA2] * B[b*SB0 + k*SB1 + n*SB2])
// C is contiguous (batch x M x N). A block of TX x TY threads computes a
// TM x TN tile of C; each thread keeps WM x WN sums in registers, as WM/4 x
// WN/4 groups of 4 x 4 spread over the tile so that a warp's shared-memory
// reads are broadcasts (A) or consecutive float4s (B). The K loop walks
// TK-deep slices staged in shared memory, double buffered: the next slice's
// global loads are issued before the current one is multiplied, and one
// barrier per slice suffices. Every size and stride is a constant, so the
// compiler folds the index math and drops the bounds tests a tile does not
// need. A convolution's B is read from its image (GATHER), never from stored
// im2col columns.
// TENSOR (sm_80 and later): the same slices are multiplied on the tensor
// cores instead, in float32 accuracy: each operand is split into a TF32 part
// and the TF32-rounded rest (x = hi + lo to about 2^-22), and a warp sums
// hi*hi + hi*lo + lo*hi per 16 x 8 x 8 step (mma.sync), dropping only lo*lo.
// A warp's tile of C is WM*WN x 32, so a thread keeps WM x WN sums as in the
// other form.
typedef {{IDX}} idx_t;
constexpr idx_t M = {{M}}, N = {{N}}, K = {{K}};
constexpr idx_t SA0 = {{SA0}}, SA1 = {{SA1}}, SA2 = {{SA2}};
constexpr idx_t SB0 = {{SB0}}, SB1 = {{SB1}}, SB2 = {{SB2}};
constexpr int TM = {{TM}}, TN = {{TN}}, TK = {{TK}}, WM = {{WM}}, WN = {{WN}};
// How a tile is read from global memory: 0 one float at a time, walking the
// operand's smaller stride; 1 float4s along its unit-stride inner axis (A: k,
// B: n); 2 float4s along its unit-stride outer axis (A: m, B: k). The
// renderer picks a float4 form only when every float4 is aligned and lies
// wholly inside or wholly outside the matrix.
constexpr int A_VEC = {{A_VEC}}, B_VEC = {{B_VEC}};
constexpr bool A_K_FAST = {{A_K_FAST}}, B_N_FAST = {{B_N_FAST}};
constexpr bool TENSOR = {{TENSOR}};
// GATHER: B is a convolution's image read through its window (ConvGather in
// core/ops.h), not im2col columns: B[b, k, n] is channel k / (GKH * GKW) of
// image b (SB0 apart) at the row and column that output n = oh * GOW + ow
// reads at tap k, zero in the padding. SB1 and SB2 are then unused.
constexpr bool GATHER = {{GATHER}};
constexpr idx_t GH = {{GH}}, GW = {{GW}}, GKH = {{GKH}}, GKW = {{GKW}}, GSH = {{GSH}}, GSW = {{GSW}};
constexpr idx_t GDH = {{GDH}}, GDW = {{GDW}}, GPT = {{GPT}}, GPL = {{GPL}}, GOW = {{GOW}};

// The elementwise ops fused after the product (bias, batch-norm, activation,
// residual add): every element of C is stored as epilogue(sum, ...).
{{EPILOGUE}}

constexpr int TX = TN / WN, TY = TM / WM, THREADS = TX * TY;
// Padded rows: fewer bank conflicts on the transposing stores; with TENSOR,
// rows 8 banks apart, so that a warp's fragment loads (rows k..k+3, columns
// c..c+7) hit 32 banks.
constexpr int APAD = TM + (TENSOR ? 8 : 4), BPAD = TN + (TENSOR ? 8 : 4);
// TENSOR: warps of WTM x WTN sums over the tile, WARPS_N of them across.
constexpr int WTM = WM * WN, WTN = 32, WARPS_N = TN / WTN, MI = WTM / 16, NI = WTN / 8;
static_assert(!TENSOR || (TK % 8 == 0 && TN % WTN == 0 && TM % WTM == 0 && WTM % 16 == 0 &&
                          WARPS_N * (TM / WTM) * 32 == THREADS),
              "the tile does not divide into warps of WM*WN x 32 sums");
constexpr int A_ITEMS = A_VEC ? TM * TK / 4 / THREADS : TM * TK / THREADS;
constexpr int B_ITEMS = B_VEC ? TK * TN / 4 / THREADS : TK * TN / THREADS;
constexpr idx_t NTILES = (K + TK - 1) / TK;

// Loads of one slice into registers, then stores of them into shared memory.
struct Slice {
  float4 a[A_VEC ? A_ITEMS : 1], b[B_VEC ? B_ITEMS : 1];
  float as[A_VEC ? 1 : A_ITEMS], bs[B_VEC ? 1 : B_ITEMS];
};

static __device__ __forceinline__ float4 load4(const float* p, bool inside) {
  return inside ? *reinterpret_cast<const float4*>(p) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// x as a TF32 value (round to nearest, ties away), and what rounding left
// (rounded too; 0 for an infinite or NaN x, which hi carries).
static __device__ __forceinline__ void split_tf32(float x, unsigned& hi, unsigned& lo) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
  const float rest = fabsf(x) <= 3.40282347e38f ? x - __uint_as_float(hi) : 0.f;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(rest));
}

// d += a (16 x 8, row-major fragment) * b (8 x 8, column-major fragment).
static __device__ __forceinline__ void mma_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// B[k, n] of a gathered B (GATHER), or zero outside the product.
static __device__ __forceinline__ float gathered(const float* __restrict__ image, idx_t k, idx_t n) {
  constexpr idx_t TAPS = GKH * GKW;
  const idx_t c = k / TAPS, i = k % TAPS / GKW, j = k % GKW;
  const idx_t y = n / GOW * GSH + i * GDH - GPT, x = n % GOW * GSW + j * GDW - GPL;
  return k < K && n < N && y >= 0 && y < GH && x >= 0 && x < GW ? image[(c * GH + y) * GW + x] : 0.f;
}

static __device__ __forceinline__ void load_slice(Slice& s, const float* __restrict__ A, const float* __restrict__ B,
                                                  int tid, int m0, int n0, idx_t k0) {
#pragma unroll
  for (int l = 0; l < A_ITEMS; ++l) {
    const int e = tid + l * THREADS;
    if constexpr (A_VEC == 1) {  // e -> (row m, float4 of k)
      const int m = e / (TK / 4), k = (e % (TK / 4)) * 4;
      s.a[l] = load4(A + (m0 + m) * SA1 + (k0 + k), m0 + m < M && k0 + k < K);
    } else if constexpr (A_VEC == 2) {  // e -> (k, float4 of m)
      const int k = e / (TM / 4), m = (e % (TM / 4)) * 4;
      s.a[l] = load4(A + (m0 + m) + (k0 + k) * SA2, m0 + m < M && k0 + k < K);
    } else {
      const int m = A_K_FAST ? e / TK : e % TM, k = A_K_FAST ? e % TK : e / TM;
      s.as[l] = (m0 + m < M && k0 + k < K) ? A[(m0 + m) * SA1 + (k0 + k) * SA2] : 0.f;
    }
  }
#pragma unroll
  for (int l = 0; l < B_ITEMS; ++l) {
    const int e = tid + l * THREADS;
    if constexpr (B_VEC == 1) {  // e -> (k, float4 of n)
      const int k = e / (TN / 4), n = (e % (TN / 4)) * 4;
      s.b[l] = load4(B + (k0 + k) * SB1 + (n0 + n), n0 + n < N && k0 + k < K);
    } else if constexpr (B_VEC == 2) {  // e -> (n, float4 of k)
      const int n = e / (TK / 4), k = (e % (TK / 4)) * 4;
      s.b[l] = load4(B + (k0 + k) + (n0 + n) * SB2, n0 + n < N && k0 + k < K);
    } else if constexpr (GATHER) {  // consecutive threads read consecutive outputs' pixels
      const int n = e % TN, k = e / TN;
      s.bs[l] = gathered(B, k0 + k, n0 + n);
    } else {
      const int n = B_N_FAST ? e % TN : e / TK, k = B_N_FAST ? e / TN : e % TK;
      s.bs[l] = (n0 + n < N && k0 + k < K) ? B[(k0 + k) * SB1 + (n0 + n) * SB2] : 0.f;
    }
  }
}

static __device__ __forceinline__ void store_slice(const Slice& s, float (*as)[APAD], float (*bs)[BPAD], int tid) {
#pragma unroll
  for (int l = 0; l < A_ITEMS; ++l) {
    const int e = tid + l * THREADS;
    if constexpr (A_VEC == 1) {
      const int m = e / (TK / 4), k = (e % (TK / 4)) * 4;
      as[k + 0][m] = s.a[l].x, as[k + 1][m] = s.a[l].y, as[k + 2][m] = s.a[l].z, as[k + 3][m] = s.a[l].w;
    } else if constexpr (A_VEC == 2) {
      const int k = e / (TM / 4), m = (e % (TM / 4)) * 4;
      *reinterpret_cast<float4*>(&as[k][m]) = s.a[l];
    } else {
      const int m = A_K_FAST ? e / TK : e % TM, k = A_K_FAST ? e % TK : e / TM;
      as[k][m] = s.as[l];
    }
  }
#pragma unroll
  for (int l = 0; l < B_ITEMS; ++l) {
    const int e = tid + l * THREADS;
    if constexpr (B_VEC == 1) {
      const int k = e / (TN / 4), n = (e % (TN / 4)) * 4;
      *reinterpret_cast<float4*>(&bs[k][n]) = s.b[l];
    } else if constexpr (B_VEC == 2) {
      const int n = e / (TK / 4), k = (e % (TK / 4)) * 4;
      bs[k + 0][n] = s.b[l].x, bs[k + 1][n] = s.b[l].y, bs[k + 2][n] = s.b[l].z, bs[k + 3][n] = s.b[l].w;
    } else {
      const int n = B_N_FAST ? e % TN : e / TK, k = B_N_FAST ? e / TN : e % TK;
      bs[k][n] = s.bs[l];
    }
  }
}

// TENSOR: the 4 sums of this thread's share of fragment (mi, ni) of its
// warp's tile: acc's elements (mi * NI + ni) * 4 on, in row-major order.
static __device__ __forceinline__ float* fragment_sums(float (&acc)[WM][WN], int mi, int ni) {
  return &acc[(mi * NI + ni) * 4 / WN][(mi * NI + ni) * 4 % WN];
}

// One slice's products into acc on the tensor cores (TENSOR): this thread
// is (grp, tig) of the warp whose tile starts at (wm0, wn0); each cell is
// split into its TF32 part and its rest as its fragment is read.
static __device__ __forceinline__ void multiply_tensor(float (&acc)[WM][WN], const float (*as)[APAD],
                                                       const float (*bs)[BPAD], int wm0, int wn0, int grp, int tig) {
#pragma unroll
  for (int kk = 0; kk < TK; kk += 8) {
    // Fragments: B's rows tig and tig + 4, column grp; then each of A's
    // (rows grp and grp + 8, columns tig and tig + 4) in turn, so that
    // only one is live beside B's.
    unsigned bhi[NI][2], blo[NI][2];
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int n = wn0 + ni * 8 + grp;
      split_tf32(bs[kk + tig][n], bhi[ni][0], blo[ni][0]);
      split_tf32(bs[kk + tig + 4][n], bhi[ni][1], blo[ni][1]);
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m = wm0 + mi * 16 + grp;
      unsigned ahi[4], alo[4];
      split_tf32(as[kk + tig][m], ahi[0], alo[0]);
      split_tf32(as[kk + tig][m + 8], ahi[1], alo[1]);
      split_tf32(as[kk + tig + 4][m], ahi[2], alo[2]);
      split_tf32(as[kk + tig + 4][m + 8], ahi[3], alo[3]);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        float* d = fragment_sums(acc, mi, ni);
        mma_tf32(d, alo, bhi[ni]);  // the small terms first
        mma_tf32(d, ahi, blo[ni]);
        mma_tf32(d, ahi, bhi[ni]);
      }
    }
  }
}

// One slice's products into acc on the FMA units: thread (tx, ty) reads
// float4s of A's rows and B's columns spread over the tile.
static __device__ __forceinline__ void multiply_fma(float (&acc)[WM][WN], const float (*as)[APAD],
                                                    const float (*bs)[BPAD], int tx, int ty) {
#pragma unroll
  for (int kk = 0; kk < TK; ++kk) {
    float4 a[WM / 4], b[WN / 4];
#pragma unroll
    for (int i = 0; i < WM / 4; ++i) a[i] = *reinterpret_cast<const float4*>(&as[kk][(ty + i * TY) * 4]);
#pragma unroll
    for (int j = 0; j < WN / 4; ++j) b[j] = *reinterpret_cast<const float4*>(&bs[kk][(tx + j * TX) * 4]);
#pragma unroll
    for (int i = 0; i < WM / 4; ++i) {
      const float ar[4] = {a[i].x, a[i].y, a[i].z, a[i].w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < WN / 4; ++j) {
          float* c = &acc[4 * i + r][4 * j];
          c[0] = fmaf(ar[r], b[j].x, c[0]);
          c[1] = fmaf(ar[r], b[j].y, c[1]);
          c[2] = fmaf(ar[r], b[j].z, c[2]);
          c[3] = fmaf(ar[r], b[j].w, c[3]);
        }
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) {{NAME}}(float* __restrict__ C, const float* __restrict__ A,
                                                               const float* __restrict__ B EPILOGUE_PARAMS) {
  __shared__ __align__(16) float As[2][TK][APAD];
  __shared__ __align__(16) float Bs[2][TK][BPAD];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
  const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
  const idx_t batch = blockIdx.z;
  const float* __restrict__ Ab = A + batch * SA0;
  const float* __restrict__ Bb = B + batch * SB0;

  float acc[WM][WN];
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j) acc[i][j] = 0.f;
  // TENSOR: this thread's place in its warp's fragments (PTX's groupID and
  // threadID_in_group) and the warp's tile; fragment_sums says where in acc.
  const int lane = tid % 32, grp = lane / 4, tig = lane % 4;
  const int wm0 = tid / 32 / WARPS_N * WTM, wn0 = tid / 32 % WARPS_N * WTN;

  Slice s;
  if (NTILES > 0) {
    load_slice(s, Ab, Bb, tid, m0, n0, 0);
    store_slice(s, As[0], Bs[0], tid);
  }
  __syncthreads();
  for (idx_t t = 0; t < NTILES; ++t) {
    const int buf = int(t & 1);
    const bool more = t + 1 < NTILES;
    if (more) load_slice(s, Ab, Bb, tid, m0, n0, (t + 1) * TK);
    if constexpr (TENSOR)
      multiply_tensor(acc, As[buf], Bs[buf], wm0, wn0, grp, tig);
    else
      multiply_fma(acc, As[buf], Bs[buf], tx, ty);
    if (more) store_slice(s, As[buf ^ 1], Bs[buf ^ 1], tid);
    __syncthreads();
  }

  float* __restrict__ Cb = C + batch * (M * N);
  if constexpr (TENSOR) {
    // Fragment element r sits at row grp + 8 * (r / 2), column 2 * tig + r % 2.
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const float* d = fragment_sums(acc, mi, ni);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const idx_t gm = m0 + wm0 + mi * 16 + grp + 8 * h, gn = n0 + wn0 + ni * 8 + 2 * tig;
          if (gm >= M) continue;
          float* out = Cb + gm * N + gn;
          if (gn < N) out[0] = epilogue(d[2 * h], batch, gm, gn, A, B EPILOGUE_ARGS);
          if (gn + 1 < N) out[1] = epilogue(d[2 * h + 1], batch, gm, gn + 1, A, B EPILOGUE_ARGS);
        }
      }
  } else {
#pragma unroll
    for (int i = 0; i < WM / 4; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const idx_t gm = m0 + (ty + i * TY) * 4 + r;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < WN / 4; ++j) {
          const idx_t gn = n0 + (tx + j * TX) * 4;
          float v[4];
#pragma unroll
          for (int q = 0; q < 4; ++q)
            v[q] = gn + q < N ? epilogue(acc[4 * i + r][4 * j + q], batch, gm, gn + q, A, B EPILOGUE_ARGS) : 0.f;
          float* out = Cb + gm * N + gn;
          if (N % 4 == 0 && gn + 3 < N) {
            *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q)
              if (gn + q < N) out[q] = v[q];
          }
        }
      }
  }
}
