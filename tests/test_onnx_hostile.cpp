// Hostile ONNX files (issue 17): every model is built here, in the test, and
// must give a tl::IOError or tl::ShapeError whose message names the problem,
// never a crash, an out-of-bounds access (the ASan build checks), a hang or
// a memory bomb. Also the overflow checks of Tensor's movement ops and the
// model inspection `tinylens-cli inspect` and the window share.
#include <onnx/onnx_pb.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "core/error.h"
#include "core/io/onnx.h"
#include "core/models/classifier.h"
#include "core/models/inspect.h"
#include "core/realize.h"
#include "tests/onnx_builder.h"
#include "tests/onnx_hostile.h"
#include "tests/testing.h"

namespace fs = std::filesystem;
using namespace tl;
using TP = onnx::TensorProto;
using tltest::Builder;
using tltest::ints_attr;
using namespace tltest::hostile;

namespace {

fs::path temp_dir(const std::string& name) { return tltest::fresh_temp_dir("hostile", name); }

// A model whose only node is `op` over initializers, with attributes set by `attrs`.
Builder one_node(const std::string& op, const std::vector<std::string>& ins,
                 const std::function<void(Builder&)>& inits, const std::function<void(onnx::NodeProto*)>& attrs = {},
                 int64_t opset = 13, int outputs = 1) {
  Builder b(opset);
  inits(b);
  std::vector<std::string> outs;
  for (int i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  for (const auto& o : outs) b.output(o, {});
  auto* n = b.node(op, ins, outs);
  if (attrs) attrs(n);
  return b;
}

}  // namespace

class TestOnnxHostile : public QObject {
  Q_OBJECT

 private slots:
  // ---- the defects of issue 17, one test each ----

  // BatchNormalization on a rank-1 input wrote past the (1, C) shape it built.
  void batchNormRank1Input() {
    auto b = one_node("BatchNormalization", {"x", "s", "b", "m", "v"}, [](Builder& b) {
      floats(b, "x", {3}, {1, 2, 3});
      for (const char* n : {"s", "b", "m", "v"}) floats(b, n, {3}, {1, 1, 1});
    });
    EXPECT_ERROR(run_error(b, "bn1"), "no channel axis");
  }

  // ... and with parameters of the wrong length for the channels.
  void batchNormWrongChannelCount() {
    auto b = one_node("BatchNormalization", {"x", "s", "b", "m", "v"}, [](Builder& b) {
      floats(b, "x", {1, 2, 2}, {1, 2, 3, 4});
      for (const char* n : {"s", "b", "m", "v"}) floats(b, n, {3}, {1, 1, 1});
    });
    EXPECT_ERROR(run_error(b, "bnc"), "channels");
  }

  // Concat of scalars wrote through a reference to a missing axis.
  void concatOfScalars() {
    auto b = one_node("Concat", {"a", "c"}, [](Builder& b) {
      floats(b, "a", {}, {1});
      floats(b, "c", {}, {2});
    }, [](onnx::NodeProto* n) { int_attr(n, "axis", 0); });
    EXPECT_ERROR(run_error(b, "concat0"), "rank-0");
  }

  // Concat with mismatched ranks read past the smaller shape and data.
  void concatMismatchedRanks() {
    for (int64_t axis : {0, 1}) {
      auto b = one_node("Concat", {"a", "c"}, [](Builder& b) {
        floats(b, "a", {2, 3}, {1, 2, 3, 4, 5, 6});
        floats(b, "c", {2}, {7, 8});
      }, [axis](onnx::NodeProto* n) { int_attr(n, "axis", axis); });
      EXPECT_ERROR(run_error(b, "concatrank"), "does not match input 0");
    }
    // Same rank, other sizes outside the axis.
    auto b = one_node("Concat", {"a", "c"}, [](Builder& b) {
      floats(b, "a", {2, 3}, {1, 2, 3, 4, 5, 6});
      floats(b, "c", {1, 2}, {7, 8});
    }, [](onnx::NodeProto* n) { int_attr(n, "axis", 0); });
    EXPECT_ERROR(run_error(b, "concatsize"), "outside axis 0");
  }

  // Unsqueeze with an axis beyond the new rank (or repeated) read past the shape.
  void unsqueezeAxes() {
    auto out_of_range = one_node("Unsqueeze", {"x", "axes"}, [](Builder& b) {
      floats(b, "x", {2}, {1, 2});
      ints(b, "axes", {1}, {5});
    });
    EXPECT_ERROR(run_error(out_of_range, "unsq"), "axis 5 out of range for rank 2");
    auto repeated = one_node("Unsqueeze", {"x", "axes"}, [](Builder& b) {
      floats(b, "x", {2}, {1, 2});
      ints(b, "axes", {2}, {0, 0});
    });
    EXPECT_ERROR(run_error(repeated, "unsq2"), "repeated");
  }

  // Flatten with an axis past the rank read past the shape.
  void flattenAxis() {
    for (int64_t axis : {7, -9}) {
      auto b = one_node("Flatten", {"x"}, [](Builder& b) { floats(b, "x", {2, 2}, {1, 2, 3, 4}); },
                        [axis](onnx::NodeProto* n) { int_attr(n, "axis", axis); });
      EXPECT_ERROR(run_error(b, "flatten"), "out of range for rank 2");
    }
  }

  // ScatterND with index tuples longer than the data's rank read past its shape;
  // updates of the wrong shape read past their data.
  void scatterNDShapes() {
    auto too_long = one_node("ScatterND", {"d", "i", "u"}, [](Builder& b) {
      floats(b, "d", {2}, {1, 2});
      ints(b, "i", {1, 3}, {0, 0, 0});
      floats(b, "u", {1}, {9});
    });
    EXPECT_ERROR(run_error(too_long, "scnd"), "index tuples of length 3");
    auto short_updates = one_node("ScatterND", {"d", "i", "u"}, [](Builder& b) {
      floats(b, "d", {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
      ints(b, "i", {3, 1}, {0, 1, 2});
      floats(b, "u", {1, 2}, {9, 9});
    });
    EXPECT_ERROR(run_error(short_updates, "scnd2"), "updates have shape");
    auto scalar_indices = one_node("ScatterND", {"d", "i", "u"}, [](Builder& b) {
      floats(b, "d", {2}, {1, 2});
      ints(b, "i", {}, {0});
      floats(b, "u", {}, {9});
    });
    EXPECT_ERROR(run_error(scalar_indices, "scnd3"), "rank 0");
    auto elements = one_node("ScatterElements", {"d", "i", "u"}, [](Builder& b) {
      floats(b, "d", {2, 2}, {1, 2, 3, 4});
      ints(b, "i", {2}, {0, 1});
      floats(b, "u", {2}, {9, 9});
    });
    EXPECT_ERROR(run_error(elements, "scel"), "data's rank");
  }

  // Gather on a rank-0 tensor dereferenced a missing axis.
  void gatherOnScalar() {
    auto b = one_node("Gather", {"d", "i"}, [](Builder& b) {
      floats(b, "d", {}, {1});
      ints(b, "i", {}, {0});
    });
    EXPECT_ERROR(run_error(b, "gather0"), "rank-0");
    auto far = one_node("Gather", {"d", "i"}, [](Builder& b) {
      floats(b, "d", {3}, {1, 2, 3});
      ints(b, "i", {1}, {INT64_MIN});
    });
    EXPECT_ERROR(run_error(far, "gatherfar"), "out of range");
  }

  // An external-data offset of INT64_MAX overflowed offset + length.
  void externalDataOffsetOverflow() {
    fs::path dir = temp_dir("extoff");
    { std::ofstream(dir / "w.bin", std::ios::binary) << std::string(64, '\0'); }
    for (const std::string& offset : {std::to_string(INT64_MAX), std::string("18446744073709551615"),
                                      std::string("-8"), std::string("12abc")}) {
      Builder b;
      b.output("y", {"4"});
      TP* W = b.init("W", {4}, TP::FLOAT);
      W->set_data_location(TP::EXTERNAL);
      for (auto [k, v] : {std::pair<std::string, std::string>{"location", "w.bin"}, {"offset", offset}}) {
        auto* e = W->add_external_data();
        e->set_key(k);
        e->set_value(v);
      }
      b.node("Identity", {"W"}, {"y"});
      const std::string path = b.save(dir / "m.onnx");
      EXPECT_ERROR(error_of([&] { OnnxModel m(path); }), "offset");
    }
    // A valid offset whose end passes the file's end.
    Builder b;
    b.output("y", {"4"});
    TP* W = b.init("W", {4}, TP::FLOAT);
    W->set_data_location(TP::EXTERNAL);
    for (auto [k, v] : {std::pair<std::string, std::string>{"location", "w.bin"}, {"offset", "60"}}) {
      auto* e = W->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    b.node("Identity", {"W"}, {"y"});
    const std::string path = b.save(dir / "m.onnx");
    EXPECT_ERROR(error_of([&] { OnnxModel m(path); }), "too short");
    fs::remove_all(dir);
  }

  // External data must stay inside the model's folder: no absolute path, no
  // "..", no link out; errors say nothing of the files outside.
  void externalDataOutsideTheFolder() {
    fs::path root = temp_dir("extout");
    fs::path dir = root / "model";
    fs::create_directories(dir);
    { std::ofstream(root / "secret.bin", std::ios::binary) << std::string(4096, 'x'); }
    fs::create_symlink(root / "secret.bin", dir / "link.bin");
    fs::create_directory_symlink(root, dir / "up");
    struct Case {
      std::string location, expect;
    };
    for (const Case& c : {Case{"/etc/hostname", "absolute path"}, Case{(root / "secret.bin").string(), "absolute path"},
                          Case{"../secret.bin", "'..'"}, Case{"sub/../../secret.bin", "'..'"},
                          Case{"link.bin", "outside the model's folder"}, Case{"up/secret.bin", "outside the model's folder"},
                          Case{"missing.bin", "cannot be opened"}, Case{".", "cannot be opened"}}) {
      Builder b;
      b.output("y", {"4"});
      TP* W = b.init("W", {4}, TP::FLOAT);
      W->set_data_location(TP::EXTERNAL);
      auto* e = W->add_external_data();
      e->set_key("location");
      e->set_value(c.location);
      b.node("Identity", {"W"}, {"y"});
      const std::string path = b.save(dir / "m.onnx");
      std::string msg = error_of([&] { OnnxModel m(path); });
      EXPECT_ERROR(msg, c.expect);
      // Nothing about the file outside: not its size, not its contents.
      for (size_t at; (at = msg.find(root.string())) != std::string::npos;) msg.erase(at, root.string().size());
      QVERIFY2(!has(msg, "4096") && !has(msg, "xxxx"), msg.c_str());
      // The window's statistics read the same way and show the tensor without them.
      OnnxGraphInfo info = inspect_onnx(path);
      QCOMPARE(info.initializers.size(), size_t(1));
      QVERIFY(!info.initializers[0].has_stats);
    }
    fs::remove_all(root);
  }

  // One external region named by hundreds of initializers: each load (and the
  // window's statistics) would read and hold it again.
  void externalDataNamedManyTimes() {
    fs::path dir = temp_dir("extmany");
    { std::ofstream(dir / "w.bin", std::ios::binary) << std::string(1 << 20, '\0'); }
    Builder b;
    b.output("y", {"262144"});
    for (int i = 0; i < 200; ++i) {
      TP* W = b.init("W" + std::to_string(i), {1 << 18}, TP::FLOAT);
      W->set_data_location(TP::EXTERNAL);
      auto* e = W->add_external_data();
      e->set_key("location");
      e->set_value("w.bin");
    }
    b.node("Identity", {"W0"}, {"y"});
    const std::string path = b.save(dir / "m.onnx");
    EXPECT_ERROR(error_of([&] { OnnxModel m(path); }), "the initializers of");
    EXPECT_ERROR(error_of([&] { inspect_onnx(path); }), "the initializers of");
    fs::remove_all(dir);
  }

  // MaxPool with a kernel of INT64_MIN overflowed; stride 0 divided by zero.
  void poolAttributes() {
    struct Case {
      const char* attr;
      std::vector<int64_t> value;
      const char* expect;
    };
    for (const Case& k : {Case{"kernel_shape", {INT64_MIN, 1}, "kernel_shape"}, Case{"kernel_shape", {0, 1}, "kernel_shape"},
                          Case{"strides", {0, 1}, "strides"}, Case{"strides", {-1, 1}, "strides"},
                          Case{"dilations", {INT64_MAX, 1}, "dilations"}, Case{"pads", {0, 0, INT64_MAX, 0}, "pads"},
                          Case{"pads", {-5, 0, 0, 0}, "pads"}, Case{"strides", {1}, "do not match"}}) {
      for (const char* op : {"MaxPool", "AveragePool"}) {
        auto b = one_node(op, {"x"}, [](Builder& b) { floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4}); },
                          [&](onnx::NodeProto* n) {
                            if (std::string(k.attr) != "kernel_shape") ints_attr(n, "kernel_shape", {1, 1});
                            ints_attr(n, k.attr, k.value);
                          });
        EXPECT_ERROR(run_error(b, "pool"), k.expect);
      }
    }
    // A window of millions of taps is refused, not unrolled.
    auto huge = one_node("MaxPool", {"x"}, [](Builder& b) { floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4}); },
                         [](onnx::NodeProto* n) {
                           ints_attr(n, "kernel_shape", {3000, 3000});
                           ints_attr(n, "pads", {1500, 1500, 1500, 1500});
                         });
    EXPECT_ERROR(run_error(huge, "poolhuge"), "taps");
    // Conv shares the geometry checks.
    auto conv = one_node("Conv", {"x", "w"}, [](Builder& b) {
      floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
      floats(b, "w", {1, 1, 1, 1}, {1});
    }, [](onnx::NodeProto* n) { ints_attr(n, "strides", {0, 0}); });
    EXPECT_ERROR(run_error(conv, "conv"), "strides");
  }

  // An 86-byte model declaring an output of [1, 2^40] classes sent the label
  // loop into minutes and gigabytes.
  void hugeDeclaredOutput() {
    fs::path dir = temp_dir("huge");
    Builder b;
    b.input("x", {"1", "3", "224", "224"});
    b.output("y", {"1", std::to_string(int64_t(1) << 40)});
    b.node("Flatten", {"x"}, {"y"});
    const std::string path = b.save(dir / "m.onnx");
    EXPECT_ERROR(error_of([&] { load_classifier(path); }), "declares a dimension of 1099511627776");
    EXPECT_ERROR(error_of([&] { OnnxModel m(path); }), "1099511627776");
    // Within the declared-shape limit, the labels are still held to the budget.
    Builder c;
    c.input("x", {"1", "3", "224", "224"});
    c.output("y", {"1", std::to_string(int64_t(1) << 23)});
    c.node("Flatten", {"x"}, {"y"});
    const std::string path2 = c.save(dir / "m2.onnx");
    EXPECT_ERROR(error_of([&] { load_classifier(path2); }), "labels");
    // And a huge declared input image.
    Builder d;
    d.input("x", {"1", "3", "100000", "100000"});
    d.output("y", {"1", "10"});
    d.node("Flatten", {"x"}, {"y"});
    const std::string path3 = d.save(dir / "m3.onnx");
    EXPECT_ERROR(error_of([&] { load_classifier(path3); }), "100000");
    fs::remove_all(dir);
  }

  // Initializers declaring more elements than the file holds.
  void absurdInitializers() {
    auto negative = one_node("Identity", {"w"}, [](Builder& b) { b.init("w", {-1, 4}, TP::FLOAT); });
    EXPECT_ERROR(run_error(negative, "neg"), "negative dimension");
    auto huge = one_node("Identity", {"w"}, [](Builder& b) { b.init("w", {1 << 30, 1 << 30}, TP::FLOAT); });
    EXPECT_ERROR(run_error(huge, "huge"), "absurdly large");
    auto missing = one_node("Identity", {"w"}, [](Builder& b) { b.init("w", {1 << 20}, TP::FLOAT); });
    EXPECT_ERROR(run_error(missing, "missing"), "needs 1048576");
  }

  // Runaway lazy graphs: a chain of 20000 elementwise nodes overflowed the
  // stack of a realize (and 5000 took minutes to fuse); a Concat of thousands
  // of inputs built a chain of thousands of additions.
  void deepAndWideGraphs() {
    fs::path dir = temp_dir("deep");
    Builder chain;
    chain.input("x", {"1", "4"});
    chain.output("y", {"1", "4"});
    std::string prev = "x";
    const int n = 19998;  // (Relu, Neg, Neg) 6666 times
    for (int i = 0; i < n; ++i) {
      const std::string out = i == n - 1 ? "y" : "r" + std::to_string(i);
      chain.node(i % 3 == 0 ? "Relu" : "Neg", {prev}, {out});
      prev = out;
    }
    OnnxModel deep(chain.save(dir / "deep.onnx"));
    auto y = deep.run({Tensor::from_data({1, -2, 3, -4}, {1, 4})})[0].to_vector();
    QCOMPARE(y, (std::vector<float>{1, 0, 3, 0}));  // relu(x)
    // Views alone move no data but are lowered into one kernel recursively:
    // 20000 Transposes (at 4096 views a kernel, the sanitized build's stack
    // overflowed) are cut into kernels of a bounded depth.
    Builder views;
    views.input("x", {"2", "3"});
    views.output("y", {"2", "3"});
    prev = "x";
    for (int i = 0; i < 20000; ++i) {
      const std::string out = i == 19999 ? "y" : "t" + std::to_string(i);
      tltest::ints_attr(views.node("Transpose", {prev}, {out}), "perm", {1, 0});
      prev = out;
    }
    OnnxModel transposes(views.save(dir / "views.onnx"));
    const std::vector<float> x6{1, 2, 3, 4, 5, 6};
    QCOMPARE(transposes.run({Tensor::from_data(x6, {2, 3})})[0].to_vector(), x6);
    Builder wide;
    wide.output("y", {"3000"});
    std::vector<std::string> parts;
    for (int i = 0; i < 3000; ++i) parts.push_back("x");
    wide.input("x", {"1"});
    int_attr(wide.node("Concat", parts, {"y"}), "axis", 0);
    OnnxModel cat(wide.save(dir / "wide.onnx"));
    auto c = cat.run({Tensor::from_data({2.5f}, {1})})[0].to_vector();
    QCOMPARE(c.size(), size_t(3000));
    QCOMPARE(c[0], 2.5f);
    QCOMPARE(c[2999], 2.5f);
    fs::remove_all(dir);
  }

  // A graph whose computed logits contradict its declared (N, classes) output.
  void classifierOutputContradictsDeclaration() {
    fs::path dir = temp_dir("logits");
    Builder b;
    b.input("x", {"1", "3", "8", "8"});
    b.output("y", {"1", "10"});
    b.node("Flatten", {"x"}, {"y"});  // computes (1, 192)
    const std::string path = b.save(dir / "m.onnx");
    auto model = load_classifier(path);
    EXPECT_ERROR(error_of([&] { model->forward(Tensor::zeros({1, 3, 8, 8})); }), "declares logits (N, 10)");
    fs::remove_all(dir);
  }

  // ---- the same classes of bug, audited across the other handlers ----
  void auditedOps() {
    struct Case {
      const char* name;
      Builder model;
      const char* expect;
    };
    const auto f4 = [](Builder& b) { floats(b, "x", {2, 2}, {1, 2, 3, 4}); };
    std::vector<Case> cases;
    cases.push_back({"Reshape to a negative size", one_node("Reshape", {"x", "s"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "s", {2}, {-2, -2});
                     }), "negative size"});
    cases.push_back({"Reshape overflowing", one_node("Reshape", {"x", "s"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "s", {3}, {INT64_MAX, INT64_MAX, 0});
                     }, [](onnx::NodeProto* n) { int_attr(n, "allowzero", 1); }), "too many elements"});
    cases.push_back({"Expand to a negative size", one_node("Expand", {"x", "s"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "s", {2}, {-1, 2});
                     }), "negative size"});
    cases.push_back({"Expand to 2^62 elements", one_node("Expand", {"x", "s"}, [&](Builder& b) {
                       floats(b, "x", {1}, {1});
                       ints(b, "s", {2}, {int64_t(1) << 31, int64_t(1) << 31});
                     }), "elements"});
    cases.push_back({"Tile with negative repeats", one_node("Tile", {"x", "r"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "r", {2}, {-3, 1});
                     }), "negative repeat"});
    cases.push_back({"Tile past the budget", one_node("Tile", {"x", "r"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "r", {2}, {INT64_MAX, INT64_MAX});
                     }), "elements"});
    cases.push_back({"ConstantOfShape huge", one_node("ConstantOfShape", {"s"}, [&](Builder& b) {
                       ints(b, "s", {3}, {1 << 20, 1 << 20, 1 << 20});
                     }), "may hold (the file does not hold that much data; for a file you trust, TINYLENS_TRUST_FILES=1"});
    cases.push_back({"ConstantOfShape negative", one_node("ConstantOfShape", {"s"}, [&](Builder& b) {
                       ints(b, "s", {2}, {-4, 4});
                     }), "negative dimension"});
    cases.push_back({"Range of 2^40", one_node("Range", {"a", "l", "d"}, [&](Builder& b) {
                       floats(b, "a", {}, {0});
                       floats(b, "l", {}, {1e12f});
                       floats(b, "d", {}, {1});
                     }), "Range of"});
    cases.push_back({"Range running backwards forever", one_node("Range", {"a", "l", "d"}, [&](Builder& b) {
                       floats(b, "a", {}, {0});
                       floats(b, "l", {}, {-3e38f});
                       floats(b, "d", {}, {1e-30f});
                     }), ""});
    cases.push_back({"Resize antialiased by a tiny scale", one_node("Resize", {"x", "", "s"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 1, 4096}, std::vector<float>(4096, 1.f));
                       floats(b, "s", {4}, {1, 1, 1, 1.0f / 4096});
                     }, [](onnx::NodeProto* n) {
                       int_attr(n, "antialias", 1);
                       auto* a = n->add_attribute();
                       a->set_name("mode");
                       a->set_type(onnx::AttributeProto::STRING);
                       a->set_s("linear");
                     }, 18), ""});
    cases.push_back({"Split into zero outputs", one_node("Split", {"x"}, f4, [](onnx::NodeProto* n) {
                       int_attr(n, "num_outputs", 0);
                     }, 18), "num_outputs"});
    cases.push_back({"Split sizes not adding up", one_node("Split", {"x", "s"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "s", {2}, {5, -3});
                     }, {}, 13, 2), "split size"});
    cases.push_back({"Slice step INT64_MIN", one_node("Slice", {"x", "s", "e", "a", "st"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "s", {1}, {1});
                       ints(b, "e", {1}, {0});
                       ints(b, "a", {1}, {0});
                       ints(b, "st", {1}, {INT64_MIN});
                     }), "cannot be negated"});
    cases.push_back({"Slice axis out of range", one_node("Slice", {"x", "s", "e", "a"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "s", {1}, {0});
                       ints(b, "e", {1}, {1});
                       ints(b, "a", {1}, {9});
                     }), "out of range"});
    cases.push_back({"TopK with k beyond the axis", one_node("TopK", {"x", "k"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "k", {1}, {1000000});
                     }, {}, 13, 2), "k = 1000000"});
    cases.push_back({"Resize with a NaN scale", one_node("Resize", {"x", "", "s"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "s", {4}, {1, 1, NAN, 1});
                     }), "scale"});
    cases.push_back({"Resize to a huge size", one_node("Resize", {"x", "", "", "z"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       ints(b, "z", {4}, {1, 1, 1 << 29, 1 << 29});
                     }), "elements"});
    cases.push_back({"Pad by INT64_MAX", one_node("Pad", {"x", "p"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "p", {4}, {INT64_MAX, 0, INT64_MAX, 0});
                     }), "pads"});
    cases.push_back({"Pad reflect wider than the axis", one_node("Pad", {"x", "p"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "p", {4}, {5, 0, 0, 0});
                     }, [](onnx::NodeProto* n) {
                       auto* a = n->add_attribute();
                       a->set_name("mode");
                       a->set_type(onnx::AttributeProto::STRING);
                       a->set_s("reflect");
                     }), "reflect padding"});
    cases.push_back({"GatherND with scalar indices", one_node("GatherND", {"x", "i"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "i", {}, {0});
                     }), "rank 0"});
    cases.push_back({"GatherND with tuples too long", one_node("GatherND", {"x", "i"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "i", {1, 3}, {0, 0, 0});
                     }), "index tuples"});
    cases.push_back({"OneHot of a huge depth", one_node("OneHot", {"i", "d", "v"}, [&](Builder& b) {
                       ints(b, "i", {2}, {0, 1});
                       ints(b, "d", {}, {int64_t(1) << 40});
                       floats(b, "v", {2}, {0, 1});
                     }), "elements"});
    cases.push_back({"CumSum axis out of range", one_node("CumSum", {"x", "a"}, [&](Builder& b) {
                       floats(b, "x", {1}, {1});
                       ints(b, "a", {}, {3});
                     }), "out of range"});
    cases.push_back({"QuantizeLinear axis out of range", one_node("QuantizeLinear", {"x", "s"}, [&](Builder& b) {
                       f4(b);
                       floats(b, "s", {2}, {1, 1});
                     }, [](onnx::NodeProto* n) { int_attr(n, "axis", 5); }), "out of range"});
    cases.push_back({"ConvTranspose with short strides", one_node("ConvTranspose", {"x", "w"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "w", {1, 1, 1, 1}, {1});
                     }, [](onnx::NodeProto* n) { ints_attr(n, "strides", {2}); }), "strides has 1 entries"});
    cases.push_back({"ConvTranspose with group 0", one_node("ConvTranspose", {"x", "w"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "w", {1, 1, 1, 1}, {1});
                     }, [](onnx::NodeProto* n) { int_attr(n, "group", 0); }), "group"});
    cases.push_back({"Conv with mismatched kernel_shape", one_node("Conv", {"x", "w"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "w", {1, 1, 1, 1}, {1});
                     }, [](onnx::NodeProto* n) { ints_attr(n, "kernel_shape", {2, 2}); }), "kernel_shape"});
    cases.push_back({"Conv with a wrong bias", one_node("Conv", {"x", "w", "b"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "w", {1, 1, 1, 1}, {1});
                       floats(b, "b", {3}, {1, 1, 1});
                     }), "bias"});
    cases.push_back({"InstanceNormalization on rank 1", one_node("InstanceNormalization", {"x", "s", "b"}, [&](Builder& b) {
                       floats(b, "x", {2}, {1, 2});
                       floats(b, "s", {2}, {1, 1});
                       floats(b, "b", {2}, {1, 1});
                     }), "channel axis"});
    cases.push_back({"Col2Im with block 0", one_node("Col2Im", {"x", "i", "k"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 4}, {1, 2, 3, 4});
                       ints(b, "i", {2}, {2, 2});
                       ints(b, "k", {2}, {0, 1});
                     }, {}, 18), "must be positive"});
    cases.push_back({"RoiAlign with output_height -1", one_node("RoiAlign", {"x", "r", "i"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "r", {1, 4}, {0, 0, 1, 1});
                       ints(b, "i", {1}, {0});
                     }, [](onnx::NodeProto* n) { int_attr(n, "output_height", -1); }, 16), "output_height"});
    cases.push_back({"RoiAlign with a huge box", one_node("RoiAlign", {"x", "r", "i"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "r", {1, 4}, {0, 0, 3e38f, 3e38f});
                       ints(b, "i", {1}, {0});
                     }, {}, 16), "region 0"});
    cases.push_back({"MaxUnpool to a negative size", one_node("MaxUnpool", {"x", "i"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 1, 1}, {1});
                       ints(b, "i", {1, 1, 1, 1}, {0});
                     }, [](onnx::NodeProto* n) {
                       ints_attr(n, "kernel_shape", {1, 1});
                       ints_attr(n, "pads", {5, 5, 5, 5});
                     }, 11), "negative dimension"});
    cases.push_back({"DFT of a huge length", one_node("DFT", {"x", "l"}, [&](Builder& b) {
                       floats(b, "x", {1, 4096, 1}, std::vector<float>(4096, 1.f));
                       ints(b, "l", {}, {1 << 20});
                     }, {}, 17), "steps"});
    cases.push_back({"EyeLike with k = INT64_MAX", one_node("EyeLike", {"x"}, f4, [](onnx::NodeProto* n) {
                       int_attr(n, "k", INT64_MAX);
                     }), ""});
    cases.push_back({"ReverseSequence on one axis", one_node("ReverseSequence", {"x", "l"}, [&](Builder& b) {
                       f4(b);
                       ints(b, "l", {2}, {1, 1});
                     }, [](onnx::NodeProto* n) {
                       int_attr(n, "batch_axis", 0);
                       int_attr(n, "time_axis", 0);
                     }, 10), "both 0"});
    cases.push_back({"GridSample with a NaN grid", one_node("GridSample", {"x", "g"}, [&](Builder& b) {
                       floats(b, "x", {1, 1, 2, 2}, {1, 2, 3, 4});
                       floats(b, "g", {1, 1, 2, 2}, {NAN, 1e30f, -INFINITY, 3e38f});
                     }, {}, 16), ""});
    cases.push_back({"GroupNormalization on rank 1", one_node("GroupNormalization", {"x", "s", "b"}, [&](Builder& b) {
                       floats(b, "x", {2}, {1, 2});
                       floats(b, "s", {1}, {1});
                       floats(b, "b", {1}, {1});
                     }, [](onnx::NodeProto* n) { int_attr(n, "num_groups", 1); }, 18), "rank 1"});
    {
      // A product of two operands expanded from single numbers: 3.4e10 multiply-adds.
      Builder mm;
      floats(mm, "one", {1, 1}, {1});
      ints(mm, "sa", {2}, {2048, 8192});
      ints(mm, "sb", {2}, {8192, 2048});
      mm.node("Expand", {"one", "sa"}, {"a"});
      mm.node("Expand", {"one", "sb"}, {"b"});
      mm.node("MatMul", {"a", "b"}, {"y0"});
      mm.output("y0", {});
      cases.push_back({"MatMul of huge expanded operands", mm, "multiply-adds"});
    }
    cases.push_back({"GatherElements selecting too much", one_node("GatherElements", {"x", "i"}, [&](Builder& b) {
                       floats(b, "x", {1, 8192}, std::vector<float>(8192, 1.f));
                       ints(b, "i", {1, 8192}, std::vector<int64_t>(8192, 0));
                     }, [](onnx::NodeProto* n) { int_attr(n, "axis", 1); }), "the selection"});
    for (auto& c : cases) {
      const std::string msg = run_error(c.model, "audit");
      if (std::string(c.expect).empty()) {
        // A valid (if odd) model: it runs or fails cleanly, never anything else.
        QVERIFY2(!has(msg, "UNEXPECTED"), (std::string(c.name) + ": " + msg).c_str());
        continue;
      }
      QVERIFY2(!msg.empty() && !has(msg, "UNEXPECTED") && has(msg, c.expect),
               (std::string(c.name) + ": got '" + msg + "'").c_str());
    }
  }

  // Resize of an empty axis to a non-empty one indexed before the start of its
  // interpolation matrix (found by fuzz_onnx), in every mode.
  void resizeFromAnEmptyAxis() {
    for (const char* mode : {"nearest", "linear", "cubic"}) {
      auto b = one_node("Resize", {"x", "", "", "sizes"}, [](Builder& b) {
        floats(b, "x", {1, 1, 0, 2}, {});
        ints(b, "sizes", {4}, {1, 1, 4, 4});
      }, [&](onnx::NodeProto* n) {
        auto* a = n->add_attribute();
        a->set_name("mode");
        a->set_type(onnx::AttributeProto::STRING);
        a->set_s(mode);
      });
      EXPECT_ERROR(run_error(b, "resize0"), "axis 2 has length 0: no values to resize to length 4");
    }
  }

  // Every Reduce* over an input of shape (3, 2, 0), all axes kept: the
  // value ONNX defines over no elements (a kernel once divided by the empty
  // axis: found by fuzz_onnx). ArgMax along the empty axis has no answer.
  void reductionsOverAnEmptyAxis() {
    const float inf = INFINITY;
    const std::map<std::string, float> expect = {
        {"ReduceSum", 0},       {"ReduceMax", -inf},    {"ReduceMin", inf},    {"ReduceProd", 1},
        {"ReduceSumSquare", 0}, {"ReduceL1", 0},        {"ReduceL2", 0},       {"ReduceLogSum", -inf},
        {"ReduceLogSumExp", -inf}, {"ReduceMean", NAN}};
    fs::path dir = temp_dir("reduce0");
    for (const auto& [op, value] : expect) {
      Builder b(18);
      b.input("x", {"3", "2", "0"});
      b.output("y", {});
      b.node(op, {"x"}, {"y"});
      OnnxModel m(b.save(dir / (op + ".onnx")));
      std::vector<float> y;
      const std::string err = error_of([&] { y = m.run({Tensor::zeros({3, 2, 0})})[0].to_vector(); });
      QVERIFY2(err.empty(), (op + ": " + err).c_str());
      QVERIFY2(y.size() == 1 && (std::isnan(value) ? std::isnan(y[0]) : y[0] == value),
               (op + ": got " + (y.empty() ? std::string("nothing") : std::to_string(y[0]))).c_str());
    }
    fs::remove_all(dir);
    auto arg = one_node("ArgMax", {"x"}, [](Builder& b) { floats(b, "x", {3, 0}, {}); },
                        [](onnx::NodeProto* n) { int_attr(n, "axis", 1); });
    EXPECT_ERROR(run_error(arg, "argmax0"), "has no elements");
  }

  // ---- Tensor's own size arithmetic ----
  void tensorOverflow() {
    Tensor x = Tensor::zeros({2, 3});
    EXPECT_ERROR(error_of([&] { x.reshape({INT64_MAX, INT64_MAX}); }), "multiply past 64 bits");
    EXPECT_ERROR(error_of([&] { x.reshape({-5, 2}); }), "negative size");
    EXPECT_ERROR(error_of([&] { x.pad({{INT64_MAX, INT64_MAX}, {0, 0}}); }), "overflows 64 bits");
    EXPECT_ERROR(error_of([&] { x.pad({{INT64_MIN, 0}, {0, 0}}); }), "cannot be negated");
    EXPECT_ERROR(error_of([&] { x.pad({{-INT64_MAX, -INT64_MAX}, {0, 0}}); }), "overflows 64 bits");
    EXPECT_ERROR(error_of([&] { x.slice(0, 0, 2, INT64_MIN); }), "cannot be negated");
    QCOMPARE(x.slice(1, 0, 3, INT64_MAX).shape(), (Shape{2, 1}));
    QCOMPARE(x.slice(1, 2, -INT64_MAX, -INT64_MAX).shape(), (Shape{2, 1}));
    EXPECT_ERROR(error_of([&] { x.reshape({2, 3, 1}).expand({2, 3, -7}); }), "cannot expand");
    EXPECT_ERROR(error_of([&] { Tensor::zeros({INT64_MAX, 4}); }), "spans more than 2^48");
    EXPECT_ERROR(error_of([&] { Tensor::arange(0, NAN, 1); }), "arange");
    EXPECT_ERROR(error_of([&] { Tensor::arange(0, 1e300, 1); }), "arange");
    QCOMPARE(Tensor::arange(0, -1e300, 1).numel(), int64_t(0));  // empty, not a conversion out of range
    EXPECT_ERROR(error_of([&] {
                   Conv2dOptions o;
                   o.dilation_h = INT64_MAX;
                   Tensor::zeros({1, 1, 4, 4}).conv2d(Tensor::zeros({1, 1, 3, 3}), Tensor(), o);
                 }),
                 "overflows 64 bits");
  }

  // ---- the inspection the window and `tinylens-cli inspect` share ----
  void inspectionOfAGoodAndAHostileFile() {
    fs::path dir = temp_dir("inspect");
    Builder b;
    b.input("x", {"1", "2"});
    b.output("y", {"1", "3"});
    floats(b, "W", {2, 3}, {1, 2, 3, 4, 5, 6});
    b.node("MatMul", {"x", "W"}, {"xw"});
    b.node("Relu", {"xw"}, {"y"});
    b.node("Frobnicate", {"y"}, {"z"}, "com.example");
    const std::string path = b.save(dir / "m.onnx");
    ModelInspection info = inspect_model_file(path);
    QCOMPARE(info.format, std::string("onnx"));
    QVERIFY(info.graph.has_value());
    QCOMPARE(info.graph->nodes.size(), size_t(3));
    QCOMPARE(info.unsupported, 1);
    QVERIFY(!info.classifier);  // an unsupported node: no classifier
    QVERIFY2(has(info.classifier_error, "com.example::Frobnicate"), info.classifier_error.c_str());
    const std::string text = format_inspection(info);
    QVERIFY2(has(text, "MatMul") && has(text, "com.example::Frobnicate") && has(text, "parameters: 6"), text.c_str());

    // A hostile file: one IOError naming the problem, through the same call.
    Builder h;
    h.output("y", {"4"});
    TP* W = h.init("W", {4}, TP::FLOAT);
    W->set_data_location(TP::EXTERNAL);
    auto* e = W->add_external_data();
    e->set_key("location");
    e->set_value("/etc/hostname");
    h.node("Identity", {"W"}, {"y"});
    const std::string bad = h.save(dir / "bad.onnx");
    EXPECT_ERROR(error_of([&] { inspect_model_file(bad); }), "absolute path");
    // A graph that cannot be built with its own fixed input sizes: the shapes
    // error says why (the CLI turns it into one line and exit status 1).
    Builder bn;
    bn.input("x", {"3"});
    bn.output("y", {"3"});
    for (const char* n : {"s", "b", "m", "v"}) floats(bn, n, {3}, {1, 1, 1});
    bn.node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y"});
    ModelInspection broken = inspect_model_file(bn.save(dir / "bn.onnx"));
    QVERIFY(!broken.shapes_inferred);
    QVERIFY2(has(broken.shapes_error, "no channel axis"), broken.shapes_error.c_str());
    // Not a model at all.
    { std::ofstream(dir / "junk.onnx", std::ios::binary) << "not protobuf at all"; }
    EXPECT_ERROR(error_of([&] { inspect_model_file((dir / "junk.onnx").string()); }), "not a valid ONNX model");
    EXPECT_ERROR(error_of([&] { inspect_model_file((dir / "nothing.pth").string()); }), "nothing.pth");
    fs::remove_all(dir);
  }

  // Inspecting a graph with static shapes runs and compiles no kernel, however
  // deep it is: a chain of 20,000 Add/Relu nodes (the run computes values more
  // than 128 lazy ops deep), a large initializer (past the host-value size),
  // TopK's rounds. Watched through the core's own observers: a realize or a
  // compile would call them.
  void inspectionRunsNoKernel() {
    fs::path dir = temp_dir("nokernel");
    Builder b;
    b.input("x", {"1", "8"});
    b.output("y", {"1", "8"});
    b.output("top", {"1", "20"});
    floats(b, "one", {1, 8}, std::vector<float>(8, 1.f));
    std::vector<float> w(8 * 600);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 7) - 3;
    floats(b, "W", {8, 600}, w);
    std::string prev = "x";
    const int depth = 20000;
    for (int i = 0; i < depth; ++i) {
      const std::string out = i == depth - 1 ? "y" : "v" + std::to_string(i);
      if (i % 2 == 0) b.node("Add", {prev, "one"}, {out});
      else b.node("Relu", {prev}, {out});
      prev = out;
    }
    b.node("MatMul", {"y", "W"}, {"wide"});
    ints(b, "k", {1}, {20});
    b.node("TopK", {"wide", "k"}, {"top", "at"});
    const std::string path = b.save(dir / "deep.onnx");

    int realizes = 0, compiles = 0;
    RealizeObserver count_realizes([&](const std::vector<NodeRef>&) { ++realizes; });
    CompileProgress count_compiles([&](size_t, size_t) { ++compiles; });
    ModelInspection info = inspect_model_file(path);
    QCOMPARE(realizes, 0);
    QCOMPARE(compiles, 0);
    QVERIFY2(info.shapes_inferred, info.shapes_error.c_str());
    std::map<std::string, Shape> shapes;
    for (const auto& v : info.graph->values) shapes[v.name] = v.shape;
    QCOMPARE(shapes["v0"], (Shape{1, 8}));
    QCOMPARE(shapes["v" + std::to_string(depth - 2)], (Shape{1, 8}));
    QCOMPARE(shapes["wide"], (Shape{1, 600}));
    QCOMPARE(shapes["at"], (Shape{1, 20}));
    QCOMPARE(info.onnx_flops, 2.0 * 8 * 600);  // the MatMul's multiply-adds
    fs::remove_all(dir);
  }

  // A shape that depends on a computed value (Reshape to the sum of an input
  // and a constant) cannot be found without a kernel: inference computes it
  // (small shape arithmetic, test_onnx_budget inspectionDoesNotRunLayers)
  // and finds the shape.
  void inspectionComputesValuesAShapeNeeds() {
    fs::path dir = temp_dir("needsvalues");
    Builder b;
    b.input("s", {"2"}, TP::INT64);
    b.output("y", {"2", "4"});
    ints(b, "add", {2}, {2, 4});
    floats(b, "data", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
    b.node("Add", {"s", "add"}, {"shape"});
    b.node("Reshape", {"data", "shape"}, {"r"});
    b.node("Identity", {"r"}, {"y"});
    ModelInspection info = inspect_model_file(b.save(dir / "reshape.onnx"));
    QVERIFY2(info.shapes_inferred, info.shapes_error.c_str());
    bool found = false;
    for (const auto& v : info.graph->values)
      if (v.name == "r") {
        QCOMPARE(v.shape, (Shape{2, 4}));
        found = true;
      }
    QVERIFY(found);
    fs::remove_all(dir);
  }
};

QTEST_GUILESS_MAIN(TestOnnxHostile)
#include "test_onnx_hostile.moc"
