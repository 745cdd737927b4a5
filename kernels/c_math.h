// exp for the C device's float kernels (core/runtime/cpu.cpp puts this in
// every kernel's preamble; GEMM epilogues paste it in too). The C library's
// expf is a call per element that no loop vectorises, so exp, sigmoid, tanh,
// softmax and GELU ran at about 5 ns an element; this is arithmetic and
// selects only, so a loop computes 16 lanes at once, and every element
// (vector body or scalar tail, in any kernel) rounds the same way. Within an
// ulp of the exact value (checked over 8 million floats in [-110, 95]);
// NaN stays NaN, +inf and overflow give +inf, -inf and underflow 0.
//
// exp(x) = 2^k exp(r) with k the nearest integer to x / ln 2 and
// r = x - k ln 2 (|r| <= ln 2 / 2), ln 2 in two parts so that k times the
// first is exact; exp(r) by its Taylor series to r^7 (the rest is below
// 1e-8 of it); 2^k as two factors, so results below 2^-126 round once.
// The reduction and the series are fused multiply-adds where the machine
// has them (the kernels are built with -ffp-contract=off, so the compiler
// would not fuse them): half the instructions, and SiLU twice as fast.
#ifndef TL_C_MATH_H
#define TL_C_MATH_H
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define TL_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define TL_FMAF(a, b, c) ((a) * (b) + (c))
#endif
static inline float tl_expf(float x) {
  // x clamped to [-104, 89] on its bits, as two integer minimums: as
  // unsigned, every float below -104 (and -inf, and a NaN with the sign
  // set) is above -104's bits and every other one below; then, as signed,
  // the floats from -104 up are ordered as their bits, and a NaN without
  // the sign is above 89's. NaN is returned at the end. Written as float
  // selects, GCC merged the two clamps (and an operation around them) into
  // four compares and four blends: SiLU took 0.90 ns an element, now 0.74
  // (AVX2, one thread, a block of C in L1 after its GEMM).
  union { float f; unsigned u; int i; } xb = {x};
  xb.u = xb.u < 0xC2D00000u ? xb.u : 0xC2D00000u;  // -104.0f
  xb.i = xb.i < 0x42B20000 ? xb.i : 0x42B20000;    // 89.0f
  const float xc = xb.f;
  const float k = __builtin_rintf(xc * 1.44269504088896341f);
  const float r = TL_FMAF(k, 2.12194440054690583e-4f, TL_FMAF(k, -0.693359375f, xc));
  float p = 1.98412698412698413e-4f;
  p = TL_FMAF(p, r, 1.38888888888888889e-3f);
  p = TL_FMAF(p, r, 8.33333333333333333e-3f);
  p = TL_FMAF(p, r, 4.16666666666666667e-2f);
  p = TL_FMAF(p, r, 1.66666666666666667e-1f);
  p = TL_FMAF(p, r, 0.5f);
  p = TL_FMAF(p, r, 1.0f);
  p = TL_FMAF(p, r, 1.0f);
  const int ki = (int)k, k1 = ki >> 1, k2 = ki - k1;  // a shift, not a division: fewer instructions
  const union { int i; float f; } s1 = {.i = (k1 + 127) << 23}, s2 = {.i = (k2 + 127) << 23};
  const float y = p * s1.f * s2.f;
  return x != x ? x : y;
}
#endif
