#include "core/runtime/kernel_files.h"

#include <stdexcept>

namespace tl {

const std::string& embedded_kernel(const std::string& file) {
  auto& all = embedded_kernels();
  auto it = all.find(file);
  if (it == all.end()) throw std::runtime_error("no kernel template named '" + file + "' was built in");
  return it->second;
}

std::string specialise(std::string text, const std::map<std::string, std::string>& values) {
  for (auto& [key, value] : values) {
    std::string pattern = "{{" + key + "}}";
    for (size_t pos = text.find(pattern); pos != std::string::npos; pos = text.find(pattern, pos + value.size()))
      text.replace(pos, pattern.size(), value);
  }
  return text;
}

namespace {
std::string gemm_c_shared_source() {
  return specialise(embedded_kernel("gemm_cpu_shared.h"), {{"API", embedded_kernel("gemm_cpu.h")}});
}
}  // namespace

std::string gemm_c_library_source() {
  return specialise(embedded_kernel("gemm_cpu.c"), {{"SHARED", gemm_c_shared_source()}});
}

std::string gemm_c_extras_source() {
  return specialise(embedded_kernel("gemm_cpu_extras.c"),
                    {{"SHARED", gemm_c_shared_source()},
                     {"WINOGRAD", embedded_kernel("gemm_cpu_winograd.c")},
                     {"DEPTHWISE", embedded_kernel("gemm_cpu_depthwise.c")}});
}

}  // namespace tl
