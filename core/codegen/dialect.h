// How one C-family language spells the few things that differ between C,
// OpenCL C and CUDA C. The renderer reads this table; it is data, not code.
#pragma once
#include <string>

namespace tl {

struct Dialect {
  std::string name;              // "c", "opencl", "cuda"
  std::string preamble;          // headers, pragmas, helper definitions
  std::string kernel_prefix;     // "void", "__kernel void", "extern \"C\" __global__ void"
  std::string global_qualifier;  // "", "__global ", ""
  std::string restrict_kw;       // "restrict", "restrict", "__restrict__"
  std::string index_type;        // type of loop indices: "int"
  // Parallel loop over the kernel's first dimension [0, n): the renderer emits
  // `open` (with {n} replaced), the body indexed by `gid`, then `close`.
  std::string parallel_params;   // extra leading params: "int start, int end, " for C
  std::string parallel_open;     // "for (int gid = start; gid < end; ++gid) {"
  std::string parallel_close;    // "}"
  // Math function spellings (float versions).
  std::string exp = "expf", log = "logf", sqrt = "sqrtf", sin = "sinf", pow = "powf",
              fmax = "fmaxf";
  bool c_library = true;         // true: kernels are C functions in a shared library
};

}  // namespace tl
