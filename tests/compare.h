// Comparison of results with references, shared by the Qt Test suites and
// `tinylens-cli selftest` (so no Qt here).
#pragma once
#include <cmath>
#include <string>
#include <vector>

namespace tltest {

// max |a - b| / (atol + rtol * |b|) <= 1, with NaN/Inf positions matching.
inline bool all_close(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol,
                      std::string* why = nullptr) {
  if (a.size() != b.size()) {
    if (why) *why = "size " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) {
        if (why) *why = "NaN mismatch at " + std::to_string(i);
        return false;
      }
      continue;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) {
        if (why) *why = "Inf mismatch at " + std::to_string(i) + ": " + std::to_string(x) + " vs " + std::to_string(y);
        return false;
      }
      continue;
    }
    if (std::fabs(x - y) > atol + rtol * std::fabs(y)) {
      if (why) *why = "at " + std::to_string(i) + ": " + std::to_string(x) + " vs " + std::to_string(y);
      return false;
    }
  }
  return true;
}

}  // namespace tltest
