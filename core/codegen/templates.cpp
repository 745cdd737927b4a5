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

// Each GEMM template file and the function that specialises it. A device
// names the template it wants in DeviceInfo::gemm_template.
using GemmRenderer = TemplateKernel (*)(const GemmShape&, const std::string&, const DeviceInfo&);
static GemmRenderer gemm_renderer(const std::string& file) {
  static const std::map<std::string, GemmRenderer> renderers = {
      {"gemm_cpu.c", [](const GemmShape& s, const std::string& n, const DeviceInfo&) { return render_gemm_c(s, n); }},
      {"gemm.cl", render_gemm_opencl},
  };
  auto it = renderers.find(file);
  return it != renderers.end() && embedded_kernels().count(file) ? it->second : nullptr;
}

bool has_gemm_template(const Device& device) { return gemm_renderer(device.info().gemm_template) != nullptr; }

bool render_gemm(const Device& device, const GemmShape& shape, const std::string& name, TemplateKernel& out) {
  GemmRenderer render = gemm_renderer(device.info().gemm_template);
  if (!render) return false;
  out = render(shape, name, device.info());
  return true;
}

}  // namespace tl
