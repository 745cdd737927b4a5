// ONNX models from bytes: inspect (what the window draws), shape inference,
// load, and one run on the CPU device with small inputs. The ONNX loader
// takes a path, so each input is written to a per-process temporary file.
//
// Accepted outcomes: a clean run, tl::IOError (including OnnxUnsupported)
// and tl::ShapeError (a model whose shapes do not fit together). Anything
// else (a crash, a sanitizer report, CompileError or DeviceError from a
// kernel the model produced, bad_alloc) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/onnx.h"
#include "core/tensor.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

std::string g_path;

// Largest input we feed a model, in elements: enough for every conformance
// case's shapes, small enough to keep executions fast.
constexpr int64_t kMaxInputElements = 1 << 16;

tl::DType dtype_of(const std::string& onnx_type) {
  if (onnx_type == "bool") return tl::DType::boolean;
  if (onnx_type.rfind("int", 0) == 0 || onnx_type.rfind("uint", 0) == 0) return tl::DType::i32;
  return tl::DType::f32;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlfuzz::init_limits();
  const char* tmp = std::getenv("TMPDIR");
  g_path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tinylens_fuzz_onnx_" + std::to_string(getpid()) + ".onnx";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (FILE* f = std::fopen(g_path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    tl::OnnxGraphInfo info = tl::inspect_onnx(g_path);
    tl::infer_onnx_shapes(info, g_path);
    tl::OnnxModel model(g_path);
    std::vector<tl::Tensor> inputs;
    for (const tl::OnnxValueInfo& in : model.inputs()) {
      tl::Shape shape = in.shape;
      int64_t elements = 1;
      for (int64_t& d : shape) {
        if (d < 0) d = 1;
        if (d > kMaxInputElements || (elements *= d) > kMaxInputElements) return 0;
      }
      inputs.push_back(tl::Tensor::full(shape, 1, dtype_of(in.dtype), "cpu"));
    }
    for (const tl::Tensor& out : model.run(inputs)) (void)out.to_vector();
  } catch (const tl::IOError&) {
  } catch (const tl::ShapeError&) {
  }
  return 0;
}
