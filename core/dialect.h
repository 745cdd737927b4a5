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
#pragma once
#include <string>

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
  // Spellings.
  std::string bool_type = "unsigned char";
  std::string infinity = "INFINITY", nan = "NAN";
  std::string exp = "expf", log = "logf", sqrt = "sqrtf", sin = "sinf", pow = "powf";
};

}  // namespace tl
