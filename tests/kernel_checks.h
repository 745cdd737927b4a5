// What the fusion tests (test_ops, test_fusion) share: the kernels a
// computation launches, fused values against unfused ones, test inputs.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/profile.h"

namespace tltest {

// Kernel launches made while `f` runs.
inline std::vector<tl::ProfileRecord> launches(const std::function<void()>& f) {
  tl::ProfileCapture cap;
  f();
  return cap.records();
}

inline std::string kernel_names(const std::vector<tl::ProfileRecord>& recs) {
  std::string s;
  for (auto& r : recs) s += (s.empty() ? "" : ", ") + r.kernel->name;
  return s;
}

// Where a fused computation first differs from the same values computed
// unfused by more than 1e-5 relative (at least 1e-5 absolute); "" when
// nowhere and the sizes agree.
inline std::string first_difference(const std::vector<float>& fused, const std::vector<float>& unfused) {
  if (fused.size() != unfused.size())
    return std::to_string(fused.size()) + " values fused, " + std::to_string(unfused.size()) + " unfused";
  for (size_t i = 0; i < fused.size(); ++i)
    if (!(std::fabs(fused[i] - unfused[i]) <= 1e-5 * std::max(1.0f, std::fabs(unfused[i]))))
      return "at " + std::to_string(i) + ": fused " + std::to_string(fused[i]) + " unfused " +
             std::to_string(unfused[i]);
  return "";
}

inline std::vector<float> ramp(size_t n, float scale = 0.37f, float offset = -1.1f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * float((i * 7919) % 29) / 29.0f;
  return v;
}

}  // namespace tltest
