// A tiny ONNX model builder on the protobuf classes the core links, for
// tests that need models no file provides (unsupported ops, bad shapes).
#pragma once
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tltest {

struct Builder {
  onnx::ModelProto m;
  explicit Builder(int64_t opset = 13, const std::string& extra_domain = "") {
    m.set_ir_version(8);
    m.set_producer_name("tinylens-test");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    if (!extra_domain.empty()) {
      auto* e = m.add_opset_import();
      e->set_domain(extra_domain);
      e->set_version(1);
    }
    m.mutable_graph()->set_name("g");
  }
  static void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<std::string>& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (const auto& d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  }
  void input(const std::string& name, const std::vector<std::string>& dims, int elem = onnx::TensorProto::FLOAT) {
    set_type(m.mutable_graph()->add_input(), name, elem, dims);
  }
  void output(const std::string& name, const std::vector<std::string>& dims, int elem = onnx::TensorProto::FLOAT) {
    set_type(m.mutable_graph()->add_output(), name, elem, dims);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                        const std::string& domain = "") {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    n->set_name(op + "_" + std::to_string(m.graph().node_size()));
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  onnx::TensorProto* init(const std::string& name, std::vector<int64_t> dims, int elem) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (auto d : dims) t->add_dims(d);
    return t;
  }
  std::string save(const std::filesystem::path& path) const {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path.string();
  }
};

// Dimensions as Builder::input/output take them: {2, 3} -> {"2", "3"}.
inline std::vector<std::string> dims(const std::vector<int64_t>& shape) {
  std::vector<std::string> out;
  for (auto d : shape) out.push_back(std::to_string(d));
  return out;
}

// Sets the INTS attribute `name` of node n to v.
inline void ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

// x (1,3,8,8) -> Conv 3x3 (pad 1, `stride`; W's i-th of 108 values is
// weight(i), B is `bias`) -> Relu -> GlobalAveragePool -> Flatten -> (1, 4):
// a classifier of four classes whose run is a few small kernels, for the
// window's and the CLI's tests. Returns the path written.
template <class Weight>
std::string tiny_classifier(const std::filesystem::path& path, Weight weight, const std::vector<float>& bias,
                            int64_t stride = 1) {
  Builder b;
  b.input("x", {"1", "3", "8", "8"});
  b.output("out", {"1", "4"});
  auto* conv = b.node("Conv", {"x", "W", "B"}, {"y"});
  ints_attr(conv, "kernel_shape", {3, 3});
  ints_attr(conv, "pads", {1, 1, 1, 1});
  if (stride != 1) ints_attr(conv, "strides", {stride, stride});
  b.node("Relu", {"y"}, {"r"});
  b.node("GlobalAveragePool", {"r"}, {"p"});
  b.node("Flatten", {"p"}, {"out"});
  auto* W = b.init("W", {4, 3, 3, 3}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 108; ++i) W->add_float_data(weight(i));
  auto* B = b.init("B", {4}, onnx::TensorProto::FLOAT);
  for (float v : bias) B->add_float_data(v);
  return b.save(path);
}

// x (batch, 3, 8, 8) -> Conv 3x3 (8 filters, pad 1) -> Relu -> Conv 1x1 (4)
// [-> Relu] -> GlobalAveragePool -> Flatten -> (batch, 4): two GEMMs on the
// CPU device (the tuner's and the ONNX graph's tests). `batch` is "1" or a
// dynamic dimension's name. Returns the path written.
inline std::string two_convs(const std::filesystem::path& path, const std::string& batch = "1",
                             bool relu_after_second = false) {
  Builder b;
  b.input("x", {batch, "3", "8", "8"});
  b.output("out", {batch, "4"});
  auto* c1 = b.node("Conv", {"x", "W1", "B1"}, {"y1"});
  ints_attr(c1, "kernel_shape", {3, 3});
  ints_attr(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"y1"}, {"r1"});
  auto* c2 = b.node("Conv", {"r1", "W2", "B2"}, {"y2"});
  ints_attr(c2, "kernel_shape", {1, 1});
  if (relu_after_second) b.node("Relu", {"y2"}, {"r2"});
  b.node("GlobalAveragePool", {relu_after_second ? "r2" : "y2"}, {"p"});
  b.node("Flatten", {"p"}, {"out"});
  auto* W1 = b.init("W1", {8, 3, 3, 3}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 8 * 27; ++i) W1->add_float_data(float(std::sin(i * 0.37)));
  auto* B1 = b.init("B1", {8}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 8; ++i) B1->add_float_data(0.05f * float(i));
  auto* W2 = b.init("W2", {4, 8, 1, 1}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 32; ++i) W2->add_float_data(float(std::cos(i * 0.53)));
  auto* B2 = b.init("B2", {4}, onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) B2->add_float_data(0.1f * float(i));
  return b.save(path);
}

// An empty folder of its own for one test's files:
// <temp>/tinylens-<suite>-<name>-<pid>, emptied if a crashed run left it and
// removed when the suite exits.
inline std::filesystem::path fresh_temp_dir(const std::string& suite, const std::string& name) {
  namespace fs = std::filesystem;
  struct Made {
    std::vector<fs::path> dirs;
    ~Made() {
      std::error_code ec;
      for (const fs::path& d : dirs) fs::remove_all(d, ec);
    }
  };
  static Made made;
  fs::path d = fs::temp_directory_path() / ("tinylens-" + suite + "-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  made.dirs.push_back(d);
  return d;
}

}  // namespace tltest
