// One GEMM of the C device: its sizes and its fused epilogue. The blocked
// product itself is in the GEMM library (kernels/gemm_cpu.c), compiled once
// per machine; this file is what each shape compiles.
//
// Placeholders (filled in by core/codegen/gemm_c.cpp): NAME, LIBRARY, MATH
// (kernels/c_math.h: the epilogue's exp), the API (kernels/gemm_cpu.h), the
// tl_gemm fields BATCH M N K SA0 SA1 SA2 SB0 SB1
// SB2 SPLIT UNIT UNITS_PER_BATCH PACKED_A PACKED_B KC MC_TILES NC_TILES B_IN_PLACE GATHER (an initialiser of
// struct tl_gather) WINOGRAD TRANSPOSED FUSED BIAS LO HI BATCH_CLAMP POOL (a tl_gather too) POOL_H, and FINISH: the epilogue, as a
// function NAME_finish over a block of C whose inner loop runs along a row, so
// that the compiler keeps per-row values out of it and vectorises it.
// Computed by the GEMM library whose source has digest {{LIBRARY}}.
#include <math.h>
{{MATH}}
{{API}}

{{FINISH}}

void {{NAME}}(int start, int end, void** args) {
  static const struct tl_gemm g = {.batch = {{BATCH}}, .m = {{M}}, .n = {{N}}, .k = {{K}},
                                   .sa = { {{SA0}}, {{SA1}}, {{SA2}} }, .sb = { {{SB0}}, {{SB1}}, {{SB2}} },
                                   .split = {{SPLIT}}, .unit = {{UNIT}}, .units_per_batch = {{UNITS_PER_BATCH}},
                                   .packed_a = {{PACKED_A}}, .packed_b = {{PACKED_B}}, .finish = {{FINISH_FN}},
                                   .kc = {{KC}}, .mc_tiles = {{MC_TILES}}, .nc_tiles = {{NC_TILES}},
                                   .b_in_place = {{B_IN_PLACE}}, .gather = {{GATHER}},
                                   .winograd = {{WINOGRAD}}, .transposed = {{TRANSPOSED}},
                                   .fused = {{FUSED}}, .bias = {{BIAS}}, .lo = {{LO}}, .hi = {{HI}},
                                   .batch_clamp = {{BATCH_CLAMP}},
                                   .pool = {{POOL}}, .pool_h = {{POOL_H}}};
  tinylens_gemm_f32(&g, start, end, args);
}
