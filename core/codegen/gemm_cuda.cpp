// Specialises kernels/gemm.cu for one GEMM shape and one CUDA GPU.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "core/codegen/templates.h"
#include "core/settings.h"

namespace tl {

namespace {

// The tiles, largest first. 128x128 with 8x8 sums per thread is what
// reaches the FMA rate on a big product: 128x128x8 measured 3.22 ms on a 4096
// product on an H200 against 3.33 for 128x128x16 and 3.48-3.72 for 64x128
// and 128x64 (scripts/bench-gpu). The smaller ones keep every SM busy on
// products of few tiles; each was the fastest of 8 tiles on some of 34
// products from the zoo at batch 64, timed on an H100 (see pick_tiles).
const std::vector<GpuTiles> kTiles = {
    {128, 128, 8, 8, 8}, {128, 64, 8, 8, 8}, {64, 64, 8, 4, 8}, {32, 64, 16, 4, 4}, {32, 32, 16, 4, 4}};

// The first tile of kTiles that is not taller or wider than the product
// (rounded up to 32) and still gives each SM 1.5 blocks (128-row tiles) or 4
// (the smaller ones, as the rule before them asked of every tile); else the
// last. Over the 34 products (ViT's, Swin's and ConvNeXt's linear layers and
// attention, ResNet-18's and DenseNet-121's convolutions gathered and as
// im2col products), the tile it picks took 1.05x the time of the fastest
// tile (geometric mean; at worst 1.24x), where pick_gpu_tiles's rule (4
// blocks per SM, no more than 32x32 when K < 128) over its three tiles took
// 1.12x (at worst 1.64x): ResNet-18's last convolutions (512 x 49 outputs of
// 64 images) 0.68 ms instead of 1.12, DenseNet's 32-channel ones 0.69
// instead of 0.77 at 56x56. With 1.5 for the small tiles too, ViT at batch 1
// took 3.10 ms against 2.98 (32x64 instead of 32x32 at 2.5 blocks per SM).
GpuTiles pick_tiles(const GemmShape& s, const DeviceInfo& info) {
  auto up32 = [](int64_t v) { return (v + 31) / 32 * 32; };
  const int64_t units = std::max(1, info.compute_units);
  for (const GpuTiles& t : kTiles) {
    if (t.tm > up32(s.m) || t.tn > up32(s.n)) continue;
    const int64_t blocks = ((s.m + t.tm - 1) / t.tm) * ((s.n + t.tn - 1) / t.tn) * std::max<int64_t>(1, s.batch);
    if (t.tm == 128 ? 2 * blocks >= 3 * units : blocks >= 4 * units) return t;
  }
  return kTiles.back();
}

// TINYLENS_CUDA_TILE=TMxTNxTKxWMxWN forces a tile, for benchmarking candidates.
bool forced_tiles(GpuTiles& t) {
  const char* forced = setting_value("TINYLENS_CUDA_TILE");
  if (!forced) return false;
  if (std::sscanf(forced, "%dx%dx%dx%dx%d", &t.tm, &t.tn, &t.tk, &t.wm, &t.wn) == 5 && t.wm % 4 == 0 &&
      t.wn % 4 == 0 && t.tm % t.wm == 0 && t.tn % t.wn == 0 && t.tk % 4 == 0 && t.threads() <= 1024 &&
      (t.tm * t.tk) % (4 * t.threads()) == 0 && (t.tn * t.tk) % (4 * t.threads()) == 0)
    return true;
  throw std::invalid_argument(std::string("TINYLENS_CUDA_TILE='") + forced +
                              "': want TMxTNxTKxWMxWN with WM, WN, TK multiples of 4 and whole float4 loads");
}

// The template's GATHER values: a convolution's window over its image, or
// (B a plain matrix) ones that no code path reads.
std::map<std::string, std::string> gather_values(const ConvGather& g) {
  const bool on = g.active();
  auto v = [on](int64_t x) { return std::to_string(on ? x : 1); };
  return {{"GATHER", on ? "true" : "false"}, {"GH", v(g.height)},     {"GW", v(g.width)},
          {"GKH", v(g.kernel_h)},           {"GKW", v(g.kernel_w)}, {"GSH", v(g.stride_h)},
          {"GSW", v(g.stride_w)},           {"GDH", v(g.dilation_h)}, {"GDW", v(g.dilation_w)},
          {"GPT", on ? std::to_string(g.pad_top) : "0"}, {"GPL", on ? std::to_string(g.pad_left) : "0"},
          {"GOW", v(g.out_w)}};
}

// kernels/gemm.cu's TENSOR form: on a GPU with TF32 mma.sync (sm_80 on,
// "mma_tf32" among its extensions), for a tile that divides into warps of
// WM*WN x 32 sums (every tile of kTiles does), unless TINYLENS_CUDA_MATH=fp32.
// It sums in float32 accuracy on the tensor cores: three TF32 products per
// step (the operands split into a TF32 part and its rest), which an H100
// runs faster than one float32 multiply-add on its FMA units.
bool tensor_form(const DeviceInfo& info, const GpuTiles& t) {
  const auto& ext = info.extensions;
  if (std::find(ext.begin(), ext.end(), "mma_tf32") == ext.end() || setting_equals("TINYLENS_CUDA_MATH", "fp32"))
    return false;
  const int warp_m = t.wm * t.wn;
  return t.tk % 8 == 0 && t.tn % 32 == 0 && warp_m % 16 == 0 && t.tm % warp_m == 0 &&
         (t.tn / 32) * (t.tm / warp_m) * 32 == t.threads();
}

TemplateKernel render_tiles(const GemmShape& shape, const std::string& name, const Dialect& d, const GpuTiles& t,
                            bool tensor) {
  GemmShape s = shape;
  const bool gather = s.gather.active();
  // A gathered B is one image per batch item (none apart when there is one).
  if (gather) s.b_strides[0] = s.batch == 1 ? 0 : s.gather.channels * s.gather.height * s.gather.width;
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
  if (gather)
    b_vec = 0;  // one pixel at a time, along n
  else if (b[2] == 1 && s.n % 4 == 0 && aligned(b[0], b[1]))
    b_vec = 1;
  else if (b[1] == 1 && s.k % 4 == 0 && aligned(b[0], b[2]))
    b_vec = 2;
  auto values = gather_values(s.gather);
  values.insert({{"A_VEC", std::to_string(a_vec)},
                 {"B_VEC", std::to_string(b_vec)},
                 {"A_K_FAST", std::abs(a[2]) <= std::abs(a[1]) ? "true" : "false"},
                 {"B_N_FAST", gather || std::abs(b[2]) <= std::abs(b[1]) ? "true" : "false"},
                 {"TENSOR", tensor ? "true" : "false"}});
  return render_gpu_tiles("gemm.cu", s, name, d, t, std::move(values));
}

// kernels/depthwise.cu's blocks: TW columns by TY x R rows of outputs, TW x TY
// threads, R outputs a thread.
struct PlaneBlocks {
  int tw, ty, r;
  std::string label() const {
    return "planes=" + std::to_string(tw) + "x" + std::to_string(ty) + "x" + std::to_string(r);
  }
  bool operator==(const PlaneBlocks&) const = default;
};

// The input cells a block stages in shared memory (floats).
int64_t staged_cells(const ConvGather& g, const PlaneBlocks& p) {
  return ((p.ty * p.r - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1) *
         ((p.tw - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1);
}
constexpr int64_t kPlaneCellsMax = 48 * 1024 / 4;  // 48 KiB of shared memory a block

// Columns: the plane's width rounded up to a power of two, 8 to 32; R rows a
// thread (`r`), and as many rows of threads as the plane needs up to
// `threads`; R, then TY, shrink until the staged cells fit 48 KiB (a 7x7
// window at 56x56 stages 38 x 38 cells).
PlaneBlocks plane_blocks(const GemmShape& s, int r, int threads) {
  auto pow2 = [](int64_t v) {
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
  };
  const int64_t ow = s.gather.out_w, oh = s.n / s.gather.out_w;
  PlaneBlocks p{int(std::clamp<int64_t>(pow2(ow), 8, 32)), 1, r};
  p.ty = int(std::clamp<int64_t>(pow2((oh + r - 1) / r), 1, std::max(1, threads / p.tw)));
  while (staged_cells(s.gather, p) > kPlaneCellsMax && (p.r > 1 || p.ty > 1)) p.r > 1 ? p.r /= 2 : p.ty /= 2;
  return p;
}

// TINYLENS_CUDA_PLANES=TWxTYxR forces kernels/depthwise.cu's blocks, and
// rRtT plane_blocks(shape, R, T) for every shape, for benchmarking candidates.
bool forced_planes(const GemmShape& s, PlaneBlocks& p) {
  const char* forced = setting_value("TINYLENS_CUDA_PLANES");
  if (!forced) return false;
  int r = 0, threads = 0;
  if (std::sscanf(forced, "r%dt%d", &r, &threads) == 2 && r > 0 && r <= 16 && threads >= 1 && threads <= 1024)
    p = plane_blocks(s, r, threads);
  else if (std::sscanf(forced, "%dx%dx%d", &p.tw, &p.ty, &p.r) != 3)
    p = PlaneBlocks{0, 0, 0};
  const bool fits = staged_cells(s.gather, p) <= kPlaneCellsMax;
  if (p.tw > 0 && p.ty > 0 && p.r > 0 && p.tw * p.ty <= 1024 && p.r <= 16 && fits) return true;
  throw std::invalid_argument(std::string("TINYLENS_CUDA_PLANES='") + forced +
                              "': want TWxTYxR (TW x TY <= 1024 threads, R <= 16, the staged cells within 48 KiB) "
                              "or rRtT");
}

TemplateKernel render_planes_with(const GemmShape& s, const std::string& name, const Dialect& d,
                                  const PlaneBlocks& p) {
  const ConvGather& g = s.gather;
  if (staged_cells(g, p) > kPlaneCellsMax)
    throw std::invalid_argument(name + ": a " + std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) +
                                " window does not fit kernels/depthwise.cu's shared memory");
  const int64_t ow = g.out_w, oh = s.n / g.out_w;
  GemmShape sb = s;
  sb.b_strides[0] = g.height * g.width;  // one plane per batch item
  auto values = gather_values(g);
  values.merge(gemm_values(sb, name, gemm_needs_wide_index(sb, 1, 1, 1), d));
  values["MAX"] = g.max ? "true" : "false";
  values["A_PERIOD"] = std::to_string(s.a_period);
  values["TW"] = std::to_string(p.tw), values["TY"] = std::to_string(p.ty), values["R"] = std::to_string(p.r);
  TemplateKernel out;
  out.source = specialise(embedded_kernel("depthwise.cu"), values);
  out.global[0] = (ow + p.tw - 1) / p.tw * p.tw * s.batch;  // the batch on x (kernels/depthwise.cu's TILES_X)
  out.global[1] = (oh + p.ty * p.r - 1) / (p.ty * p.r) * p.ty;
  out.global[2] = 1;
  out.local[0] = p.tw, out.local[1] = p.ty, out.local[2] = 1;
  out.label = p.label();
  return out;
}

// One-row products over single planes (a depthwise convolution or a max
// pool: M = 1, a gather of one channel per batch item) as kernels/depthwise.cu,
// R = 4 rows a thread on planes 56 rows tall or more, 2 from 28, else 1, and
// 256 threads at most; the tuner's candidates: R = 1, 2, 4, 8 with 256 or 128.
TemplateKernel render_planes(const GemmShape& s, const std::string& name, const Dialect& d) {
  PlaneBlocks forced{};
  if (forced_planes(s, forced)) return render_planes_with(s, name, d, forced);
  const int64_t oh = s.n / s.gather.out_w;
  const PlaneBlocks chosen = plane_blocks(s, oh >= 56 ? 4 : oh >= 28 ? 2 : 1, 256);
  TemplateKernel out = render_planes_with(s, name, d, chosen);
  std::vector<PlaneBlocks> seen = {chosen};
  for (int threads : {256, 128})
    for (int r : {1, 2, 4, 8}) {
      const PlaneBlocks p = plane_blocks(s, r, threads);
      if (std::find(seen.begin(), seen.end(), p) != seen.end() || staged_cells(s.gather, p) > kPlaneCellsMax) continue;
      seen.push_back(p);
      out.candidates.push_back(render_planes_with(s, name, d, p));
    }
  return out;
}

}  // namespace

TemplateKernel render_gemm_cuda(const GemmShape& s, const std::string& name, const DeviceInfo& info,
                                const Dialect& d) {
  check_gemm_shape(s);
  if (s.pool.active()) throw std::logic_error(name + ": the CUDA templates do not pool a product as it is computed");
  if (gemm_over_planes(s)) return render_planes(s, name, d);
  if (s.gather.max) throw std::logic_error(name + ": a max pool over more than one channel a product");
  GpuTiles forced{};
  if (forced_tiles(forced)) return render_tiles(s, name, d, forced, tensor_form(info, forced));  // no candidates
  const GpuTiles chosen = pick_tiles(s, info);
  TemplateKernel out = render_tiles(s, name, d, chosen, tensor_form(info, chosen));
  // The tuner's candidates: the other tiles of the table.
  for (const GpuTiles& t : kTiles)
    if (!(t == chosen)) out.candidates.push_back(render_tiles(s, name, d, t, tensor_form(info, t)));
  return out;
}

}  // namespace tl
