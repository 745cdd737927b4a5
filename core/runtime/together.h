// Building several kernels together (Device::build_together): the text
// work every such device shares. Kernel names repeat across a model (two
// elementwise kernels of one output shape are both "E1_32_56_56"), and
// template kernels define macros and helpers, so a batch cannot simply
// paste sources one after another.
#pragma once
#include <string>
#include <vector>

#include "core/runtime/device.h"

namespace tl {

// Renames the kernel `from` to `to` in its own source: every identifier
// equal to `from`, and every one that starts with `from` + "_" (a template's
// helpers carry their kernel's name, e.g. NAME_epilogue).
std::string rename_kernel(const std::string& source, const std::string& from, const std::string& to);

// The kernels with unique names: a repeated name gets "_b<index>" (generated
// names hold only capitals, digits and '_', so this never meets another).
std::vector<KernelSource> with_unique_names(const std::vector<KernelSource>& kernels);

// One translation unit holding every kernel of a batch. After each kernel,
// every macro it #defined is #undef'd, so the next one starts clean; an
// include guard (written "#ifndef X" then "#define X") stays, so a header
// that several kernels paste in (kernels/gemm_cpu.h) is read once.
// Kernels must not define file-scope names other than macros and names
// that start with their own name (the renderer and kernels/ keep to this).
std::string one_translation_unit(const std::vector<KernelSource>& kernels);

}  // namespace tl
