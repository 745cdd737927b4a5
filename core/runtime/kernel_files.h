// The files of kernels/, embedded into the binary at build time
// (kernels/embed.cmake), so the installed program never looks for them on
// disk; and the C device's GEMM library made of them. The CPU device compiles
// and loads that library (cpu.cpp); the GEMM kernels codegen renders call it
// (codegen/gemm_c.cpp), so it sits here, below both.
#pragma once
#include <map>
#include <string>

namespace tl {

// The text of kernels/<file>. embedded_kernel throws if there is none.
const std::map<std::string, std::string>& embedded_kernels();
const std::string& embedded_kernel(const std::string& file);

// Replaces every "{{KEY}}" in text with its value.
std::string specialise(std::string text, const std::map<std::string, std::string>& values);

// The C device's GEMM library (kernels/gemm_cpu.c with its API), which every
// kernel render_gemm_c makes calls through kGemmCLibraryEntry.
std::string gemm_c_library_source();
inline constexpr const char* kGemmCLibraryEntry = "tinylens_gemm_f32";
// Its second half (kernels/gemm_cpu_extras.c: Winograd, the product as C^T),
// compiled beside the first and loaded before it into the global scope,
// where the first finds it by name.
std::string gemm_c_extras_source();
inline constexpr const char* kGemmCExtrasEntry = "tinylens_gemm_extras";

}  // namespace tl
