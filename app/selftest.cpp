// `tinylens-cli selftest`: the op-by-op suite of tests/test_ops.cpp without
// Qt, for machines that have no Qt (the headless GPU machine). Every golden
// case runs on the chosen device and is compared with the PyTorch/NumPy
// reference and with the CPU device's result.
#include <cstdio>
#include <map>
#include <string>

#include "core/runtime/registry.h"
#include "tests/compare.h"
#include "tests/gemm_layouts.h"
#include "tests/op_table.h"

int cmd_selftest(const std::string& device_name, const std::string& golden_path, bool verbose) {
  auto cases = tltest::read_golden(golden_path);
  tl::Registry::instance().get_available(device_name);  // a clear error for unknown devices
  std::map<std::string, std::pair<int, int>> by_family;  // passed, failed
  int passed = 0, failed = 0;
  for (auto& c : cases) {
    std::string why;
    bool ok = true;
    try {
      tlops::Outcome got = tlops::run_case(c, device_name);
      tlops::Outcome cpu = device_name == "cpu" ? got : tlops::run_case(c, "cpu");
      ok = got.values.size() == c.outputs.size();
      for (size_t k = 0; ok && k < c.outputs.size(); ++k) {
        ok = got.shapes[k] == c.outputs[k].shape && tltest::all_close(got.values[k], c.outputs[k].data, c.rtol, c.atol, &why);
        if (ok) ok = tltest::all_close(got.values[k], cpu.values[k], c.rtol, c.atol, &why), why = ok ? why : "vs cpu " + why;
        if (!ok && why.empty()) why = "shape " + tl::shape_str(got.shapes[k]) + " vs " + tl::shape_str(c.outputs[k].shape);
      }
    } catch (const std::exception& e) {
      ok = false;
      why = std::string("exception: ") + e.what();
    }
    auto& f = by_family[tlops::family(c.name)];
    (ok ? f.first : f.second)++;
    (ok ? passed : failed)++;
    if (!ok || verbose) std::printf("%s  %s%s%s\n", ok ? "PASS" : "FAIL", c.name.c_str(), ok ? "" : ": ", why.c_str());
  }
  // Matmul layouts that take every path of a GEMM template, vs the CPU.
  for (auto& c : tlops::gemm_layouts()) {
    std::string why;
    try {
      why = device_name == "cpu" ? tlops::check_gemm_layout_reference(c, device_name)
                                 : tlops::check_gemm_layout(c, device_name);
    } catch (const std::exception& e) {
      why = c.label() + ": exception: " + e.what();
    }
    auto& f = by_family["gemm-layouts"];
    (why.empty() ? f.first : f.second)++;
    (why.empty() ? passed : failed)++;
    if (!why.empty() || verbose) std::printf("%s  gemm %s%s%s\n", why.empty() ? "PASS" : "FAIL", c.label().c_str(), why.empty() ? "" : ": ", why.c_str());
  }
  for (auto& [family, counts] : by_family)
    std::printf("  %-14s %3d passed, %d failed\n", family.c_str(), counts.first, counts.second);
  std::printf("selftest on %s: %d passed, %d failed\n", device_name.c_str(), passed, failed);
  return failed ? 1 : 0;
}
