// Shared by the ONNX ops and the depthwise convolution (core/depthwise.cpp),
// so that both add their terms in one order and give bit-identical results.
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tl {

// A sum (or maximum) of many lazy terms as a balanced tree, built as the
// terms arrive: a chain of thousands of ops is slow to schedule and deep
// enough to overflow the stack of a realize; a tree is log2(n) deep.
struct TreeReduce {
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::vector<std::pair<Tensor, int>> partial;  // (value, level): 2^level terms each
  void add(Tensor t) {
    int level = 0;
    while (!partial.empty() && partial.back().second == level) {
      t = op(partial.back().first, t);
      partial.pop_back();
      ++level;
    }
    partial.push_back({std::move(t), level});
  }
  Tensor result() const {
    Tensor r;
    for (auto it = partial.rbegin(); it != partial.rend(); ++it) r = r.defined() ? op(it->first, r) : it->first;
    return r;
  }
};

}  // namespace tl
