#include "core/io/host_tensor.h"

#include <cstring>

#include "core/error.h"

namespace tl {

size_t host_dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf / nan
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal half: renormalise into a normal float
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while (!(mantissa & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mantissa & 0x3ff) << 13;
    }
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
T read_le(const uint8_t* p) {
  // Every machine we target is little-endian, like the files; memcpy keeps
  // unaligned reads defined.
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

void host_to_float(const uint8_t* src, size_t count, const std::string& dtype, float* dst) {
  if (dtype == "F32") {
    if (count) std::memcpy(dst, src, count * 4);  // empty tensors may have null data
  } else if (dtype == "F64") {
    for (size_t i = 0; i < count; ++i) dst[i] = float(read_le<double>(src + 8 * i));
  } else if (dtype == "F16") {
    for (size_t i = 0; i < count; ++i) dst[i] = half_to_float(read_le<uint16_t>(src + 2 * i));
  } else if (dtype == "BF16") {
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits = uint32_t(read_le<uint16_t>(src + 2 * i)) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
  } else if (dtype == "I64") {
    for (size_t i = 0; i < count; ++i) dst[i] = float(read_le<int64_t>(src + 8 * i));
  } else if (dtype == "I32") {
    for (size_t i = 0; i < count; ++i) dst[i] = float(read_le<int32_t>(src + 4 * i));
  } else if (dtype == "I16") {
    for (size_t i = 0; i < count; ++i) dst[i] = float(read_le<int16_t>(src + 2 * i));
  } else if (dtype == "I8") {
    for (size_t i = 0; i < count; ++i) dst[i] = float(int8_t(src[i]));
  } else if (dtype == "U8") {
    for (size_t i = 0; i < count; ++i) dst[i] = float(src[i]);
  } else if (dtype == "BOOL") {
    for (size_t i = 0; i < count; ++i) dst[i] = src[i] ? 1.0f : 0.0f;
  } else {
    throw IOError("unknown tensor dtype '" + dtype + "'");
  }
}

std::string host_shape_str(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

void check_state_dict(const StateDict& got, const std::map<std::string, Shape>& expected) {
  // A cap keeps the message readable when a checkpoint of a different model is
  // loaded (hundreds of keys would otherwise be listed).
  constexpr size_t kMaxListed = 20;
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [key, shape] : expected) {
    auto it = got.find(key);
    if (it == got.end())
      missing.push_back(key);
    else if (it->second.shape != shape)
      mismatched.push_back(key + ": file has " + host_shape_str(it->second.shape) + ", model expects " +
                           host_shape_str(shape));
  }
  for (const auto& entry : got)
    if (!expected.count(entry.first)) unexpected.push_back(entry.first);
  if (missing.empty() && unexpected.empty() && mismatched.empty()) return;

  std::string msg = "state dict does not match the model:";
  auto list = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    msg += "\n  " + std::to_string(items.size()) + " " + title + ":";
    for (size_t i = 0; i < items.size() && i < kMaxListed; ++i) msg += "\n    " + items[i];
    if (items.size() > kMaxListed) msg += "\n    ... and " + std::to_string(items.size() - kMaxListed) + " more";
  };
  list("missing key(s)", missing);
  list("unexpected key(s)", unexpected);
  list("shape mismatch(es)", mismatched);
  throw IOError(msg);
}

}  // namespace tl
