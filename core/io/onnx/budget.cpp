#include "core/io/onnx/budget.h"

#include <set>

#include "core/io/limits.h"

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

uint64_t InitializerBudget::file_bytes() const {
  uint64_t bytes = model_bytes_;
  for (const auto& [file, size] : external_files) bytes = io::checked_add(bytes, size, path_);
  return bytes;
}

void InitializerBudget::admit(uint64_t elements) {
  exceeded_ = true;  // until it passes
  stored_ = io::checked_add(stored_, io::checked_mul(elements, sizeof(double), path_), path_);
  io::check_load_budget(stored_, file_bytes(), "the initializers of " + path_);
  exceeded_ = false;
}

uint64_t input_bytes_of(const std::vector<Tensor>& inputs) {
  uint64_t bytes = 0;
  for (const auto& t : inputs)
    if (t.defined()) bytes = io::checked_add(bytes, io::checked_mul(uint64_t(t.numel()), 4, "inputs"), "inputs");
  return bytes;
}

uint64_t batch_of(const std::vector<OnnxValueInfo>& declared, const std::vector<Tensor>& inputs) {
  if (declared.empty() || declared[0].shape.empty() || declared[0].shape[0] >= 0 || inputs.empty() ||
      !inputs[0].defined() || inputs[0].shape().empty())
    return 1;
  return uint64_t(std::max<int64_t>(inputs[0].shape()[0], 1));
}

std::string shapes_of(const std::vector<Tensor>& inputs) {
  std::string shown;
  for (const auto& t : inputs) shown += (shown.empty() ? "" : ", ") + (t.defined() ? shape_str(t.shape()) : "none");
  return shown;
}

RunMemory bound_run_memory(const std::string& path, uint64_t file_bytes, const std::vector<OnnxValueInfo>& declared,
                           const std::vector<Tensor>& inputs) {
  const uint64_t input_bytes = input_bytes_of(inputs), batch = batch_of(declared, inputs);
  // The error's words are built only when it is raised, which is while the
  // scope (and so `path` and `inputs`) lives: not on every run.
  return RunMemory(io::run_byte_budget(file_bytes, input_bytes, batch),
                   [&path, &inputs, file_bytes, input_bytes, batch](uint64_t held, uint64_t asked, uint64_t limit) {
                     const std::string what = path + (inputs.empty() ? " run" : " run on an input of " + shapes_of(inputs));
                     return io::run_bytes_exceeded(what, held, asked, limit, file_bytes, input_bytes, batch);
                   });
}

}  // namespace tl::onnx_detail
