#include "core/ops.h"

namespace tl {

const std::vector<OpInfo>& primitive_ops() {
  static const std::vector<OpInfo> table = {
      {Op::Buffer, "BUFFER", "data already on a device"},
      {Op::Const, "CONST", "one scalar broadcast to a shape"},
      {Op::Neg, "NEG", "-x"},
      {Op::Exp, "EXP", "e^x"},
      {Op::Log, "LOG", "natural logarithm"},
      {Op::Sqrt, "SQRT", "square root"},
      {Op::Recip, "RECIP", "1 / x"},
      {Op::Sin, "SIN", "sine (cos is a shifted sine)"},
      {Op::Cast, "CAST", "convert between float32, int32 and bool"},
      {Op::Add, "ADD", "a + b"},
      {Op::Mul, "MUL", "a * b"},
      {Op::Max, "MAX", "larger of a and b (NaN wins)"},
      {Op::Pow, "POW", "a ^ b"},
      {Op::CmpLt, "CMPLT", "a < b, as bool"},
      {Op::CmpEq, "CMPEQ", "a == b, as bool"},
      {Op::Where, "WHERE", "cond ? a : b"},
      {Op::Sum, "SUM", "sum over axes, kept as size 1"},
      {Op::ReduceMax, "MAX_REDUCE", "maximum over axes, kept as size 1"},
      {Op::Reshape, "RESHAPE", "same elements, new shape"},
      {Op::Permute, "PERMUTE", "reorder axes"},
      {Op::Expand, "EXPAND", "broadcast size-1 axes"},
      {Op::Pad, "PAD", "grow axes, filling with a value"},
      {Op::Shrink, "SHRINK", "take a sub-range of each axis"},
      {Op::Flip, "FLIP", "reverse axes"},
      {Op::Contiguous, "CONTIGUOUS", "materialise into a row-major buffer"},
  };
  return table;
}

// A field added to either struct must be added to hint_key below; then
// these sizes are updated with it.
static_assert(sizeof(ConvGather) == 12 * sizeof(int64_t) + sizeof(int64_t), "ConvGather changed: key its new field");
static_assert(sizeof(MatmulHint) == 5 * sizeof(NodeRef) + 11 * sizeof(int64_t) + sizeof(ConvGather) + sizeof(int64_t),
              "MatmulHint changed: key its new field");

std::vector<int64_t> hint_key(const MatmulHint& h) {
  const ConvGather& g = h.gather;
  const int64_t roles = (h.image ? 1 : 0) | (h.image && h.b == h.image ? 2 : 0) | (h.image && h.a == h.image ? 4 : 0) |
                        (h.gather_only ? 8 : 0) | (g.max ? 16 : 0);
  return {h.batch,       h.m,          h.n,          h.k,          h.a_strides[0], h.a_strides[1], h.a_strides[2],
          h.b_strides[0], h.b_strides[1], h.b_strides[2], roles,      g.channels,     g.height,       g.width,
          g.kernel_h,    g.kernel_w,   g.stride_h,   g.stride_w,   g.dilation_h,   g.dilation_w,   g.pad_top,
          g.pad_left,    g.out_w,      h.a_period};
}

const char* op_name(Op op) {
  for (auto& info : primitive_ops())
    if (info.op == op) return info.name;
  return "?";
}

bool is_unary(Op op) { return op >= Op::Neg && op <= Op::Cast; }
bool is_binary(Op op) { return op >= Op::Add && op <= Op::CmpEq; }
bool is_elementwise(Op op) { return is_unary(op) || is_binary(op) || op == Op::Where; }
bool is_reduce(Op op) { return op == Op::Sum || op == Op::ReduceMax; }
bool is_movement(Op op) { return op >= Op::Reshape && op <= Op::Flip; }

namespace {
thread_local int32_t current_origin = -1;
}
OriginScope::OriginScope(int32_t origin) : previous_(current_origin) { current_origin = origin; }
OriginScope::~OriginScope() { current_origin = previous_; }
int32_t OriginScope::current() { return current_origin; }

}  // namespace tl
