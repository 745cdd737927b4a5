// How CUDA C++ (compiled by NVRTC) spells a kernel: one thread per output
// item, indexed like OpenCL's get_global_id(0). NVRTC has no <math.h>, so
// infinity and NaN are spelled as bit patterns.
#pragma once
#include "core/dialect.h"

namespace tl {

inline const Dialect& cuda_dialect() {
  static const Dialect d = [] {
    Dialect x;
    x.name = "cuda";
    x.source_extension = ".cu";
    x.kernel_prefix = "extern \"C\" __global__ void";
    x.buffers_in_array = false;
    x.global_qualifier = "";
    x.restrict_kw = "__restrict__";
    x.parallel_open = "int gid = blockIdx.x * blockDim.x + threadIdx.x; if (gid < {n}) {";
    x.parallel_close = "}";
    x.function_prefix = "static __device__ __forceinline__";
    x.long_type = "long long";
    x.infinity = "__int_as_float(0x7f800000)";
    x.nan = "__int_as_float(0x7fc00000)";
    // The defaults: expf... for float, exp... for double (native in CUDA).
    x.local_qualifier = "__shared__ ";
    x.barrier = "__syncthreads();";
    x.local_id = "threadIdx.x";
    x.group_id = "blockIdx.x";
    x.group_size_attribute = "__launch_bounds__({n})";
    x.subgroup_size = 32;
    x.shuffle_xor = "__shfl_xor_sync(0xffffffffu, {v}, {o})";
    return x;
  }();
  return d;
}

}  // namespace tl
