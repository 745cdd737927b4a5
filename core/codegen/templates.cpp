#include "core/codegen/templates.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace tl {

void check_gemm_shape(const GemmShape& s) {
  if (s.batch < 0 || s.m < 0 || s.n < 0 || s.k < 0)
    throw ShapeError("gemm: negative size batch=" + std::to_string(s.batch) + " m=" + std::to_string(s.m) +
                     " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
}

// The shape rule was measured with the tuner on an H200 over Lite0's GEMMs at
// batch 1 and 64, OpenCL and CUDA (bench-gpu): a tile taller than M or wider
// than N leaves most of its work-items idle (M = 16: 32 x 32 ran 2.5x faster
// than 128 x 128); with K under 128 a larger tile has too few k steps to
// repay its loads (K = 24: 32 x 32 1.5x faster than 64 x 64 on OpenCL);
// 16 x 16 lost to 32 x 32 on every shape. The count: with one or two groups
// a unit waits on memory with nothing to switch to (Lite0's batch-64 GEMMs,
// 225 blocks of 128 x 128 on an H200, ran 1.5-2.5x faster in 64 x 64 or
// 32 x 32 tiles, while a 4096 product, 1024 blocks, keeps 128 x 128).
GpuTiles pick_gpu_tiles(const GemmShape& s, const DeviceInfo& info, const std::vector<GpuTiles>& tiles) {
  auto up32 = [](int64_t v) { return (v + 31) / 32 * 32; };
  auto suits = [&](const GpuTiles& t) {
    if (t.tm < 32 || t.tn < 32 || t.tm > up32(s.m) || t.tn > up32(s.n)) return t.tm == 32 && t.tn == 32;
    return s.k >= 128 || (t.tm == 32 && t.tn == 32);
  };
  const int64_t units = std::max(1, info.compute_units);
  const GpuTiles* fallback = &tiles.back();
  for (const GpuTiles& t : tiles) {
    if (t.tm == 32 && t.tn == 32) fallback = &t;
    if (!suits(t)) continue;
    const int64_t groups = ((s.m + t.tm - 1) / t.tm) * ((s.n + t.tn - 1) / t.tn) * std::max<int64_t>(1, s.batch);
    if (groups >= 4 * units) return t;
  }
  return *fallback;
}

std::string GpuTiles::label() const {
  return std::to_string(tm) + "x" + std::to_string(tn) + "x" + std::to_string(tk) + "/" + std::to_string(wm) + "x" +
         std::to_string(wn);
}

TemplateKernel render_gpu_tiles(const char* file, const GemmShape& s, const std::string& name, const Dialect& d,
                                const GpuTiles& t, std::map<std::string, std::string> values) {
  values.merge(gemm_values(s, name, gemm_needs_wide_index(s, t.tm, t.tn, t.tk), d));
  for (auto [key, v] : {std::pair{"TM", t.tm}, {"TN", t.tn}, {"TK", t.tk}, {"WM", t.wm}, {"WN", t.wn}})
    values.emplace(key, std::to_string(v));
  TemplateKernel out;
  out.source = specialise(embedded_kernel(file), values);
  const int tx = t.tn / t.wn, ty = t.tm / t.wm;
  out.global[0] = (s.n + t.tn - 1) / t.tn * tx;
  out.global[1] = (s.m + t.tm - 1) / t.tm * ty;
  out.global[2] = s.batch;
  out.local[0] = tx;
  out.local[1] = ty;
  out.local[2] = 1;
  out.label = "tile=" + t.label();
  return out;
}

bool gemm_needs_wide_index(const GemmShape& s, int64_t tm, int64_t tn, int64_t tk) {
  // The furthest element a tile grid (sizes rounded up to whole tiles) can
  // address along each operand; strides may be negative.
  auto reach = [](int64_t b, int64_t r, int64_t c, const int64_t* st) -> int64_t {
    return std::max<int64_t>(0, b - 1) * std::abs(st[0]) + std::max<int64_t>(0, r - 1) * std::abs(st[1]) +
           std::max<int64_t>(0, c - 1) * std::abs(st[2]);
  };
  const bool negative = std::min({s.a_strides[0], s.a_strides[1], s.a_strides[2], s.b_strides[0], s.b_strides[1],
                                  s.b_strides[2]}) < 0;
  const int64_t padded_m = (s.m + tm - 1) / tm * tm, padded_n = (s.n + tn - 1) / tn * tn;
  const int64_t padded_k = (s.k + tk - 1) / tk * tk;
  // A gathered B (ConvGather) reads whole images, one per batch item.
  const ConvGather& g = s.gather;
  const int64_t b_reach = g.active() ? std::max<int64_t>(1, s.batch) * g.channels * g.height * g.width
                                     : reach(s.batch, padded_k, padded_n, s.b_strides);
  const int64_t largest = std::max({reach(s.batch, padded_m, padded_k, s.a_strides), b_reach, s.batch * s.m * s.n});
  return negative || largest >= (int64_t{1} << 31);
}

// The {{EPILOGUE}} hook: the function every store of C goes through, and the
// epilogue's extra buffers as kernel parameters (EPILOGUE_PARAMS) and as the
// arguments a store passes on (EPILOGUE_ARGS), after A and B.
static std::string epilogue_text(const GemmEpilogue& e, const Dialect& d) {
  const std::string ptr = d.global_qualifier + "const float* " + d.restrict_kw;
  std::string params, args;
  for (size_t i = 2; i < e.buffers.size(); ++i) {
    const std::string b = "b" + std::to_string(i + 1);
    params += ", " + d.global_qualifier + "const " + e.buffers[i] + "* " + d.restrict_kw + " " + b;
    args += ", " + b;
  }
  return "#define EPILOGUE_PARAMS " + params + "\n#define EPILOGUE_ARGS " + args + "\n" + d.function_prefix +
         " float epilogue(float acc, idx_t batch, idx_t row, idx_t col, " + (e.flat ? "idx_t flat, " : "") + ptr +
         " b1,\n    " + ptr +
         " b2 EPILOGUE_PARAMS) {\n" + e.statements + "  return " + e.value + ";\n}";
}

std::map<std::string, std::string> gemm_values(const GemmShape& s, const std::string& name, bool wide,
                                               const Dialect& d) {
  auto str = [](int64_t v) { return std::to_string(v); };
  return {{"NAME", name},
          {"M", str(s.m)},
          {"N", str(s.n)},
          {"K", str(s.k)},
          {"SA0", str(s.a_strides[0])},
          {"SA1", str(s.a_strides[1])},
          {"SA2", str(s.a_strides[2])},
          {"SB0", str(s.b_strides[0])},
          {"SB1", str(s.b_strides[1])},
          {"SB2", str(s.b_strides[2])},
          {"IDX", wide ? d.long_type : "int"},
          {"EPILOGUE", epilogue_text(s.epilogue, d)}};
}

// Each GEMM template file and the function that specialises it. A device
// names the template it wants in DeviceInfo::gemm_template.
using GemmRenderer = TemplateKernel (*)(const GemmShape&, const std::string&, const DeviceInfo&, const Dialect&);
static GemmRenderer gemm_renderer(const std::string& file) {
  static const std::map<std::string, GemmRenderer> renderers = {
      {"gemm_cpu.c",
       [](const GemmShape& s, const std::string& n, const DeviceInfo&, const Dialect&) { return render_gemm_c(s, n); }},
      {"gemm.cl", render_gemm_opencl},
      {"gemm.cu", render_gemm_cuda},
  };
  auto it = renderers.find(file);
  return it != renderers.end() && embedded_kernels().count(file) ? it->second : nullptr;
}

bool has_gemm_template(const Device& device) { return gemm_renderer(device.info().gemm_template) != nullptr; }

bool gemm_template_gathers(const Device& device) {
  const std::string& t = device.info().gemm_template;
  return (t == "gemm_cpu.c" || t == "gemm.cu") && has_gemm_template(device);
}

bool gemm_template_gathers_planes(const Device& device) {
  const std::string& t = device.info().gemm_template;
  return (t == "gemm_cpu.c" || (t == "gemm.cu" && embedded_kernels().count("depthwise.cu"))) &&
         has_gemm_template(device);
}

bool gemm_over_planes(const GemmShape& s) { return s.gather.active() && s.gather.channels == 1 && s.m == 1; }

bool gemm_template_wraps_a(const Device& device) {
  return device.info().gemm_template == "gemm.cu" && gemm_template_gathers_planes(device);
}

bool gemm_template_pools(const Device& device) {
  return device.info().gemm_template == "gemm_cpu.c" && has_gemm_template(device);
}

bool gemm_faster_unpooled(const Device& device, const GemmShape& shape) {
  return device.info().gemm_template == "gemm_cpu.c" && gemm_c_winograd_by_default(shape);
}

bool gemm_epilogue_takes_flat(const Device& device) { return device.info().gemm_template == "gemm.cl"; }

bool render_gemm(const Device& device, const GemmShape& shape, const std::string& name, TemplateKernel& out) {
  GemmRenderer render = gemm_renderer(device.info().gemm_template);
  if (!render) return false;
  if (shape.a_period && !(gemm_template_wraps_a(device) && gemm_over_planes(shape)))
    throw std::logic_error(name + ": " + device.info().gemm_template + " does not read A with a batch period");
  out = render(shape, name, device.info(), device.dialect());
  return true;
}

}  // namespace tl
