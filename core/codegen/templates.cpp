#include "templates.h"

#include "../error.h"

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

bool render_gemm(const Device& device, const GemmShape& shape, const std::string& name, TemplateKernel& out) {
  const auto& dialect = device.dialect().name;
  if (dialect == "c" && embedded_kernels().count("gemm_cpu.c")) {
    out = render_gemm_c(shape, name);
    return true;
  }
#ifdef TL_HAVE_OPENCL
  if (dialect == "opencl" && embedded_kernels().count("gemm.cl")) {
    out = render_gemm_opencl(shape, name, device.info());
    return true;
  }
#endif
  return false;
}

}  // namespace tl
