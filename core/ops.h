// The primitive op set. Every Tensor operation (matmul, conv2d, softmax,
// losses, ...) is built from these; a device only has to render them.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tl {

class Buffer;

enum class Op : uint8_t {
  // leaves
  Buffer,      // data that already lives on a device
  Const,       // a scalar broadcast to the node's shape
  // unary (elementwise)
  Neg, Exp, Log, Sqrt, Recip, Sin,
  Cast,        // convert to the node's dtype
  // binary (elementwise, operands already broadcast to one shape)
  Add, Mul, Max, Pow, CmpLt, CmpEq,
  // ternary
  Where,       // cond ? a : b
  // reductions over `axes`, keeping them as size 1
  Sum, ReduceMax,
  // movement: index arithmetic, never a copy unless the scheduler decides so
  Reshape, Permute, Expand,
  Pad,         // `arg` holds (before, after) per axis; `value` is the fill
  Shrink,      // `arg` holds (begin, end) per axis
  Flip,        // `arg` holds the flipped axes
  // scheduling
  Contiguous,  // materialise the source into its own row-major buffer
};

// One line per primitive, for `tinylens-cli ops` and the docs.
struct OpInfo {
  Op op;
  const char* name;
  const char* meaning;
};
const std::vector<OpInfo>& primitive_ops();
const char* op_name(Op op);

bool is_unary(Op op);
bool is_binary(Op op);
bool is_elementwise(Op op);  // unary, binary, ternary and Cast
bool is_reduce(Op op);
bool is_movement(Op op);

// A node of the lazy graph. Tensors are handles to nodes; `realize()` gives a
// node a buffer. Autograd walks the same graph.
struct MatmulHint;  // set by Tensor::matmul, lets the scheduler pick a GEMM template
struct Node;
using NodeRef = std::shared_ptr<Node>;

struct Node {
  Op op;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<NodeRef> src;
  std::vector<int64_t> arg;  // axes, permutation, new shape or (a, b) pairs
  double value = 0;          // Const value or Pad fill
  std::string device;        // registry name of the device this lives on
  std::shared_ptr<Buffer> buffer;  // set once realized (row-major, contiguous)
  std::shared_ptr<const MatmulHint> matmul;

  // autograd
  bool requires_grad = false;
  NodeRef grad;
  // When set, autograd sends this node's gradient to `gradient_twin` (an
  // expression of the same shape and values) instead of to `src`; the
  // forward pass never sees the twin. Set only by Tensor::with_gradient_of.
  NodeRef gradient_twin;

  // inspection: the composite op / layer this node came from ("conv2d",
  // "blocks.3.depthwise") and a process-unique id
  std::string scope;
  uint64_t id = next_id();
  // The model's own node this one was made for (OriginScope: an ONNX node's
  // index in its file), -1 outside any. Realize turns the origins of the
  // nodes a kernel fuses into KernelInfo::origins.
  int32_t origin = -1;

  bool realized() const { return buffer != nullptr; }
  static uint64_t next_id() {
    static std::atomic<uint64_t> counter{1};
    return counter++;
  }
};

// While alive on this thread, every node made (make in tensor.cpp) records
// `origin` as its Node::origin: OnnxModel::run sets the index of the ONNX
// node it is converting, so each kernel of the run can be mapped back to the
// nodes of the model's graph it computes. An int, set once per model node:
// nothing is formatted, and a replay carries the kernels' origins in their
// KernelInfo without looking at nodes.
class OriginScope {
 public:
  explicit OriginScope(int32_t origin);
  ~OriginScope();
  OriginScope(const OriginScope&) = delete;
  OriginScope& operator=(const OriginScope&) = delete;
  static int32_t current();  // -1 outside any

 private:
  int32_t previous_;
};

// A convolution's B operand (the im2col columns) described by the image it
// is gathered from, so that a GEMM template that can gather reads the image
// in place of a materialised copy that is KH*KW times its size:
//   B[b, (c, i, j), (oh, ow)] = x[b, c, oh*stride_h + i*dilation_h - pad_top,
//                                      ow*stride_w + j*dilation_w - pad_left]
// and zero outside x, which is (batch, channels, height, width) row-major.
struct ConvGather {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel_h = 0, kernel_w = 0;  // 0: B is a plain strided matrix
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t out_w = 0;  // output columns: n = oh * out_w + ow
  // C[b, 0, n] is then column n's largest cell inside x instead of a
  // product (a max pool of one channel per batch item; A is not read):
  // cells outside x are left out, not zero.
  bool max = false;
  bool active() const { return kernel_h > 0; }
};

// C[b, m, n] = sum_k A[b, m, k] * B[b, k, n] with A, B realized buffers read
// through the given element strides (batch, row, col).
struct MatmulHint {
  NodeRef a, b;
  // The (batch, m, k) and (batch, k, n) operands as the user's graph sees
  // them: autograd differentiates the product through these with two more
  // matmuls instead of through the generic multiply-and-sum.
  NodeRef a_in, b_in;
  int64_t batch, m, n, k;
  int64_t a_strides[3], b_strides[3];
  // A's batch index wraps every a_period items (0: never): batch item b reads
  // A at (b % a_period) * a_strides[0], so that N images' depthwise products
  // (n * C + c) share the C channels' weights without a copy per image. Only
  // a template that says so reads it (gemm_template_wraps_a).
  int64_t a_period = 0;
  // Set by Tensor::conv2d: B may instead be gathered from `image` (see
  // ConvGather); the scheduler does so where the device's template can.
  NodeRef image;
  ConvGather gather;
  // Only a template that gathers computes this product (a depthwise
  // convolution, core/depthwise.h): b is the image, and elsewhere the node
  // is computed as the expression it is.
  bool gather_only = false;
};

// Every number of a hint that decides what its node computes: the sizes,
// strides, the whole gather (window, stride, dilation, pads, max or sum) and
// which operand is the image. The operands themselves are edges of the graph
// that a key walks on its own. Every cache key that covers a hinted node
// (replay's GraphKey, the rendered-kernel signature) writes this one list, so
// a field added to the hint is keyed everywhere or nowhere: ops.cpp's
// static_asserts stop a build whose structs grew without it.
std::vector<int64_t> hint_key(const MatmulHint& h);

}  // namespace tl
