// Internal to the ONNX runtime: what every op handler uses. Ctx is one
// node being run (its inputs, attributes, opset, device and element limit);
// the helpers read attributes with bounds, build values, and hold the small
// tensor formulas (erf, floor, round-half-even...) several families share.
// Sizes, attribute values and indices come from the file: handlers ask these
// checks before they index a shape, divide by an attribute or allocate.
#pragma once
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/io/onnx.h"
#include "core/io/onnx_ops.h"
#include "core/tensor.h"
#include "core/tree_reduce.h"

namespace tl::onnx_detail {

using TP = onnx::TensorProto;
using Ints = std::vector<int64_t>;
using namespace run_limits;

// ---------- errors, attributes and checks ----------
[[noreturn]] void unsupported(const onnx::NodeProto& n, int64_t opset, const std::string& why);
[[noreturn]] void bad(const onnx::NodeProto& n, const std::string& why);
const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);
int64_t attr_i(const onnx::NodeProto& n, const std::string& name, int64_t def);
double attr_f(const onnx::NodeProto& n, const std::string& name, double def);
std::string attr_s(const onnx::NodeProto& n, const std::string& name, const std::string& def);
Ints attr_ints(const onnx::NodeProto& n, const std::string& name, const Ints& def = {});
// An axis of a tensor of rank `rank` (negative counts from the end). A rank-0
// tensor has no axis at all: every op that takes an axis needs rank >= 1.
int64_t norm_axis(int64_t axis, int64_t rank, const onnx::NodeProto& n);
// A double read from a file as an integer; NaN (which has no integer) is 0.
int64_t clamp_i64(double d);
// An attribute's value as `inspect` prints it ("[1, 2, 3]", "tensor float (2)").
std::string attribute_text(const onnx::AttributeProto& a);
// The integer attribute `name` within [lo, hi].
int64_t attr_i_in(const onnx::NodeProto& n, const std::string& name, int64_t def, int64_t lo, int64_t hi);
// Every value of the integer-list attribute `name` within [lo, hi].
Ints attr_ints_in(const onnx::NodeProto& n, const std::string& name, const Ints& def, int64_t lo, int64_t hi);
// `values` (named `what`) has exactly `count` entries.
void require_count(const onnx::NodeProto& n, const Ints& values, size_t count, const std::string& what);
// Elements of `s`, or a ShapeError naming `what` when a dimension is negative,
// the product overflows or it exceeds `max_elements`.
int64_t checked_numel(const onnx::NodeProto& n, const Shape& s, int64_t max_elements, const std::string& what);

// A float tensor of data a handler made on the host from attributes and
// shapes (a pool's divisors, a prefix sum's triangle, a resize's weights):
// the same realized tensor for the same device, shape and values, run after
// run. A tensor made from host data during a run is one the Jit cannot
// replay (core/jit.h: it might hold values read from the input), so a model
// that made one on every run built its graph every time. Entries over 4 MiB,
// or past 64 MiB in all, are made afresh each time.
Tensor constant_tensor(const std::vector<float>& data, const Shape& shape, const std::string& device);

struct Ctx {
  const onnx::NodeProto& node;
  std::vector<Value*>& in;
  int64_t opset;
  const std::string& device;
  int64_t max_elements = INT64_MAX;  // most elements one value may hold (run_node's limit)

  bool has(size_t i) const { return i < in.size() && in[i]->present; }
  Value& v(size_t i) const {
    if (!has(i)) bad(node, "input " + std::to_string(i) + " is missing");
    return *in[i];
  }
  Tensor t(size_t i) const { return device_tensor(v(i), device); }
  std::vector<double> h(size_t i) const {
    Value& x = v(i);
    if (x.host) return x.data;
    return x.tensor.to_doubles();
  }
  Ints ints(size_t i) const {
    auto d = h(i);
    Ints out(d.size());
    for (size_t k = 0; k < d.size(); ++k) {
      if (std::isnan(d[k])) bad(node, "input " + std::to_string(i) + " holds NaN where integers are expected");
      out[k] = clamp_i64(d[k]);
    }
    return out;
  }
  // The single number a scalar input (K, depth, axis, ratio...) holds.
  double first(size_t i) const {
    auto d = h(i);
    if (d.empty()) bad(node, "input " + std::to_string(i) + " is empty, a single number was expected");
    return d[0];
  }
  int64_t first_int(size_t i) const {
    double d = first(i);
    if (std::isnan(d)) bad(node, "input " + std::to_string(i) + " is NaN, an integer was expected");
    return clamp_i64(d);
  }
  const Shape& shape(size_t i) const { return v(i).shape; }
  int64_t rank(size_t i) const { return int64_t(v(i).shape.size()); }
  // Input i (which must be present) has a rank within [lo, hi].
  const Shape& ranked(size_t i, int64_t lo, int64_t hi = INT64_MAX) const {
    const Shape& s = shape(i);
    int64_t r = int64_t(s.size());
    if (r < lo || r > hi)
      bad(node, "input " + std::to_string(i) + " has rank " + std::to_string(r) + " (shape " + shape_str(s) +
                    "), " + (lo == hi ? std::to_string(lo) : hi == INT64_MAX ? "at least " + std::to_string(lo)
                                                                              : std::to_string(lo) + " to " + std::to_string(hi)) +
                    " expected");
    return s;
  }
  // Elements of a shape this node is about to build, bounded by the model's limit.
  int64_t budget(const Shape& s, const std::string& what) const { return checked_numel(node, s, max_elements, what); }
  // Multiply-adds of one product (MatMul, Gemm), bounded in proportion to
  // the model's element limit: large weights allow large products.
  void flops(double count, const std::string& what) const {
    const double limit = kFlopsPerElement * double(max_elements);
    if (!(count <= limit))
      bad(node, what + " would take " + std::to_string(count) + " multiply-adds, more than the " + std::to_string(limit) +
                    " one node of this model may take");
  }
  // `count` scalar steps of host work, bounded.
  void work(double count, const std::string& what) const {
    if (!(count <= double(kMaxHostWork)))
      bad(node, what + " would take " + std::to_string(count) + " steps, more than the " + std::to_string(kMaxHostWork) +
                    " a host-side op may take");
  }
  bool all_host() const {
    for (auto* x : in)
      if (x->present && (!x->host || x->data.size() > 4096)) return false;
    return true;
  }
};

// ---------- values ----------
Value from_tensor(Tensor t, int32_t elem);
Value from_host(Shape shape, int32_t elem, std::vector<double> data);
bool is_int_elem(int32_t e);
// Rounds a float result the way the element type stores it.
double store_as(double x, int32_t elem);
Tensor cast_to(const Tensor& t, int32_t elem);
// ---------- host helpers (shape arithmetic) ----------
Shape broadcast(const Shape& a, const Shape& b, const onnx::NodeProto& n);
// Element of `data` (shape s) at the broadcast position `idx` of shape out.
double bcast_at(const std::vector<double>& data, const Shape& s, const Shape& out, const Ints& idx);
bool next_index(Ints& idx, const Shape& s);
Value host_binary(const Ctx& c, const std::function<double(double, double)>& f, int32_t out_elem);
// ---------- device helpers ----------
std::vector<int> all_axes(int64_t rank);
// Python-free slice along one axis: clamped start, count and step (may be negative).
Tensor take_range(const Tensor& x, int axis, int64_t start, int64_t count, int64_t step);
Tensor erf(const Tensor& x);
Tensor floor_t(const Tensor& x);
// a / b to within float rounding: the core divides by multiplying with the
// reciprocal; one residual step recovers the correctly rounded quotient in
// nearly every case (Quantize's round-half-even is sensitive to the last bit).
Tensor divide(const Tensor& a, const Tensor& b);
Tensor atan_t(const Tensor& x);
Tensor round_even(const Tensor& x);
Tensor reshape_to(const Tensor& x, const Shape& s);
// Brings a per-channel (C) parameter to (1, C, 1, ...) for an input of shape
// `x`, which must have a channel axis (rank >= 2) of exactly C entries.
Tensor per_channel(const onnx::NodeProto& n, const Tensor& p, const Shape& x, const std::string& what);
TreeReduce sum_tree();


// Shared between families: the convolution of input 0 by input 1 (plus the
// bias, input 2) with Conv's attributes; defined in nn.cpp.
Tensor conv_of(const Ctx& c);

}  // namespace tl::onnx_detail
