// Element types the core understands. float32 is the working type; int32 and
// bool exist for indices, labels and comparison results.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tl {

enum class DType : uint8_t { f32, i32, boolean };

inline size_t dtype_size(DType t) { return t == DType::boolean ? 1 : 4; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::boolean: return "bool";
  }
  return "?";
}

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "(2, 3, 4)"
int64_t numel(const Shape& s);

}  // namespace tl
