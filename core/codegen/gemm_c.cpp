// A GEMM kernel of the C device: kernels/gemm_cpu_call.c specialised for one
// shape, calling the GEMM library (kernels/gemm_cpu.c) that the device
// compiles once.
//
// One unit of global[0] is a strip of C of one batch: UNIT rows (SPLIT=0) or
// UNIT columns (SPLIT=1). The C device hands each thread a contiguous range of
// units; the kernel merges a range into one sub-matrix, so units can be small
// (good balance on any thread count) without costing extra packing. The kernel
// snaps strip edges to its micro-tile size, which the renderer cannot know
// because it depends on the instruction set the kernel is compiled for.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/codegen/templates.h"

namespace tl {

namespace {

constexpr int64_t kRowUnit = 16;  // rows of C per unit when splitting rows
constexpr int64_t kColUnit = 32;  // columns of C per unit when splitting columns
constexpr int64_t kTransposedColUnit = 8;  // columns of C per unit when C^T splits its columns
constexpr int64_t kThinRows = 4;  // the template's THIN_ROWS: up to this many rows, A is read in place
constexpr int64_t kGroupedChannelsMax = 64;  // the library's GROUPED_CHANNELS_MAX (grouped_blocked)
constexpr int64_t kMaxTileRows = 16;  // the template's MR is at most this
constexpr int64_t kInPlaceK = 64;     // up to this K, B is read in place where it can be
constexpr int64_t kInPlaceRows = 256;  // and up to this many rows of C, whatever K, when B is no constant

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// B's rows lie in memory as they are read (the library may then read B in
// place); a gathered B has no rows of its own.
bool b_rows_contiguous(const GemmShape& s) { return s.b_strides[2] == 1 && !s.gather.active(); }

// The library may read B in place: rows that lie in memory, or a gathered B
// (a convolution's image) that it reads from the image's phased copy, one
// offset per tap (in several K blocks, packing panels that cross a row).
bool b_readable_in_place(const GemmShape& s) { return b_rows_contiguous(s) || s.gather.active(); }

// The FINISH hook: the epilogue as a function over a block of C (see
// tl_gemm_finish in kernels/gemm_cpu.h). Its inner loop walks a row, so
// values that depend on the row alone are computed once per row and the
// loop over columns vectorises (C is restrict: an epilogue input never
// shares its buffer, which ivdep tells the vectoriser). It reads the
// buffers it needs from the kernel's argument array.
std::string finish_text(const GemmEpilogue& e, int64_t n, const std::string& name) {
  if (e.statements.empty() && e.value == "acc") return "";
  std::string out =
      "static void " + name +
      "_finish(float* restrict c, ptrdiff_t batch, ptrdiff_t m0, ptrdiff_t m1, ptrdiff_t n0, ptrdiff_t n1, "
      "void** args) {\n  (void)batch, (void)args;\n";
  const std::string used = e.statements + " " + e.value;
  for (size_t i = 0; i < e.buffers.size(); ++i) {
    const std::string b = "b" + std::to_string(i + 1);
    if (used.find(b + "[") == std::string::npos) continue;
    out += "  const " + e.buffers[i] + "* restrict " + b + " = (const " + e.buffers[i] + "*)args[" +
           std::to_string(i + 1) + "];\n";
  }
  std::string body;  // the statements, indented into the loop
  for (size_t pos = 0, end; pos < e.statements.size(); pos = end + 1) {
    end = e.statements.find('\n', pos);
    if (end == std::string::npos) end = e.statements.size();
    body += "    " + e.statements.substr(pos, end - pos) + "\n";
  }
  const std::string at = "c[row * " + std::to_string(n) + " + col]";
  return out + "  for (ptrdiff_t row = m0; row < m1; ++row)\n#pragma GCC ivdep\n" +
         "    for (ptrdiff_t col = n0; col < n1; ++col) {\n      const float acc = " + at + ";\n" + body + "      " +
         at + " = " + e.value + ";\n    }\n}";
}

// A float of tl_gemm (the fused epilogue's bounds) as C source.
std::string float_text(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  char buf[40];
  std::snprintf(buf, sizeof buf, "(float)%.17g", v);
  return buf;
}

// A constant A shared by every batch (a convolution's weights) that the
// library packs once into a buffer of its own.
bool packs_a(const GemmShape& s) {
  return s.a_constant && (s.batch == 1 || s.a_strides[0] == 0) && s.m > kThinRows;
}

// Winograd's F(2x2, 3x3) (kernels/gemm_cpu_winograd.c) computes a gathered
// B of a dense 3x3 window at stride 1 and dilation 1 with packed weights.
bool winograd_fits(const GemmShape& s) {
  const ConvGather& g = s.gather;
  return g.active() && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         g.dilation_h == 1 && g.dilation_w == 1 && s.k == g.channels * 9 && packs_a(s);
}

// ... and is the default where its transformed weights (16 per weight pair)
// stay in the shared cache: every chunk of output rows reads all of them.
// Measured on 2 threads (tuner, scripts/bench onnx): 1.25-1.8x faster than
// the direct product from 16 -> 64 channels on 55x55 to 256 -> 256 on
// 14x14; slower at 512 -> 512 on 7x7 (16 MiB of weights). Larger weights
// are streamed, which maps of 49 tiles or more (14x14) repay: tuned on 2
// threads, VGG-19's 512 -> 512 took 3.6 ms against the direct product's 5.8
// on 14x14, 11.0 against 21.2 on 28x28. Not from fewer than 16 channels:
// each tile's transforms then cost more than its products save (VGG-19's
// first layer, 3 -> 64 channels on 224x224: 3.6 ms against 1.2).
constexpr int64_t kWinogradWeightsMax = int64_t(1) << 21;  // floats (8 MiB)
constexpr int64_t kWinogradStreamedTilesMin = 49;
constexpr int64_t kWinogradChannelsMin = 16;
bool winograd_by_default(const GemmShape& s) {
  if (!winograd_fits(s) || s.gather.channels < kWinogradChannelsMin) return false;
  const int64_t tiles = ceil_div(s.n / s.gather.out_w, 2) * ceil_div(s.gather.out_w, 2);
  return 16 * s.gather.channels * s.m <= kWinogradWeightsMax || tiles >= kWinogradStreamedTilesMin;
}

// The rendering options of one GEMM kernel: which side of C the threads
// split and the library's cache blocks (0 = its default; mc and nc count
// micro-tiles, whose size only the compiled library knows).
struct Knobs {
  bool split_rows = true;
  int64_t kc = 0, mc_tiles = 0, nc_tiles = 0;
  bool b_in_place = false;
  int winograd = 0;  // kernels/gemm_cpu_winograd.c, 3x3 windows at stride 1: F(2x2, 3x3) 1, F(4x4, 3x3) 2
  int transposed = 0;     // C computed as C^T: 1, 0, or -1 (the library decides by its tile shape)
};

// A constant B shared by every batch (a linear layer's weights: X @ W) that
// the library packs once, as it packs A, instead of on every call (7 MB
// copied per call for ViT-B's 768 x 2304 projection). Not for the products
// that read B as it is: a gathered image, few rows (the thin path), B in
// place, a transposed product (where the library chooses one, transposed -1,
// the copy stays unfilled).
bool packs_b(const GemmShape& s, const Knobs& knobs) {
  return s.b_constant && !s.gather.active() && (s.batch == 1 || s.b_strides[0] == 0) && s.m > kThinRows &&
         knobs.transposed != 1 && !knobs.b_in_place && !knobs.winograd;
}

// C^T's buffer in the library holds n x (rows of a thread) floats: offered
// up to this many columns.
constexpr int64_t kTransposedColumnsMax = 512;
constexpr int64_t kTransposedSplitColumnsMin = 128;

// "split=cols kc=576": what differs from the default rendering.
std::string knob_label(const Knobs& k, const Knobs& base) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (k.split_rows != base.split_rows) add(k.split_rows ? "split=rows" : "split=cols");
  if (k.kc) add("kc=" + std::to_string(k.kc));
  if (k.mc_tiles) add("mc=" + std::to_string(k.mc_tiles) + "t");
  if (k.nc_tiles) add("nc=" + std::to_string(k.nc_tiles) + "t");
  if (k.b_in_place != base.b_in_place) add(k.b_in_place ? "b=in-place" : "b=packed");
  if (k.transposed != base.transposed && (k.split_rows || k.transposed == 1))
    add(k.transposed == 1 ? "c=transposed" : "c=as-is");
  return out.empty() ? "default" : out;
}

// The library's K block for a cap of `kc` (kernels/gemm_cpu.c's KC).
int64_t k_block(int64_t k, int64_t kc) {
  const int64_t blocks = ceil_div(k, kc);
  return ceil_div(k, blocks);
}

// A few renderings around the default, one knob at a time, for the tuner
// (core/tune.h): the other split, K in one block or in smaller ones, and
// smaller or larger row and column blocks where the shape has room for them,
// B packed or read in place where its rows are contiguous, C computed as
// C^T or as it is where the library may choose: at most 10 besides the
// default. Candidates whose library blocks would come out the same are
// left out. (Winograd's rendering has no knobs of its own.)
std::vector<Knobs> candidate_knobs(const GemmShape& s, const Knobs& base) {
  constexpr int64_t kDefaultKc = 256;  // kernels/gemm_cpu.c's TL_KC
  std::vector<Knobs> out;
  if (s.gather.max) return out;  // a max pool: whole planes per thread, nothing to choose
  Knobs k = base;
  k.split_rows = !base.split_rows;
  k.transposed = 0;
  out.push_back(k);
  // C computed as C^T, or as it is, whatever the library would decide.
  if (base.split_rows && base.transposed == -1) {
    for (int t : {1, 0}) k = base, k.transposed = t, out.push_back(k);
    // C^T split by its columns (the micro-tiles' rows): each thread then
    // gathers or packs only its own columns of B rather than all of them,
    // and reads all of A instead of half. Offered where the columns make
    // enough tiles to share (a 14x14 map's 196, not a 7x7 map's 49).
    if (s.n >= kTransposedSplitColumnsMin) k = base, k.split_rows = false, k.transposed = 1, out.push_back(k);
  }
  // The library reads B in place, or (gathered) walks the image's rows: no blocks to size.
  if (s.m <= kThinRows) return out;
  if (b_readable_in_place(s)) k = base, k.b_in_place = !base.b_in_place, out.push_back(k);
  std::vector<int64_t> kcs;
  for (int64_t kc : {int64_t(128), s.k <= 1152 ? s.k : int64_t(512)})
    if (k_block(s.k, kc) != k_block(s.k, kDefaultKc) &&
        (kcs.empty() || k_block(s.k, kc) != k_block(s.k, kcs.back())))
      kcs.push_back(kc);
  for (int64_t kc : kcs) k = base, k.kc = kc, out.push_back(k);
  if (s.m > 96)  // the default row block is 12 tiles (at least 48 rows)
    for (int64_t t : {6, 24}) k = base, k.mc_tiles = t, out.push_back(k);
  if (s.n > 512)  // the default column block is 32 tiles (256 columns or more)
    for (int64_t t : {8, 64}) k = base, k.nc_tiles = t, out.push_back(k);
  return out;
}

// struct tl_gather's initialiser: "{0}" when B is a plain matrix.
std::string gather_text(const ConvGather& g) {
  if (!g.active()) return "{0}";
  std::string out;
  for (int64_t v : {g.channels, g.height, g.width, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.dilation_h,
                    g.dilation_w, g.pad_top, g.pad_left, g.out_w, int64_t(g.max)})
    out += (out.empty() ? "{" : ", ") + std::to_string(v);
  return out + "}";
}

// A digest of the GEMM library's source. A kernel's text names it: what a
// kernel computes, and so the tuner's choice stored under its text, depends
// on the library too, and a new library then searches again.
const std::string& library_digest() {
  static const std::string digest = [] {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char ch : gemm_c_library_source() + gemm_c_extras_source()) h = (h ^ ch) * 1099511628211ull;
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", (unsigned long long)h);
    return std::string(text);
  }();
  return digest;
}

// The C device may share a kernel's units between its threads a piece at a
// time (LaunchArgs::local[0], ThreadPool::parallel_for's grain): a core
// slowed by other work then holds the others up by a piece rather than by
// the rest of its slice. On 2 threads of a busy VM the thread that finished
// first waited 100-250 us on average for the other in each of ResNet-50's
// larger GEMMs. Offered where a piece costs what the same units cost in one
// call: columns of C with A packed once (B's columns are packed per block
// anyway; a gathered B phases the rows of its piece, so pieces span a few
// output rows), rows of C whose plain B is read in place, Winograd's tile
// rows while its transformed weights are small enough for each piece to
// read them again from the cache, and the channels of a depthwise
// convolution. Pieces are about a sixteenth of the units. 0: each thread
// runs its slice in one call (a piece would pack all of B again, phase the
// whole image again, or read all of a large U). Runs alternating with and
// without sharing in one process: EfficientNet-Lite0 0.96-0.98 of the time,
// ResNet-50 0.99-1.0, SqueezeNet 0.99-1.01. Elementwise kernels shared the
// same way made SqueezeNet 4-5% slower (pieces of a short kernel land on
// the core whose cache lacks their data), so they keep their slices.
int64_t share_grain(const GemmShape& s, const Knobs& k, int64_t units_per_batch) {
  constexpr int64_t kPieces = 16;
  constexpr int64_t kWinogradSharedWeightsMax = int64_t(1) << 18;  // floats of U (1 MiB)
  // A Winograd piece's tiles are the rows of the micro-kernel's tiles: at
  // least two panels of 14 rows, or a 13x13 map's pieces of 7 tiles would
  // leave half of each panel empty.
  constexpr int64_t kWinogradPieceTiles = 28;
  constexpr int64_t kStreamedA = int64_t(128) << 10;
  const int64_t units = s.batch * units_per_batch, grain = std::max<int64_t>(1, units / kPieces);
  if (units < 4) return 0;
  if (k.winograd) {
    const int64_t f = k.winograd == 2 ? 4 : 2, positions = (f + 2) * (f + 2);
    if (positions * s.gather.channels * s.m > kWinogradSharedWeightsMax) return 0;
    return std::max(grain, ceil_div(kWinogradPieceTiles, ceil_div(s.gather.out_w, f)));  // rows of tiles
  }
  if (k.transposed != 0) return 0;
  const bool depthwise = s.gather.active() && s.m <= kThinRows && s.batch > 1 && k.split_rows;
  if (depthwise) return units >= 4 * kPieces ? kPieces : 0;
  if (k.split_rows) return k.b_in_place && packs_a(s) && !s.gather.active() ? grain : 0;
  if (!packs_a(s)) return 0;
  // Each piece streams all of A's panels through the L2 cache: with A
  // larger than kStreamedA, pieces of up to 8 units (256 columns), as long
  // as there are 4 of them to share. ResNet-50's 3x3 convolution at stride
  // 2 from 128 channels (56x56 to 28x28, A 590 KB, 25 units): 618 us alone
  // with pieces of 8 units, 630 with 6, against 718 with 2 (610 with no
  // sharing, which a core slowed by other work holds up).
  const int64_t least = s.m * s.k * int64_t(sizeof(float)) > kStreamedA ? std::min<int64_t>(8, units / 4) : 1;
  return std::max({grain, least, s.gather.active() ? ceil_div(2 * s.gather.out_w, kColUnit) : 1});
}

// Pooled rows per unit of a pooled product (GemmShape::pool): the rows of
// C that a band's windows read, for every row of C, fill about 384 KiB,
// which the L2 cache holds while they are pooled (SqueezeNet's stem: 13
// rows of 111 x 64 for 6 pooled rows, 10 bands). Each band costs a call of
// the blocked product and a pool per row of C: SqueezeNet's stem alone took
// 0.20 ms with these bands, 0.20 with 768 KiB, 0.24 with 192, 0.29 with 128.
int64_t pool_band(const GemmShape& s) {
  constexpr int64_t kBandBytes = int64_t(384) << 10;
  const int64_t row_bytes = s.m * s.pool.width * int64_t(sizeof(float));
  const int64_t span = (s.pool.kernel_h - 1) * s.pool.dilation_h + 1;  // rows of C one pooled row reads
  const int64_t rows = std::max(span, kBandBytes / std::max<int64_t>(1, row_bytes));
  return std::max<int64_t>(1, (rows - span) / s.pool.stride_h + 1);
}

TemplateKernel render_with(const GemmShape& s, const std::string& name, const Knobs& knobs) {
  const bool split_rows = knobs.split_rows;
  // A transposed product's columns are its micro-tiles' rows: finer units;
  // a pooled product's are bands of pooled rows (pool_band).
  const int64_t unit = s.pool.active() ? pool_band(s)
                       : split_rows    ? kRowUnit
                       : knobs.transposed == 1 ? kTransposedColUnit
                                               : kColUnit;
  // Winograd's units are rows of 2x2 output tiles.
  const int64_t units_per_batch = s.pool.active() ? ceil_div(s.pool_h, unit)
                                  : knobs.winograd ? ceil_div(s.n / s.gather.out_w, knobs.winograd == 2 ? 4 : 2)
                                                   : ceil_div(split_rows ? s.m : s.n, unit);

  auto num = [](int64_t v) { return std::to_string(v); };
  TemplateKernel out;
  // A constant A shared by every batch (a convolution's weights) is packed
  // once into a buffer that lives with A's, given after the other buffers.
  // Its layout depends on the K block, so the key names that too.
  const bool pack = packs_a(s), pack_b = packs_b(s, knobs);
  const int64_t packed_arg = 1 + std::max<int64_t>(2, int64_t(s.epilogue.buffers.size()));
  if (knobs.winograd) {
    // 16 transformed weights per (row, channel), 36 for F(4x4, 3x3), rows
    // padded to the library's NR (at most 64).
    const int64_t positions = knobs.winograd == 2 ? 36 : 16;
    out.packed.push_back({1, 64 + positions * s.gather.channels * (s.m + 64) * int64_t(sizeof(float)),
                          std::string("gemm_cpu_winograd.c ") + (knobs.winograd == 2 ? "U4" : "U") + " m=" + num(s.m) +
                              " k=" + num(s.k) + " strides=" + num(s.a_strides[1]) + "," + num(s.a_strides[2])});
  } else if (pack) {
    // A transposed product's panels have NR rows (at most 64); with the
    // choice left to the library it depends on n, which the key then names.
    const int64_t rows = knobs.transposed != 0 ? 64 : kMaxTileRows;
    out.packed.push_back({1, 64 + (s.m + rows - 1) * s.k * int64_t(sizeof(float)),
                          "gemm_cpu.c A panels m=" + num(s.m) + " k=" + num(s.k) + " strides=" + num(s.a_strides[1]) +
                              "," + num(s.a_strides[2]) + (knobs.kc ? " kc=" + num(knobs.kc) : "") +
                              (knobs.transposed == 1 ? " transposed" : knobs.transposed == -1 ? " n=" + num(s.n) : "")});
  }
  // B's panels are NR columns wide (at most 64), one K block after another.
  if (pack_b)
    out.packed.push_back({2, 64 + (s.n + 63) * s.k * int64_t(sizeof(float)),
                          "gemm_cpu.c B panels n=" + num(s.n) + " k=" + num(s.k) + " strides=" + num(s.b_strides[1]) +
                              "," + num(s.b_strides[2]) + (knobs.kc ? " kc=" + num(knobs.kc) : "")});
  const int64_t packed_b_arg = packed_arg + int64_t(out.packed.size()) - 1;  // B's copy comes last
  // A pooled product applies its epilogue (in registers, or none) itself.
  const std::string finish = s.pool.active() ? std::string() : finish_text(s.epilogue, s.n, name);
  // A gathered B is one image per batch item (zero stride when it is shared).
  const bool gathered = s.gather.active();
  const int64_t image_stride = s.batch == 1 ? 0 : s.gather.channels * s.gather.height * s.gather.width;
  out.source = specialise(embedded_kernel("gemm_cpu_call.c"),
                          {{"NAME", name},
                           {"LIBRARY", library_digest()},
                           {"API", embedded_kernel("gemm_cpu.h")},
                           {"MATH", embedded_kernel("c_math.h")},
                           {"BATCH", num(s.batch)},
                           {"M", num(s.m)},
                           {"N", num(s.n)},
                           {"K", num(s.k)},
                           {"SA0", num(s.a_strides[0])},
                           {"SA1", num(s.a_strides[1])},
                           {"SA2", num(s.a_strides[2])},
                           {"SB0", num(gathered ? image_stride : s.b_strides[0])},
                           {"SB1", num(gathered ? 0 : s.b_strides[1])},
                           {"SB2", num(gathered ? 0 : s.b_strides[2])},
                           {"SPLIT", split_rows ? "0" : "1"},
                           {"UNIT", num(unit)},
                           {"UNITS_PER_BATCH", num(units_per_batch)},
                           {"PACKED_A", pack ? num(packed_arg) : "-1"},
                           {"PACKED_B", pack_b ? num(packed_b_arg) : "-1"},
                           {"KC", num(knobs.kc)},
                           {"MC_TILES", num(knobs.mc_tiles)},
                           {"NC_TILES", num(knobs.nc_tiles)},
                           {"B_IN_PLACE", knobs.b_in_place ? "1" : "0"},
                           {"GATHER", gather_text(s.gather)},
                           {"WINOGRAD", num(knobs.winograd)},
                           {"TRANSPOSED", num(knobs.transposed)},
                           {"FINISH", finish},
                           {"FINISH_FN", finish.empty() ? "NULL" : name + "_finish"},
                           {"FUSED", s.epilogue.row_bias_clamp && (!finish.empty() || s.pool.active()) ? "1" : "0"},
                           {"POOL", gather_text(s.pool)},
                           {"POOL_H", num(s.pool_h)},
                           {"BIAS", num(s.epilogue.bias)},
                           {"BATCH_CLAMP", s.epilogue.batch_bias_clamp && !finish.empty() ? "1" : "0"},
                           {"LO", float_text(s.epilogue.lo)},
                           {"HI", float_text(s.epilogue.hi)}});
  out.global[0] = s.batch * units_per_batch;
  // A pooled product's pieces are a quarter of its bands: a piece's first
  // band computes again the rows it shares with the band before.
  out.local[0] = s.pool.active() ? ceil_div(out.global[0], 4) : share_grain(s, knobs, units_per_batch);
  return out;
}

}  // namespace

bool gemm_c_winograd_by_default(const GemmShape& s) { return winograd_by_default(s); }

TemplateKernel render_gemm_c(const GemmShape& s, const std::string& name) {
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1)
    throw ShapeError("gemm: every size must be at least 1, got batch=" + std::to_string(s.batch) +
                     " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k));
  if (s.pool.active() && !s.epilogue.row_bias_clamp && !(s.epilogue.statements.empty() && s.epilogue.value == "acc"))
    throw std::logic_error("a pooled GEMM's epilogue must be one the library applies in registers");
  // Split the side of C that cuts into more strips: that balances the threads
  // best (m=192, n=49 splits rows; m=49, n=1280 columns), and every thread
  // packs all of the other operand, which is then the smaller one.
  Knobs base;
  base.split_rows = ceil_div(s.m, kRowUnit) >= ceil_div(s.n, kColUnit) && !s.pool.active();
  // A depthwise convolution (a batch of one-row products over gathered
  // planes): each thread takes whole channels, and walks their output rows.
  // A max pool's units are its planes, however many.
  if (s.gather.active() && s.m <= kThinRows && (s.batch > 1 || s.gather.max)) base.split_rows = true;
  // A grouped convolution with few channels a group (or a convolution to a
  // few channels over several images): each thread takes whole groups, or
  // rows of every group, which the library's grouped path computes across
  // the group's output channels (grouped_blocked, up to kGroupedChannelsMax
  // channels a group and a vector of outputs: 8 fit AVX2's and AVX-512's).
  if (s.gather.active() && s.gather.channels > 1 && s.gather.channels <= kGroupedChannelsMax && s.m <= 8 && s.batch > 1)
    base.split_rows = true;
  // A weight packed once (packs_a) leaves B to the threads: each that takes
  // rows packs all of it, each that takes columns only its own. With six
  // strips of columns or more (a 13x13 or 14x14 map's 169-196), up to 256
  // rows and K over 128, columns: the tuner chose them for 96 such products
  // of the zoo on AVX2 (0.64-0.97 of the time; 0.91-0.97 on AVX-512), not
  // with shorter K (0.85-1.11) or more rows (1.02-1.07).
  if (base.split_rows && packs_a(s) && !winograd_by_default(s) && s.batch == 1 && s.m <= 256 && s.k > 128 &&
      ceil_div(s.n, kColUnit) >= 6)
    base.split_rows = false;
  // With a short K, packing B costs about as much as the product: each
  // packed element serves only a few micro-tiles; with few rows of C, each
  // serves only a few panels of A, unless it is a constant packed once for
  // every call (packs_b). Tuned over seven zoo CNNs, B in place took
  // 0.84-1.005 of packed B's time on all 104 products of up to 256 rows
  // whose default packed it, and was faster on only 6 of the 17 with more
  // (up to 1.05 of the time on the others).
  base.b_in_place =
      b_readable_in_place(s) && (s.k <= kInPlaceK || (s.m <= kInPlaceRows && !s.b_constant));
  // Split rows with few columns: the library may compute C^T instead.
  if (base.split_rows && s.m > kThinRows && s.n <= kTransposedColumnsMax) base.transposed = -1;
  // The direct product's renderings, labelled by what differs from its
  // default, and Winograd's where it fits. Winograd's is the default where
  // it is expected to win, and the direct ones are then labelled "direct".
  std::vector<std::pair<Knobs, std::string>> others;
  // A pooled product computes bands of C's rows by columns, as it is: its
  // candidates are the blocks and B's packing.
  for (const Knobs& k : candidate_knobs(s, base))
    if (!s.pool.active() || (!k.split_rows && k.transposed == 0)) others.emplace_back(k, knob_label(k, base));
  Knobs chosen = base;
  if (winograd_fits(s) && !s.pool.active()) {
    Knobs wino = base, wino4 = base;
    wino.winograd = 1, wino4.winograd = 2, wino.transposed = wino4.transposed = 0;
    if (winograd_by_default(s)) {
      for (auto& [k, label] : others) label += " direct";
      others.insert(others.begin(), {base, "direct"});
      chosen = wino;
    } else {
      others.insert(others.begin(), {wino, "winograd"});
    }
    // F(4x4, 3x3) (kernels/gemm_cpu_winograd.c), the tuner's to choose: it
    // does 0.56x F(2x2, 3x3)'s products for more additions, and rounds
    // about 10x more (6e-5 of a 360-term sum's scale against 5.8e-6 in
    // tests/test_onnx_conv_gather.cpp's first case), so it is not the default.
    // Tuned on 2 threads, against F(2x2, 3x3): 55x55 16 -> 64 channels 76
    // us against 102, 56x56 64 -> 64 230 against 315, 27x27 32 -> 128 75
    // against 84, 28x28 128 -> 128 231 against 297; slower on 14x14 256 ->
    // 256 (420 against 377) and 13x13 48 -> 192 (72 against 52), whose
    // ragged 4x4 tiles compute 16x16 for 13x13.
    others.insert(others.begin() + 1, {wino4, "winograd4"});
  }
  TemplateKernel out = render_with(s, name, chosen);
  out.label = "default";
  for (const auto& [k, label] : others) {
    out.candidates.push_back(render_with(s, name, k));
    out.candidates.back().label = label;
  }
  return out;
}

}  // namespace tl
