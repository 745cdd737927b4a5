// Element types the core understands. float32 is the working type; int32 and
// bool exist for indices, labels and comparison results; float64 is computed
// on devices that report fp64 (DeviceInfo) and refused elsewhere.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tl {

// New types go at the end: the value is part of plan and replay keys.
enum class DType : uint8_t { f32, i32, boolean, f64 };
constexpr size_t kDTypeCount = 4;

// One row per type, in the enum's order. `rank` orders the types for
// promotion: a binary op computes in the higher-ranked of its two types.
struct DTypeInfo {
  const char* name;
  size_t size;
  bool is_float;
  int rank;
};
inline constexpr DTypeInfo kDTypes[kDTypeCount] = {
    {"float32", 4, true, 2},
    {"int32", 4, false, 1},
    {"bool", 1, false, 0},
    {"float64", 8, true, 3},
};

inline const DTypeInfo& dtype_info(DType t) { return kDTypes[size_t(t)]; }
inline size_t dtype_size(DType t) { return dtype_info(t).size; }
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
inline bool is_float(DType t) { return dtype_info(t).is_float; }
// The type both operands of a binary op are cast to.
inline DType promote(DType a, DType b) { return dtype_info(a).rank >= dtype_info(b).rank ? a : b; }
// The float type math on `t` computes in: float64 stays, the rest is float32.
inline DType float_type(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }
// `v` as a value of `t`: an integer type truncates and saturates at its
// range (NaN is 0), a boolean is v != 0, floats are unchanged. Constants and
// pad fills go through it, so that no out-of-range value reaches a
// conversion to an integer (undefined) or a kernel's literal.
double value_of_type(double v, DType t);

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "(2, 3, 4)"

// The most a shape may span: the product of its sizes with each 0 counted as
// 1. Bounding the span, not only the element count (a single 0 makes that 0,
// whatever the other sizes), keeps every stride, offset, product and sum of
// sizes derived from a valid shape within 64 bits.
constexpr int64_t kMaxShapeSpan = int64_t(1) << 48;
// Throws ShapeError("<what>: ...") when a size is negative or the span of `s`
// passes kMaxShapeSpan. Every node's shape and every shape read from a file
// passes through it.
void check_span(const Shape& s, const std::string& what);
// Whether the span of `s` (its sizes, none negative) is within kMaxShapeSpan:
// the test check_span makes, for callers that word their own error.
bool span_fits(const Shape& s);
// Elements of `s`, after check_span(s, "shape").
int64_t numel(const Shape& s);
std::vector<int64_t> strides_of(const Shape& s);  // row-major, in elements

}  // namespace tl
