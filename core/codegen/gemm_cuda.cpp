// Specialises kernels/gemm.cu for one GEMM shape and one CUDA GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <string>

#include "core/codegen/templates.h"
#include "core/settings.h"

namespace tl {

namespace {

struct CudaTiles {
  int tm, tn, tk, wm, wn;
  int threads() const { return (tm / wm) * (tn / wn); }
};

// 128x128x8 measured 3.22 ms on a 4096 product on an H200 against 3.33
// for 128x128x16 and 3.48-3.72 for 64x128 and 128x64 (scripts/bench-gpu).
constexpr int64_t kBlocksPerUnit = 4;
constexpr CudaTiles kTiles[] = {{128, 128, 8, 8, 8}, {64, 64, 16, 4, 4}, {32, 32, 16, 4, 4}};

// Largest tile first (128x128 with 8x8 sums per thread is what reaches the
// FMA rate on a big GPU) among those that suit the product's shape
// (gpu_tile_suits), unless it would not give every streaming multiprocessor
// several blocks (kBlocksPerUnit): with one or two it waits on memory with
// nothing to switch to. Measured on an H200 with the tuner, Lite0's batch-64
// GEMMs (225 blocks of 128x128) ran 1.5-2.5x faster in 64x64 or 32x32
// tiles, while a 4096 product (1024 blocks) keeps 128x128.
// TINYLENS_CUDA_TILE=TMxTNxTKxWMxWN forces one, for benchmarking candidates.
CudaTiles pick_tiles(const GemmShape& s, const DeviceInfo& info, bool& forced_out) {
  forced_out = false;
  if (const char* forced = setting_value("TINYLENS_CUDA_TILE")) {
    CudaTiles t{};
    if (std::sscanf(forced, "%dx%dx%dx%dx%d", &t.tm, &t.tn, &t.tk, &t.wm, &t.wn) == 5 && t.wm % 4 == 0 &&
        t.wn % 4 == 0 && t.tm % t.wm == 0 && t.tn % t.wn == 0 && t.tk % 4 == 0 && t.threads() <= 1024 &&
        (t.tm * t.tk) % (4 * t.threads()) == 0 && (t.tn * t.tk) % (4 * t.threads()) == 0)
      return forced_out = true, t;
    throw std::invalid_argument(std::string("TINYLENS_CUDA_TILE='") + forced +
                                "': want TMxTNxTKxWMxWN with WM, WN, TK multiples of 4 and whole float4 loads");
  }
  const int64_t units = std::max(1, info.compute_units);
  const CudaTiles& last = kTiles[std::size(kTiles) - 1];
  for (const CudaTiles& t : kTiles) {
    if (&t == &last) break;
    if (!gpu_tile_suits(s, t.tm, t.tn)) continue;
    const int64_t blocks = ((s.m + t.tm - 1) / t.tm) * ((s.n + t.tn - 1) / t.tn) * std::max<int64_t>(1, s.batch);
    if (blocks >= kBlocksPerUnit * units) return t;
  }
  return last;
}

TemplateKernel render_tiles(const GemmShape& s, const std::string& name, const Dialect& d, const CudaTiles& t) {
  const int64_t* a = s.a_strides;
  const int64_t* b = s.b_strides;
  // float4 loads need every float4 aligned (the other strides multiples of
  // 4) and wholly inside or outside the matrix (its axis a multiple of 4).
  auto aligned = [](int64_t x, int64_t y) { return x % 4 == 0 && y % 4 == 0; };
  int a_vec = 0, b_vec = 0;
  if (a[2] == 1 && s.k % 4 == 0 && aligned(a[0], a[1]))
    a_vec = 1;
  else if (a[1] == 1 && s.m % 4 == 0 && aligned(a[0], a[2]))
    a_vec = 2;
  if (b[2] == 1 && s.n % 4 == 0 && aligned(b[0], b[1]))
    b_vec = 1;
  else if (b[1] == 1 && s.k % 4 == 0 && aligned(b[0], b[2]))
    b_vec = 2;
  const bool wide = gemm_needs_wide_index(s, t.tm, t.tn, t.tk);
  auto values = gemm_values(s, name, wide, d);
  auto str = [](int64_t v) { return std::to_string(v); };
  values.insert({{"TM", str(t.tm)},
                 {"TN", str(t.tn)},
                 {"TK", str(t.tk)},
                 {"WM", str(t.wm)},
                 {"WN", str(t.wn)},
                 {"A_VEC", str(a_vec)},
                 {"B_VEC", str(b_vec)},
                 {"A_K_FAST", std::abs(a[2]) <= std::abs(a[1]) ? "true" : "false"},
                 {"B_N_FAST", std::abs(b[2]) <= std::abs(b[1]) ? "true" : "false"}});
  TemplateKernel out = tiled_gemm_kernel(specialise(embedded_kernel("gemm.cu"), values), s, t.tm, t.tn, t.wm, t.wn);
  out.label = "tile=" + tile_label(t.tm, t.tn, t.tk, t.wm, t.wn);
  return out;
}

}  // namespace

TemplateKernel render_gemm_cuda(const GemmShape& s, const std::string& name, const DeviceInfo& info,
                                const Dialect& d) {
  check_gemm_shape(s);
  bool forced = false;
  const CudaTiles chosen = pick_tiles(s, info, forced);
  TemplateKernel out = render_tiles(s, name, d, chosen);
  // The tuner's candidates: the other tiles of the table (none when forced).
  if (!forced)
    for (const CudaTiles& t : kTiles)
      if (t.tm != chosen.tm || t.tn != chosen.tn || t.tk != chosen.tk) out.candidates.push_back(render_tiles(s, name, d, t));
  return out;
}

}  // namespace tl
