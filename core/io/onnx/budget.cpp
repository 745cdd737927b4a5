#include "core/io/onnx/budget.h"

#include <set>

namespace tl::onnx_detail {

namespace {

// Every name node `n` reads, in its subgraphs too.
void reads_of(const onnx::NodeProto& n, std::set<std::string>& out) {
  for (const auto& i : n.input())
    if (!i.empty()) out.insert(i);
  for (const auto& a : n.attribute()) {
    if (a.has_g())
      for (const auto& m : a.g().node()) reads_of(m, out);
    for (const auto& sub : a.graphs())
      for (const auto& m : sub.node()) reads_of(m, out);
  }
}

uint64_t bytes_of(const std::map<std::string, Shape>& shapes, const std::string& name) {
  auto it = shapes.find(name);
  return it == shapes.end() ? 0 : uint64_t(numel(it->second)) * 4;
}

}  // namespace

std::unordered_map<std::string, int> last_readers(const onnx::GraphProto& g) {
  std::unordered_map<std::string, int> last;
  for (int k = 0; k < g.node_size(); ++k) {
    std::set<std::string> reads;
    reads_of(g.node(k), reads);
    for (const auto& name : reads) last[name] = k;
  }
  for (const auto& o : g.output()) last[o.name()] = g.node_size();
  return last;
}

OnnxRunCost run_cost(const onnx::GraphProto& g, const std::unordered_map<std::string, int>& last,
                     const std::map<std::string, Shape>& shapes, double flops) {
  OnnxRunCost cost;
  cost.flops = flops;
  uint64_t live = 0;
  for (const auto& i : g.initializer()) live += bytes_of(shapes, i.name());
  for (const auto& i : g.input()) live += bytes_of(shapes, i.name());
  // Bytes freed after node k: the values whose last reader it is.
  std::vector<uint64_t> freed(size_t(g.node_size()) + 1, 0);
  std::set<std::string> initializers;
  for (const auto& i : g.initializer()) initializers.insert(i.name());
  auto dies = [&](const std::string& name, int born) {
    auto it = last.find(name);
    const int k = it == last.end() ? born : it->second;  // read by nobody: gone at once
    freed[size_t(std::max(k, born))] += bytes_of(shapes, name);
  };
  for (const auto& i : g.input())
    if (!initializers.count(i.name())) dies(i.name(), 0);
  cost.peak_bytes = live;
  for (int k = 0; k < g.node_size(); ++k) {
    for (const auto& o : g.node(k).output()) {
      if (o.empty()) continue;
      live += bytes_of(shapes, o);
      dies(o, k);
    }
    if (live > cost.peak_bytes) {
      cost.peak_bytes = live;
      const auto& n = g.node(k);
      cost.busiest = "'" + (n.name().empty() ? "#" + std::to_string(k) : n.name()) + "' (" + n.op_type() + ")";
    }
    live -= std::min(live, freed[size_t(k)]);
  }
  return cost;
}

}  // namespace tl::onnx_detail
