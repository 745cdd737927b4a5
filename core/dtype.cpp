#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace tl {

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

double value_of_type(double v, DType t) {
  if (t == DType::boolean) return v != 0 ? 1.0 : 0.0;
  if (t != DType::i32) return v;
  if (std::isnan(v)) return 0;
  return std::clamp(std::trunc(v), double(std::numeric_limits<int32_t>::min()),
                    double(std::numeric_limits<int32_t>::max()));
}

bool span_fits(const Shape& s) {
  int64_t span = 1;
  for (auto d : s) {
    if (d > 1 && span > kMaxShapeSpan / d) return false;
    span *= std::max<int64_t>(d, 1);
  }
  return true;
}

void check_span(const Shape& s, const std::string& what) {
  for (auto d : s)
    if (d < 0) throw ShapeError(what + ": negative size " + std::to_string(d) + " in shape " + shape_str(s));
  if (!span_fits(s))
    throw ShapeError(what + ": shape " + shape_str(s) + " spans more than 2^48 (sizes multiplied with each 0 as 1)" +
                     ", beyond any tensor tinylens can index");
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

int64_t numel(const Shape& s) {
  check_span(s, "shape");
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

}  // namespace tl
