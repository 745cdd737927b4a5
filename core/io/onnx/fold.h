// Batch norms folded away when a model loads. In inference a
// BatchNormalization whose parameters are constants is the affine map
// y = x * s + t per channel, s = scale / sqrt(var + eps), t = B - mean * s.
// After a convolution whose weights are constants it disappears into the
// convolution: W' = W * s (per output channel), B' = (B - mean) * s + shift.
// Elsewhere it keeps its node with s and t as its scale and bias, mean 0 and
// variance 1 (epsilon 0), which op_batch_normalization reads as a plain
// multiply-add. Either way the square roots and divisions are done once, on
// the host in double precision, instead of in every kernel that reads the
// normalised value; W * s is one float multiply on the device (the weights
// of a light model exist only there: reading them back and computing in
// double cost ResNet-50 0.8 s and 300 MB of its first run).
//
// The graph is rewritten at load (fold_batch_norms); the numbers come later,
// on a device's first run (fold_values), because the constants may be values
// that nodes build (ConstantOfShape) rather than initializers.
// TINYLENS_NOFOLD=1 keeps the graph as the file has it.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/io/onnx_ops.h"

namespace tl::onnx_detail {

// Ops whose output is fixed once their inputs are: computed once per device
// when every input is an initializer or such an op's output. Kept to pure
// value builders on purpose.
bool foldable_op(const std::string& op);
// Pure ops (arithmetic, casts, reshapes, concatenation, slicing, gathers)
// whose output is also computed once per device when every input is a
// constant, but kept only when it is small (at most kFoldSmallElements): the
// shape and pad arithmetic exporters write as chains of such ops, which
// would otherwise run as a few tiny kernels and a read back on every run.
bool foldable_small_op(const std::string& op);
// The node is in the default domain ("" or "ai.onnx").
bool default_domain(const onnx::NodeProto& n);
constexpr int64_t kFoldSmallElements = 4096;
// The most elements a value kept per input shapes may have (4 MB).
constexpr int64_t kFoldByShapeElements = int64_t(1) << 20;

// Whether a run computes node `n` once and keeps it: Constant when every
// input is in `constant` (the same on every run: kept per device), ByShape
// when its value depends only on the inputs' shapes (a Shape or Size node, or
// a pure op over such values and constants: kept per device and input
// shapes). Exporters write attention masks and pad amounts as long chains of
// such ops (Swin's shifted-window masks: ScatterND over Range and Shape);
// run each time, their host ops read device values back, which stops the Jit
// from capturing the run.
enum class FoldKind { None, Constant, ByShape };
FoldKind fold_kind(const onnx::NodeProto& n, const std::set<std::string>& constant, const std::set<std::string>& by_shape);

// Readies a folded value for keeping: computed on the device, and a small
// one also on the host, as small initializers are, so that the shape
// arithmetic reading it (a Pad's amounts) reads no device data.
void make_keepable(Value& v, const std::string& device);

// The values a model keeps: per device (key: its name) or, those that depend
// on the inputs' shapes, per device and input shapes (key: "cpu (1, 3, 224,
// 224)", with a space); the oldest shapes are forgotten past kShapeKeys.
class FoldCache {
 public:
  static constexpr size_t kShapeKeys = 8;
  std::unordered_map<std::string, Value>& of(const std::string& key);

 private:
  std::map<std::string, std::unordered_map<std::string, Value>> values_;
  std::vector<std::string> shape_keys_;  // oldest first
};

// Values the rewritten graph reads that the file does not hold.
struct BatchNormFold {
  onnx::NodeProto norm;       // the BatchNormalization as the file has it (errors name it)
  std::string weight, bias;   // the convolution's W and B ("" for none); both "" when not into a conv
  std::vector<std::string> outputs;  // into a conv: W', B'; else: s, t, mean 0, variance 1
  bool into_conv() const { return !weight.empty(); }
};

struct GraphFolds {
  std::vector<BatchNormFold> folds;
  std::unordered_map<std::string, size_t> made_by;  // fold output -> index in folds
  // (removed value, kept value of the same shape): a convolution's output
  // that now flows straight into the normalisation's.
  std::vector<std::pair<std::string, std::string>> same_shape;
  // Per node of the rewritten graph, the index in the file's graph of the
  // node it is (a convolution that absorbed its normalisation: the
  // convolution's); empty when nothing was rewritten.
  std::vector<int> file_node;
  int file_index(int k) const { return size_t(k) < file_node.size() ? file_node[size_t(k)] : k; }
};

// Rewrites `g` in place (node order stays topological) and says what the
// new inputs are. `initializers` are the names the file gives values.
GraphFolds fold_batch_norms(onnx::GraphProto& g, const std::set<std::string>& initializers);

// Whether TINYLENS_NOFOLD asks for the graph as the file has it.
bool folding_disabled();

// Gives the value of a name the folds read: its numbers on the host when
// `numbers`, else possibly only its device tensor.
using Source = std::function<Value(const std::string& name, bool numbers)>;

// The values of fold `f`, in the order of f.outputs: s, t and B' computed on
// the host in double precision from the constants `source` gives, W' = W * s
// on `device`. Sizes that do not fit together are a ShapeError naming the
// BatchNormalization. Under ShapesOnly, values of the right shapes only.
std::vector<Value> fold_values(const BatchNormFold& f, const Source& source, const std::string& device);

// Puts the values of folds.folds[index] into `env`: from `cache` (the
// device's, filled on its first run), or computed from `env` and
// `initializers` and uploaded to `device`. The caller holds the lock that
// guards `cache`.
void bring_fold(const GraphFolds& folds, size_t index, const std::unordered_map<std::string, Value>& initializers,
                std::unordered_map<std::string, Value>& env, std::unordered_map<std::string, Value>& cache,
                const std::string& device);

}  // namespace tl::onnx_detail
