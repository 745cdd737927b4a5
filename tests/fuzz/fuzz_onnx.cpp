// ONNX models from bytes: inspect (what the window draws), shape inference,
// load, and one run on the CPU device with small inputs. The ONNX loader
// takes a path, so each input is written to a per-process temporary file.
//
// Accepted outcomes: a clean run, tl::IOError (including OnnxUnsupported)
// and tl::ShapeError (a model whose shapes do not fit together). Anything
// else (a crash, a sanitizer report, CompileError or DeviceError from a
// kernel the model produced, bad_alloc) is a finding.
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
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

// Sizes that byte flips rarely make (issue 47): an initializer's dims with a
// 0 beside huge ones (no element, a span past 2^64), and huge kernels and
// windows. Returns false when `model` has nothing to mutate.
bool mutate_sizes(onnx::ModelProto& model, uint32_t seed) {
  auto* g = model.mutable_graph();
  auto pick = [&](int n) { return n > 0 ? int(seed % uint32_t(n)) : -1; };
  const int64_t huge[] = {int64_t(1) << 62, int64_t(1) << 40, 1000000, INT64_MAX};
  seed = seed * 1103515245u + 12345u;
  if (seed & 1) {
    const int i = pick(g->initializer_size());
    if (i < 0) return false;
    auto* t = g->mutable_initializer(i);
    t->clear_raw_data();
    t->clear_float_data();
    t->clear_int64_data();
    t->clear_int32_data();
    t->add_dims(0);
    t->add_dims(huge[(seed >> 1) % 4]);
    return true;
  }
  const int k = pick(g->node_size());
  if (k < 0) return false;
  auto* n = g->mutable_node(k);
  for (auto& a : *n->mutable_attribute())
    if (a.name() == "kernel_shape" || a.name() == "strides" || a.name() == "dilations" || a.name() == "pads") {
      for (int j = 0; j < a.ints_size(); ++j) a.set_ints(j, huge[(seed >> ((1 + j) % 31)) % 4]);
      return true;
    }
  return false;
}

}  // namespace

// Half the time a structural mutation of the sizes (mutate_sizes), else
// libFuzzer's byte mutations.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto model;
  if ((seed & 1) && size <= size_t(INT32_MAX) && model.ParseFromArray(data, int(size)) && mutate_sizes(model, seed >> 1)) {
    const std::string bytes = model.SerializeAsString();
    if (bytes.size() <= max_size) {
      std::memcpy(data, bytes.data(), bytes.size());
      return bytes.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tlfuzz::init_limits();
  const char* tmp = std::getenv("TMPDIR");
  g_path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tinylens_fuzz_onnx_" + std::to_string(getpid()) + ".onnx";
  std::atexit([] { std::remove(g_path.c_str()); });
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
