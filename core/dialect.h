// How one C-family language spells the few things that differ between C,
// OpenCL C and CUDA C. The renderer reads this table; it is data, not code.
//
// A generic kernel is rendered as
//   {preamble}
//   {kernel_prefix} NAME(<params>) {
//     <buffer declarations when buffers_in_array>
//     {parallel_open}      // defines `int gid`; "{n}" is replaced by the item count
//       ... body indexed by gid ...
//     {parallel_close}
//   }
// where <params> is "int start, int end, void** args" when buffers_in_array
// (the C device calls NAME(start, end, args) from its thread pool, each thread
// a slice of [0, n)), otherwise one parameter per buffer:
//   "{global_qualifier}float* {restrict_kw} b0, {global_qualifier}const float* {restrict_kw} b1, ..."
// Launch: global[0] = n, local = 0 (the device picks a work-group size and
// rounds the global size up; the kernel guards gid < n).
//
// A dialect with a local_qualifier (a device with local/shared memory) may
// also get a large reduction in the grouped form: one work-group of L items
// per output (L fixed in the source and promised by group_size_attribute),
// each item folding every L-th element, then a tree in local memory:
//   {kernel_prefix} {group_size_attribute} NAME(<params>) {
//     int gid = {group_id}, lid = {local_id};
//     {local_qualifier}float part[L];
//     ... acc over r = lid, lid + L, ... ; part[lid] = acc; {barrier}
//     if (lid < L/2) part[lid] = combine(part[lid], part[lid + L/2]); {barrier} ...
//     if (lid == 0) b0[gid] = combine(part[0], part[1]);
//   }
// Launch: global[0] = outputs * L items in all, local[0] = L (in CUDA terms
// a grid of `outputs` blocks of L threads). A dialect with shuffles
// (subgroup_size, shuffle_xor) folds the items' results within each
// subgroup by shuffles instead, and the subgroups' through `part` behind
// one barrier (reduce.cpp's fold_by_shuffles).
#pragma once
#include <array>
#include <string>

#include "core/dtype.h"

namespace tl {

struct Dialect {
  std::string name;              // "c", "opencl", "cuda"
  std::string source_extension = ".c";  // for dumped sources: ".c", ".cl", ".cu"
  std::string preamble;          // headers, pragmas, helper definitions
  std::string kernel_prefix;     // "void", "__kernel void", "extern \"C\" __global__ void"
  bool buffers_in_array = false; // C: buffers arrive as void** args
  std::string global_qualifier;  // "", "__global ", ""
  std::string restrict_kw;       // "restrict", "restrict", "__restrict__"
  std::string parallel_open;     // "for (int gid = start; gid < end; ++gid) {"
  std::string parallel_close = "}";
  std::string function_prefix = "static inline";  // a helper function: "static __device__ __forceinline__" in CUDA
  // Written on the line before a loop whose iterations are independent (a
  // row of an elementwise kernel): C's "#pragma omp simd", so the compiler
  // vectorises rows it would otherwise leave scalar, where a float compare
  // or select becomes a mispredicted branch. Empty: no such hint.
  std::string independent_loop;
  // Written before the innermost loop of a sum into `acc` whose order may
  // change: C's "#pragma omp simd reduction(+:acc)", which lets the compiler
  // keep a vector of partial sums instead of one serial chain. Empty: the
  // loop adds in order.
  std::string reordered_sum_loop;
  // The same for a maximum of floats into `acc`, which also ORs whether a
  // value was NaN into `any_nan`: "#pragma omp simd reduction(max:acc)
  // reduction(|:any_nan)". The result is NaN when any_nan is set, as the
  // in-order maximum's. Empty: the loop takes the maximum in order.
  std::string reordered_max_loop;
  std::string long_type = "long";                 // a 64-bit index: "long" (C LP64, OpenCL), "long long" (CUDA)
  // Spellings. Element type names, indexed by DType (dtype.h): float32,
  // int32, bool, float64.
  std::array<std::string, kDTypeCount> type_names = {"float", "int", "unsigned char", "double"};
  std::string infinity = "INFINITY", nan = "NAN";  // a float; C converts it to double where needed
  // The math functions of one float type.
  struct Math {
    std::string exp, log, sqrt, sin, pow;
  };
  Math math_f32 = {"expf", "logf", "sqrtf", "sinf", "powf"};
  Math math_f64 = {"exp", "log", "sqrt", "sin", "pow"};
  // Written after the preamble in kernels that compute in float64, which
  // the renderer is only asked for on a device that reports fp64
  // (OpenCL C: "#pragma OPENCL EXTENSION cl_khr_fp64 : enable").
  std::string fp64_preamble;

  const std::string& type(DType t) const { return type_names[size_t(t)]; }
  const Math& math(DType t) const { return t == DType::f64 ? math_f64 : math_f32; }
  // Work-group vocabulary (OpenCL C; CUDA C). Empty local_qualifier: the
  // dialect has no local memory, and every reduction stays one item per output.
  std::string local_qualifier;       // "__local "; "__shared__ "
  std::string barrier;               // "barrier(CLK_LOCAL_MEM_FENCE);"; "__syncthreads();"
  std::string local_id;              // "get_local_id(0)"; "threadIdx.x"
  std::string group_id;              // "get_group_id(0)"; "blockIdx.x"
  // The fixed work-group size, "{n}" replaced by it; written between
  // kernel_prefix and the kernel's name:
  // "__attribute__((reqd_work_group_size({n},1,1)))"; "__launch_bounds__({n})"
  std::string group_size_attribute;
  // Items of a work-group that exchange registers without local memory or a
  // barrier (a CUDA warp: 32), and how one reads `{v}` from the item whose
  // index differs from its own in bit `{o}`: "__shfl_xor_sync(0xffffffffu,
  // {v}, {o})". 0: none; a group folds its items' results in local memory.
  int subgroup_size = 0;
  std::string shuffle_xor;
};

}  // namespace tl
