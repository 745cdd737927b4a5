#include "core/dtype.h"

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

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw ShapeError("shape " + shape_str(s) + " has more elements than fit in 64 bits");
  return n;
}

}  // namespace tl
