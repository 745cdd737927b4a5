// Specialises kernels/gemm.cl for one GEMM shape and one OpenCL device.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/codegen/templates.h"
#include "core/settings.h"

namespace tl {

namespace {

// Largest tile first: 128x128 with 8x8 per work-item is what a big GPU needs
// to reach its FMA rate; smaller ones fit small devices and small problems
// (a 128x128 tile on a 64x64 product would idle three quarters of the work).
// PoCL-style CPU devices run a work-group as loops over work-items, so a
// 64x64 tile with 4x4 per item keeps the working set in L1/L2. The tiles
// that fit the device, in that order.
std::vector<GpuTiles> fitting_tiles(const DeviceInfo& info) {
  static const std::vector<GpuTiles> gpu = {{128, 128, 16, 8, 8}, {64, 64, 16, 4, 4}, {32, 32, 8, 4, 4}, {16, 16, 8, 4, 4}};
  static const std::vector<GpuTiles> cpu = {{64, 64, 16, 4, 4}, {32, 32, 8, 4, 4}, {16, 16, 8, 4, 4}};
  const std::vector<GpuTiles>& table = info.kind == "GPU" ? gpu : cpu;
  const uint64_t local = info.local_memory ? info.local_memory : 16 * 1024;
  const size_t max_group = std::max<size_t>(1, info.max_work_group);
  std::vector<GpuTiles> out;
  // Two buffers of A and B slices in local memory, each row padded by one float4.
  for (const GpuTiles& t : table)
    if (2ull * t.tk * ((t.tm + 4) + (t.tn + 4)) * sizeof(float) <= local && size_t(t.threads()) <= max_group)
      out.push_back(t);
  if (out.empty()) out.push_back(table.back());
  return out;
}

// A CPU device: the largest fitting tile. A GPU: pick_gpu_tiles's.
GpuTiles pick_tiles(const GemmShape& s, const DeviceInfo& info, const std::vector<GpuTiles>& fitting) {
  return info.kind == "GPU" ? pick_gpu_tiles(s, info, fitting) : fitting.front();
}

// The vector width of kernels/gemm_regs.cl. PoCL reports its SIMD width as
// the preferred one (4 floats on SSE and NEON, 8 on AVX2, 16 on AVX-512); a
// device that reports 1 or 2 vectorises across work-items itself, so it gets
// 16 lanes for its compiler to split.
int register_vector_width(const DeviceInfo& info) {
  const int preferred = info.preferred_vector_width;
  return preferred >= 16 || preferred < 4 ? 16 : preferred >= 8 ? 8 : 4;
}

// A CPU device (PoCL) gets kernels/gemm_regs.cl: registers instead of local
// memory, vectors along whichever operand axis has unit stride.
// `kc_cap` (0: 256) caps the K rows of a panel.
TemplateKernel render_gemm_registers(const GemmShape& s, const std::string& name, const DeviceInfo& info,
                                     const Dialect& d, bool wide, int64_t kc_cap = 0) {
  const int vw = register_vector_width(info);
  const char* layout = "VEC_N";
  if (s.b_strides[2] != 1 && s.a_strides[1] == 1) layout = "VEC_M";
  if (s.b_strides[2] != 1 && s.a_strides[1] != 1 && s.a_strides[2] == 1 && s.b_strides[1] == 1 && s.k >= vw)
    layout = "DOT";
  const bool dot = std::string(layout) == "DOT";
  // The MR x NV accumulators, the NV vectors of B and (DOT) one of A must fit
  // the vector registers, or every k step spills them. 16 floats means
  // AVX-512 and its 32 registers: 6 x 4 = 24 hold C, and a k step is 4 vector
  // loads and 6 broadcasts for 24 fma. Narrower vectors mean 16 registers
  // (AVX2, SSE; NEON has 32 but is served well enough): 6 x 2 = 12, the tile
  // of kernels/gemm_cpu.c, and 4 x 3 for DOT.
  const int mr = dot ? 4 : 6, nv = vw == 16 ? 4 : dot ? 3 : 2;
  // KC rows of the panel in local memory (64 KiB at 256 with 64 columns),
  // fewer when the device offers less.
  const int64_t row_bytes = vw * nv * int64_t(sizeof(float));
  const int64_t local = info.local_memory ? int64_t(info.local_memory) : 32 * 1024;
  const int64_t kc = std::clamp<int64_t>(std::min<int64_t>(s.k, local / row_bytes), 1, kc_cap > 0 ? kc_cap : 256);
  auto values = gemm_values(s, name, wide, d);
  values.insert({{"MR", std::to_string(mr)},
                 {"NV", std::to_string(nv)},
                 {"KC", std::to_string(kc)},
                 {"VW", std::to_string(vw)},
                 {"LAYOUT", layout}});
  TemplateKernel out;
  out.source = specialise(embedded_kernel("gemm_regs.cl"), values);
  const bool vec_m = std::string(layout) == "VEC_M";
  const int64_t rows = vec_m ? s.n : s.m, cols = vec_m ? s.m : s.n;
  const int64_t row_blocks = std::max<int64_t>(1, (rows + mr - 1) / mr);
  const int64_t col_blocks = std::max<int64_t>(1, (cols + (dot ? nv : vw * nv) - 1) / (dot ? nv : vw * nv));
  if (dot) {
    out.global[0] = row_blocks;
    out.global[1] = col_blocks;
    out.local[0] = out.local[1] = 0;
  } else {
    // A work-group is up to 16 row blocks of one column block (they share its
    // panel in local memory).
    out.global[0] = col_blocks;
    out.global[1] = row_blocks;
    out.local[0] = 1;
    out.local[1] = std::min<int64_t>(row_blocks, 16);
  }
  out.global[2] = s.batch;
  out.local[2] = 1;
  out.label = "default";
  return out;
}

// A few renderings for the tuner (core/tune.h): shorter K panels, and (when
// row blocks share a panel) fewer row blocks per work-group.
std::vector<TemplateKernel> register_candidates(const GemmShape& s, const std::string& name, const DeviceInfo& info,
                                                const Dialect& d, bool wide, const TemplateKernel& base) {
  std::vector<TemplateKernel> out;
  for (int64_t kc : {64, 128}) {
    if (kc >= s.k) continue;
    TemplateKernel t = render_gemm_registers(s, name, info, d, wide, kc);
    if (t.source == base.source) continue;
    t.label = "kc=" + std::to_string(kc);
    out.push_back(std::move(t));
  }
  if (base.local[1] > 4)
    for (int64_t rows : {int64_t(4), int64_t(8)}) {
      if (rows >= base.local[1]) continue;
      TemplateKernel t = base;
      t.local[1] = rows;
      t.label = "group=" + std::to_string(rows) + " rows";
      out.push_back(std::move(t));
    }
  return out;
}

// kernels/gemm.cl with tiles `t`: work-groups share A and B slices in local
// memory, each work-item sums a WM x WN block of C. Its sizes and strides are
// arguments, so the kernel is named after its tiles, not the GEMM's shape.
TemplateKernel render_gemm_tiled(const GemmShape& s, const Dialect& d, const GpuTiles& t) {
  const bool wide = gemm_needs_wide_index(s, t.tm, t.tn, t.tk);
  auto str = [](int64_t v) { return std::to_string(v); };
  const std::string entry = "GEMM_tile_" + str(t.tm) + "x" + str(t.tn) + "x" + str(t.tk) + "_" + str(t.wm) + "x" +
                            str(t.wn);
  // Walk each operand's tile along its unit-stride (or smaller-stride) axis.
  TemplateKernel out = render_gpu_tiles("gemm.cl", s, entry, d, t,
                                        {{"A_K_FAST", std::abs(s.a_strides[2]) <= std::abs(s.a_strides[1]) ? "1" : "0"},
                                         {"B_N_FAST", std::abs(s.b_strides[2]) <= std::abs(s.b_strides[1]) ? "1" : "0"},
                                         {"EVEN_K", s.k % t.tk == 0 ? "1" : "0"}});
  out.entry = entry;
  // A stride along an axis of size 1 is never multiplied by more than 0:
  // passed as 0, it cannot overflow a 32-bit argument.
  auto along = [](int64_t size, int64_t stride) { return size > 1 ? stride : int64_t{0}; };
  out.ints = {s.m,
              s.n,
              s.k,
              along(s.batch, s.a_strides[0]),
              along(s.m, s.a_strides[1]),
              along(s.k, s.a_strides[2]),
              along(s.batch, s.b_strides[0]),
              along(s.k, s.b_strides[1]),
              along(s.n, s.b_strides[2])};
  out.int_bytes = wide ? 8 : 4;
  return out;
}

}  // namespace

TemplateKernel render_gemm_opencl(const GemmShape& shape, const std::string& name, const DeviceInfo& info,
                                  const Dialect& d) {
  check_gemm_shape(shape);
  GemmShape s = shape;
  s.epilogue.flat = true;  // both templates pass C's flat index to the epilogue
  // TINYLENS_GEMM=tiled forces the local-memory template on a CPU device too,
  // so CI's PoCL run also tests the kernel that GPUs get.
  if (info.kind == "CPU" && !setting_equals("TINYLENS_GEMM", "tiled")) {
    const GpuTiles t = pick_tiles(s, info, fitting_tiles(info));
    const bool wide = gemm_needs_wide_index(s, t.tm, t.tn, t.tk);
    TemplateKernel out = render_gemm_registers(s, name, info, d, wide);
    out.candidates = register_candidates(s, name, info, d, wide, out);
    return out;
  }
  // The tuner's candidates: every other tile that fits the device.
  const auto fitting = fitting_tiles(info);
  const GpuTiles chosen = pick_tiles(s, info, fitting);
  TemplateKernel out = render_gemm_tiled(s, d, chosen);
  for (const GpuTiles& t : fitting)
    if (!(t == chosen)) out.candidates.push_back(render_gemm_tiled(s, d, t));
  return out;
}

}  // namespace tl
