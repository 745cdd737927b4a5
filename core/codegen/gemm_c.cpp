// Specialises kernels/gemm_cpu.c for one GEMM shape.
//
// One unit of global[0] is a strip of C of one batch: UNIT rows (SPLIT=0) or
// UNIT columns (SPLIT=1). The C device hands each thread a contiguous range of
// units; the kernel merges a range into one sub-matrix, so units can be small
// (good balance on any thread count) without costing extra packing. The kernel
// snaps strip edges to its micro-tile size, which the renderer cannot know
// because it depends on the instruction set the kernel is compiled for.
#include <algorithm>
#include <string>

#include "core/codegen/templates.h"

namespace tl {

namespace {

constexpr int64_t kRowUnit = 16;  // rows of C per unit when splitting rows
constexpr int64_t kColUnit = 32;  // columns of C per unit when splitting columns
constexpr int64_t kThinRows = 4;  // the template's THIN_ROWS: up to this many rows, A is read in place
constexpr int64_t kMaxTileRows = 16;  // the template's MR is at most this

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The {{EPILOGUE}} hook: HAS_EPILOGUE and the function the store applies.
// It reads the buffers it needs from the kernel's argument array.
std::string epilogue_text(const GemmEpilogue& e) {
  const bool any = !e.statements.empty() || e.value != "acc";
  std::string out = std::string("#define HAS_EPILOGUE ") + (any ? "1" : "0") +
                    "\nstatic inline float epilogue(float acc, ptrdiff_t batch, ptrdiff_t row, ptrdiff_t col, "
                    "void** args) {\n  (void)batch, (void)row, (void)col, (void)args;\n";
  const std::string used = e.statements + " " + e.value;
  for (size_t i = 0; i < e.buffers.size(); ++i) {
    const std::string b = "b" + std::to_string(i + 1);
    if (used.find(b + "[") == std::string::npos) continue;
    out += "  const " + e.buffers[i] + "* restrict " + b + " = (const " + e.buffers[i] + "*)args[" +
           std::to_string(i + 1) + "];\n";
  }
  return out + e.statements + "  return " + e.value + ";\n}";
}

}  // namespace

TemplateKernel render_gemm_c(const GemmShape& s, const std::string& name) {
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    throw ShapeError("gemm: every size must be at least 1, got batch=" + std::to_string(s.batch) +
                     " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));

  // Split the side of C that cuts into more strips: that balances the threads
  // best (m=192, n=49 splits rows; m=49, n=1280 columns), and every thread
  // packs all of the other operand, which is then the smaller one.
  const bool split_rows = ceil_div(s.m, kRowUnit) >= ceil_div(s.n, kColUnit);
  const int64_t unit = split_rows ? kRowUnit : kColUnit;
  const int64_t units_per_batch = ceil_div(split_rows ? s.m : s.n, unit);

  auto num = [](int64_t v) { return std::to_string(v); };
  TemplateKernel out;
  // A constant A shared by every batch (a convolution's weights) is packed
  // once into a buffer that lives with A's, given after the other buffers.
  const bool pack = s.a_constant && (s.batch == 1 || s.a_strides[0] == 0) && s.m > kThinRows;
  const int64_t packed_arg = 1 + std::max<int64_t>(2, int64_t(s.epilogue.buffers.size()));
  if (pack) {
    out.packed_bytes = 64 + (s.m + kMaxTileRows - 1) * s.k * int64_t(sizeof(float));
    out.packed_key = "gemm_cpu.c A panels m=" + num(s.m) + " k=" + num(s.k) + " strides=" + num(s.a_strides[1]) +
                     "," + num(s.a_strides[2]);
  }
  out.source = specialise(embedded_kernel("gemm_cpu.c"), {{"NAME", name},
                                                          {"BATCH", num(s.batch)},
                                                          {"M", num(s.m)},
                                                          {"N", num(s.n)},
                                                          {"K", num(s.k)},
                                                          {"SA0", num(s.a_strides[0])},
                                                          {"SA1", num(s.a_strides[1])},
                                                          {"SA2", num(s.a_strides[2])},
                                                          {"SB0", num(s.b_strides[0])},
                                                          {"SB1", num(s.b_strides[1])},
                                                          {"SB2", num(s.b_strides[2])},
                                                          {"SPLIT", split_rows ? "0" : "1"},
                                                          {"UNIT", num(unit)},
                                                          {"UNITS_PER_BATCH", num(units_per_batch)},
                                                          {"PACKED_A", pack ? num(packed_arg) : "-1"},
                                                          {"EPILOGUE", epilogue_text(s.epilogue)}});
  out.global[0] = s.batch * units_per_batch;
  return out;
}

}  // namespace tl
