// The op table (registry.h) and run_node, which looks a node up in it,
// checks what the table promises (opset, element type, outputs) and bounds
// every value going in and out.
#include "core/io/onnx/registry.h"

#include <algorithm>
#include <stdexcept>

#include "core/io/onnx.h"

namespace tl::onnx_detail {

const char* placement_name(Placement p) { return p == Placement::Host ? "host" : "device"; }

const std::vector<OpDef>& op_table() {
  static const std::vector<OpDef> table = [] {
    std::vector<OpDef> all;
    for (auto family : {math_ops, nn_ops, nn_layer_ops, shape_ops, sequence_ops, signal_ops})
      for (auto& d : family()) all.push_back(std::move(d));
    std::sort(all.begin(), all.end(), [](const OpDef& a, const OpDef& b) { return a.name < b.name; });
    for (size_t i = 1; i < all.size(); ++i)
      if (all[i].name == all[i - 1].name) throw std::logic_error("ONNX op " + all[i].name + " is registered twice");
    return all;
  }();
  return table;
}

const OpDef* find_op(const std::string& domain, const std::string& op_type) {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  const auto& t = op_table();
  auto it = std::lower_bound(t.begin(), t.end(), op_type, [](const OpDef& d, const std::string& n) { return d.name < n; });
  return it != t.end() && it->name == op_type ? &*it : nullptr;
}

std::string op_unsupported_reason(const std::string& domain, const std::string& op_type, int64_t opset) {
  const OpDef* d = find_op(domain, op_type);
  if (!d) return "no handler";
  if (opset < d->since || opset > d->until)
    return "covers opsets " + std::to_string(d->since) +
           (d->until == kEveryOpset ? std::string(" and later") : " to " + std::to_string(d->until));
  return "";
}

std::string types_text(uint32_t t) {
  using namespace types;
  if ((t & kAll) == kAll) return "any";
  std::vector<std::string> parts;
  if ((t & kFloat) == kFloat) parts.push_back("float");
  if ((t & kInt) == kInt) parts.push_back("int");
  else if ((t & kSigned) == kSigned) parts.push_back("signed int");
  else if ((t & kUnsigned) == kUnsigned) parts.push_back("unsigned int");
  if (t & kBool) parts.push_back("bool");
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "|") + p;
  return s;
}

bool op_supported(const std::string& domain, const std::string& op_type, int64_t opset) {
  return op_unsupported_reason(domain, op_type, opset).empty();
}

namespace {

// What every value must satisfy before an op reads it and after an op made
// it: non-negative dimensions, at most `max_elements` elements, and host data
// of exactly the shape's size (host code indexes it by the shape).
void check_value(const onnx::NodeProto& node, const Value& v, int64_t max_elements, const std::string& what) {
  if (v.is_sequence) {
    for (size_t i = 0; i < v.items.size(); ++i)
      check_value(node, v.items[i], max_elements, what + " item " + std::to_string(i));
    return;
  }
  int64_t count = checked_numel(node, v.shape, max_elements, what);
  if (v.host && int64_t(v.data.size()) != count)
    bad(node, what + " holds " + std::to_string(v.data.size()) + " values for its shape " + shape_str(v.shape));
  if (v.tensor.defined() && v.tensor.shape() != v.shape)
    bad(node, what + " has shape " + shape_str(v.tensor.shape()) + " on the device but " + shape_str(v.shape) + " recorded");
}

// The table's promises about inputs: element types tl can hold, the op's
// accepted types for its first input, and tensors where it takes tensors.
void check_inputs(const OpDef& d, const Ctx& c) {
  const auto& node = c.node;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.has(i)) continue;
    const Value& v = *c.in[i];
    if (v.is_sequence && !d.sequence_io)
      bad(node, "input " + std::to_string(i) + " is a sequence; " + d.name + " takes tensors");
    if (!v.is_sequence) tl_dtype(v.elem, node.op_type());
  }
  if (c.has(0) && !c.in[0]->is_sequence && !(d.types & types::bit(c.in[0]->elem)))
    unsupported(node, c.opset, std::string("element type ") + elem_name(c.in[0]->elem));
}

}  // namespace

std::vector<Value> run_node(const onnx::NodeProto& node, std::vector<Value*>& inputs, int64_t opset,
                            const std::string& device, int64_t max_elements) {
  const OpDef* d = find_op(node.domain(), node.op_type());
  if (!d) unsupported(node, opset, "");
  if (opset < d->since || opset > d->until) unsupported(node, opset, op_unsupported_reason(node.domain(), node.op_type(), opset));
  Ctx c{node, inputs, opset, device, max_elements};
  for (size_t i = 0; i < inputs.size(); ++i)
    if (c.has(i)) check_value(node, *inputs[i], INT64_MAX, "input " + std::to_string(i));
  check_inputs(*d, c);
  std::vector<Value> out = d->run(c);
  // Outputs the handler does not make are refused when the model reads them.
  for (int i = int(out.size()); i < node.output_size(); ++i) {
    if (!node.output(i).empty()) unsupported(node, opset, "output " + std::to_string(i) + " (" + node.output(i) + ")");
    out.emplace_back();
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].present) continue;
    check_value(node, out[i], max_elements, "output " + std::to_string(i));
    // A float output's tensor holds the type its element type names: float64
    // for DOUBLE, float32 otherwise, whatever precision the handler worked in.
    Tensor& t = out[i].tensor;
    if (!out[i].host && t.defined() && is_float_elem(out[i].elem) && is_float(t.dtype()))
      t = t.cast(tl_dtype(out[i].elem, node.op_type()));
  }
  return out;
}

namespace {
template <class E>
[[noreturn]] void again(const E& e, const std::string& where, const std::string& path) {
  std::string msg = e.what();
  // bad()'s own "ONNX node 'name' (Op): " is replaced by the fuller one.
  if (msg.rfind("ONNX node '", 0) == 0)
    if (auto end = msg.find("): "); end != std::string::npos) msg = msg.substr(end + 3);
  if (msg.rfind(path, 0) == 0) throw E(msg);
  throw E(path + ": " + where + ": " + msg);
}
}  // namespace

std::vector<Value> in_node(const std::string& path, int index, const onnx::NodeProto& n,
                           const std::function<std::vector<Value>()>& f) {
  const std::string where = "ONNX node #" + std::to_string(index) + (n.name().empty() ? "" : " '" + n.name() + "'") +
                            " (" + n.op_type() + ")";
  try {
    return f();
  } catch (const OnnxUnsupported& e) {
    if (std::string(e.what()).find(path) != std::string::npos) throw;
    throw OnnxUnsupported(path + ": " + where + ": " + e.what(), e.op);
  } catch (const ShapeError& e) {
    again(e, where, path);
  } catch (const IOError& e) {
    again(e, where, path);
  }
}

}  // namespace tl::onnx_detail

namespace tl {

std::vector<OnnxOpInfo> onnx_supported_ops() {
  std::vector<OnnxOpInfo> out;
  for (const auto& d : onnx_detail::op_table())
    out.push_back({d.name, d.since, d.until, onnx_detail::types_text(d.types), d.where == onnx_detail::Placement::Host});
  return out;
}

}  // namespace tl
