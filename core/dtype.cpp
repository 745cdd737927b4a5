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

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("shape " + shape_str(s) + " has more elements than fit in 64 bits");
  return n;
}

}  // namespace tl
