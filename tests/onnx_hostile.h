// Helpers of the hostile-file suites (test_onnx_hostile, test_onnx_budget):
// initializers, the error a model gives, and EXPECT_ERROR on its message.
#pragma once
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/error.h"
#include "core/io/onnx.h"
#include "tests/onnx_builder.h"

namespace tltest::hostile {

// The message of the IOError or ShapeError `f` throws; "" when it throws
// nothing, and "UNEXPECTED ..." for any other exception.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tl::IOError& e) {
    return e.what();
  } catch (const tl::ShapeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("UNEXPECTED ") + typeid(e).name() + ": " + e.what();
  }
  return "";
}

inline void floats(Builder& b, const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
  onnx::TensorProto* t = b.init(name, std::move(dims), onnx::TensorProto::FLOAT);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}
inline void ints(Builder& b, const std::string& name, std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = b.init(name, std::move(dims), onnx::TensorProto::INT64);
  for (auto x : v) t->add_int64_data(x);
}
inline void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// Loads and runs (on the cpu, with `inputs`) the model `b` describes; the
// error it gives, as error_of.
inline std::string run_error(const Builder& b, const std::string& name, const std::vector<tl::Tensor>& inputs = {}) {
  std::filesystem::path dir = fresh_temp_dir("hostile", name);
  const std::string path = b.save(dir / (name + ".onnx"));
  std::string msg = error_of([&] {
    tl::OnnxModel m(path);
    m.run(inputs);
  });
  std::filesystem::remove_all(dir);
  return msg;
}

inline bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

}  // namespace tltest::hostile

#define EXPECT_ERROR(msg, part)                                                                               \
  do {                                                                                                        \
    const std::string m_ = (msg);                                                                             \
    QVERIFY2(!m_.empty() && !tltest::hostile::has(m_, "UNEXPECTED") && tltest::hostile::has(m_, part), ("got: '" + m_ + "'").c_str()); \
  } while (0)
