#include "core/io/onnx/checks.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/io/limits.h"

namespace tl::onnx_detail {

void check_declared_shapes(const onnx::ModelProto& m, const std::string& path, uint64_t file_bytes) {
  const uint64_t limit = std::min<uint64_t>(io::load_limits().max_tensor_elements, io::load_budget(file_bytes) / 4);
  auto check = [&](const onnx::ValueInfoProto& v, const char* role) {
    if (!v.type().has_tensor_type()) return;
    uint64_t count = 1;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) continue;
      const int64_t x = d.dim_value();
      if (x < 0 || (x > 0 && count > limit / uint64_t(x)))
        throw IOError(path + ": the " + std::string(role) + " '" + v.name() + "' declares a dimension of " +
                      std::to_string(x) + ", more than the " + std::to_string(limit) + " elements a value of a " +
                      std::to_string(file_bytes) + "-byte model may hold (" + io::budget_remedy() + ")");
      count *= uint64_t(x);
    }
  };
  for (const auto& v : m.graph().input()) check(v, "input");
  for (const auto& v : m.graph().output()) check(v, "output");
  for (const auto& v : m.graph().value_info()) check(v, "value");
}

void check_graph_names(const onnx::ModelProto& m, const std::string& path) {
  constexpr int64_t kNewestPlausibleOpset = 40;  // ONNX 1.20 has opset 25
  bool declared = false, uses_default = false;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      declared = true;
      if (o.version() < 1 || o.version() > kNewestPlausibleOpset)
        throw IOError(path + " declares ONNX opset " + std::to_string(o.version()) + ", which no ONNX release has (1.." +
                      std::to_string(kNewestPlausibleOpset) + " are read)");
    }
  std::set<std::string> written;
  for (const auto& i : m.graph().initializer()) written.insert(i.name());
  for (const auto& i : m.graph().input()) written.insert(i.name());
  for (int k = 0; k < m.graph().node_size(); ++k) {
    const auto& n = m.graph().node(k);
    uses_default = uses_default || n.domain().empty() || n.domain() == "ai.onnx";
    for (const auto& o : n.output())
      if (!o.empty() && !written.insert(o).second)
        throw IOError(path + ": node #" + std::to_string(k) + " '" + n.name() + "' (" + n.op_type() + ") writes '" +
                      io::clip(o) + "', which an earlier node, input or initializer already defines");
  }
  if (uses_default && !declared)
    throw IOError(path + " has no opset_import for the default ONNX domain: which version of each op its nodes follow "
                         "is unknown");
}

}  // namespace tl::onnx_detail
