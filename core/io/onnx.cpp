// ONNX files: parsing (with external data), the graph walk of OnnxModel::run,
// inspect_onnx for the window, and serialized tensors. The conformance-case
// runner is tool code: app/onnx_conformance.cpp.
#include "core/io/onnx.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/io/limits.h"
#include "core/io/onnx/budget.h"
#include "core/io/onnx/checks.h"
#include "core/io/onnx/depth.h"
#include "core/io/onnx/fold.h"
#include "core/io/onnx/registry.h"
#include "core/io/onnx_shapes_only.h"
#include "core/jit.h"
#include "core/runtime/registry.h"

namespace tl {

namespace fs = std::filesystem;
using onnx_detail::input_bytes_of;
using onnx_detail::shapes_of;
using onnx_detail::Value;
using TP = onnx::TensorProto;

namespace {
std::atomic<size_t> parse_count{0}, decode_count{0};
}  // namespace

namespace onnx_detail {

ParsedModel parse_model(const std::string& path) {
  ++parse_count;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw IOError("ONNX model " + path + " does not exist or is not a file");
  std::string bytes = io::read_whole_file(path, "ONNX model");
  ParsedModel parsed;
  parsed.bytes = bytes.size();
  onnx::ModelProto& m = parsed.model;
  if (bytes.empty() || bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !m.ParseFromArray(bytes.data(), int(bytes.size())))
    throw IOError(path + " is not a valid ONNX model (protobuf parse failed" +
                  std::string(bytes.empty() ? ": the file is empty" : "; truncated or not an ONNX file?") + ")");
  // Protobuf accepts many byte strings as some message; a model has a graph
  // and an IR version.
  if (!m.has_graph() || m.ir_version() <= 0)
    throw IOError(path + " is not a valid ONNX model (no graph or IR version in it)");
  return parsed;
}

int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

OnnxValueInfo value_info(const onnx::ValueInfoProto& v) {
  OnnxValueInfo info;
  info.name = v.name();
  if (v.type().has_tensor_type()) {
    const auto& t = v.type().tensor_type();
    info.dtype = onnx_detail::elem_name(t.elem_type());
    for (const auto& d : t.shape().dim()) {
      if (d.has_dim_value()) {
        info.shape.push_back(d.dim_value());
        info.dim_names.push_back("");
      } else {
        info.shape.push_back(-1);
        info.dim_names.push_back(d.dim_param());
      }
    }
  } else {
    info.dtype = "non-tensor";
  }
  return info;
}

}  // namespace onnx_detail

size_t onnx_parses() { return parse_count.load(); }
size_t onnx_initializer_decodes() { return decode_count.load(); }

namespace {
using onnx_detail::default_opset;
using onnx_detail::value_info;

template <class T>
void widen(const void* src, size_t n, std::vector<double>& out) {
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, static_cast<const char*>(src) + i * sizeof(T), sizeof(T));
    out[i] = double(v);
  }
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else {
      float f = std::ldexp(float(man), -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
float bf16_to_float(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

size_t elem_bytes(int32_t e) {
  switch (e) {
    case TP::FLOAT: case TP::INT32: case TP::UINT32: return 4;
    case TP::DOUBLE: case TP::INT64: case TP::UINT64: return 8;
    case TP::INT16: case TP::UINT16: case TP::FLOAT16: case TP::BFLOAT16: return 2;
    case TP::INT8: case TP::UINT8: case TP::BOOL: return 1;
    default: return 0;
  }
}

void decode_raw(const char* p, size_t n, int32_t e, std::vector<double>& out) {
  switch (e) {
    case TP::FLOAT: widen<float>(p, n, out); break;
    case TP::DOUBLE: widen<double>(p, n, out); break;
    case TP::INT32: widen<int32_t>(p, n, out); break;
    case TP::UINT32: widen<uint32_t>(p, n, out); break;
    case TP::INT64: widen<int64_t>(p, n, out); break;
    case TP::UINT64: widen<uint64_t>(p, n, out); break;
    case TP::INT16: widen<int16_t>(p, n, out); break;
    case TP::UINT16: widen<uint16_t>(p, n, out); break;
    case TP::INT8: widen<int8_t>(p, n, out); break;
    case TP::UINT8: case TP::BOOL: widen<uint8_t>(p, n, out); break;
    case TP::FLOAT16: case TP::BFLOAT16: {
      out.resize(n);
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = e == TP::FLOAT16 ? half_to_float(h) : bf16_to_float(h);
      }
      break;
    }
    default: break;
  }
}

}  // namespace

namespace onnx_detail {

std::string model_folder(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

namespace {

// A number of an external_data entry: all digits, no sign, no trailing text.
int64_t external_number(const std::string& text, const std::string& key, const std::string& name) {
  int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 18;
  for (char ch : text) ok = ok && ch >= '0' && ch <= '9';
  if (ok) v = std::stoll(text);
  if (!ok) throw IOError(name + ": external data " + key + " '" + text + "' is not a non-negative number below 10^18");
  return v;
}

// The file an external_data location names, which must lie inside the
// model's folder: a relative path without "..", whose canonical form (links
// followed) is still inside the folder's canonical form, and a regular file.
// Errors name the location as written and never say anything about files
// outside the folder (whether they exist, their size).
fs::path external_file(const std::string& model_dir, const std::string& location, const std::string& name) {
  auto refuse = [&](const std::string& why) {
    throw IOError("external data location '" + location + "' of " + name + " " + why +
                  " (external data must be a file inside the model's folder)");
  };
  if (location.empty()) throw IOError(name + " is external but names no location");
  if (location.find('\0') != std::string::npos) refuse("contains a NUL character");
  fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_name() || loc.has_root_directory()) refuse("is an absolute path");
  for (const auto& part : loc)
    if (part == "..") refuse("climbs out with '..'");
  std::error_code ec;
  fs::path base = fs::canonical(model_dir, ec);
  if (ec) throw IOError("the folder of the model holding " + name + " cannot be resolved: " + ec.message());
  fs::path target = fs::weakly_canonical(base / loc, ec);
  if (ec) refuse("cannot be resolved");
  fs::path rel = target.lexically_relative(base);
  if (rel.empty() || *rel.begin() == ".." || rel.is_absolute()) refuse("leads outside the model's folder (through a link)");
  if (!fs::is_regular_file(target, ec)) refuse("cannot be opened: no regular file of that name is in the model's folder");
  return target;
}

}  // namespace

Value value_from_proto(const onnx::TensorProto& t, const std::string& model_dir, const std::string& where,
                       InitializerBudget* budget) {
  if (budget) ++decode_count;
  Value v;
  v.elem = t.data_type();
  v.host = true;
  const std::string name = "tensor '" + t.name() + "' of " + where;
  // Sizes come from the file: refuse absurd ones before multiplying them.
  const uint64_t max_elements = io::load_limits().max_tensor_elements;
  uint64_t count = 1;
  for (auto d : t.dims()) {
    if (d < 0) throw IOError(name + " has a negative dimension (" + std::to_string(d) + ")");
    if (d > 0 && count > max_elements / uint64_t(d))
      throw IOError(name + " is absurdly large (more than " + std::to_string(max_elements) + " elements)");
    count *= uint64_t(d);
    v.shape.push_back(d);
  }
  check_span(v.shape, name);
  size_t n = size_t(count);
  size_t eb = elem_bytes(v.elem);
  if (eb == 0)
    throw OnnxUnsupported("unsupported ONNX element type " + std::string(elem_name(v.elem)) + " in " + name,
                          "type:" + std::string(elem_name(v.elem)));
  if (t.data_location() == TP::EXTERNAL) {
    if (model_dir.empty()) throw IOError(name + " has external data, which is read only for a model's initializers");
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = external_number(kv.value(), "offset", name);
      else if (kv.key() == "length") length = external_number(kv.value(), "length", name);
    }
    fs::path file = external_file(model_dir, location, name);
    std::ifstream in(file, std::ios::binary);
    if (!in) throw IOError("external data file '" + location + "' of " + name + " cannot be opened");
    in.seekg(0, std::ios::end);
    const int64_t size = int64_t(in.tellg());
    if (size < 0) throw IOError("external data file '" + location + "' of " + name + " cannot be read");
    if (budget) budget->external_files[file.string()] = uint64_t(size);
    const uint64_t want = io::checked_mul(n, eb, "external data of " + name);
    if (length >= 0 && uint64_t(length) != want)
      throw IOError("external data of " + name + ": length " + std::to_string(length) + " but the shape " +
                    shape_str(v.shape) + " needs " + std::to_string(want) + " bytes");
    const uint64_t end = io::checked_add(uint64_t(offset), want, "external data of " + name);
    if (end > uint64_t(size))
      throw IOError("external data file '" + location + "' is too short for " + name + " (offset " +
                    std::to_string(offset) + " + " + std::to_string(want) + " bytes reaches past its end)");
    if (budget) budget->admit(n);
    std::string buf(size_t(want), '\0');
    in.seekg(offset);
    if (want > 0 && !in.read(buf.data(), std::streamsize(want)))
      throw IOError("external data file '" + location + "' of " + name + " cannot be read");
    decode_raw(buf.data(), n, v.elem, v.data);
    return v;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * eb)
      throw IOError(name + ": raw data has " + std::to_string(t.raw_data().size()) + " bytes, the shape " +
                    shape_str(v.shape) + " needs " + std::to_string(n * eb));
    if (budget) budget->admit(n);
    decode_raw(t.raw_data().data(), n, v.elem, v.data);
    return v;
  }
  auto check = [&](size_t have) {
    if (have != n)
      throw IOError(name + " holds " + std::to_string(have) + " values, its shape " + shape_str(v.shape) + " needs " +
                    std::to_string(n));
    if (budget) budget->admit(n);
  };
  switch (v.elem) {
    case TP::FLOAT: check(size_t(t.float_data_size())); v.data.assign(t.float_data().begin(), t.float_data().end()); break;
    case TP::DOUBLE: check(size_t(t.double_data_size())); v.data.assign(t.double_data().begin(), t.double_data().end()); break;
    case TP::INT64: check(size_t(t.int64_data_size())); v.data.assign(t.int64_data().begin(), t.int64_data().end()); break;
    case TP::UINT32: case TP::UINT64: check(size_t(t.uint64_data_size())); v.data.assign(t.uint64_data().begin(), t.uint64_data().end()); break;
    case TP::FLOAT16: case TP::BFLOAT16:
      check(size_t(t.int32_data_size()));
      for (auto h : t.int32_data()) v.data.push_back(v.elem == TP::FLOAT16 ? half_to_float(uint16_t(h)) : bf16_to_float(uint16_t(h)));
      break;
    default: check(size_t(t.int32_data_size())); v.data.assign(t.int32_data().begin(), t.int32_data().end()); break;
  }
  return v;
}

}  // namespace onnx_detail

// ---------------- OnnxModel ----------------

struct OnnxModel::Impl {
  std::string path;
  // Bytes of the model file and of the external data files it reads: what
  // the load budget (io::load_budget) is measured against.
  uint64_t file_bytes = 0;
  onnx::ModelProto model;
  int64_t opset = 0;
  std::vector<OnnxValueInfo> inputs, outputs;
  std::unordered_map<std::string, Value> initializers;
  int64_t parameters = 0;
  // Device copies of the initializers, made on a device's first run.
  mutable std::mutex mutex;
  mutable std::map<std::string, std::unordered_map<std::string, Tensor>> on_device;
  // The values of folded nodes (onnx_detail::FoldCache): large constants
  // built from initializers alone (the weights of models stored as
  // ConstantOfShape), computed once like the initializers' copies, so later
  // runs neither fill them again nor lose what kernels derive from their
  // buffers (a GEMM's packed weights); the batch-norm folds' values; and the
  // values that depend only on the inputs' shapes. Used with mutex held.
  mutable onnx_detail::FoldCache folded;
  // The batch norms folded into constants at load, and the initializers the
  // rewritten graph no longer reads (kept on the host for the folds, never
  // uploaded). `file_nodes` counts the nodes as the file has them.
  onnx_detail::GraphFolds folds;
  std::set<std::string> unread;
  int64_t file_nodes = 0;
  // run()'s Jit per device, each used by one run at a time.
  struct DeviceJit {
    std::mutex mutex;
    std::unique_ptr<Jit> jit;
  };
  mutable std::map<std::string, std::unique_ptr<DeviceJit>> jits;
  DeviceJit& jit_for(const std::string& device) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = jits[device];
    if (!slot) slot = std::make_unique<DeviceJit>();
    return *slot;
  }

  std::unordered_map<std::string, Value> initializer_values(const std::string& device) const;

  // Per value, the index of the last node that reads it: run() frees a value
  // there. And the input shapes (with the device) whose run passed the run
  // budget (check_run_budget).
  std::unordered_map<std::string, int> last_read;
  mutable std::set<std::string> within_budget;
  mutable std::atomic<uint64_t> last_peak_bytes{0};  // of the last run(inputs)
};

// The initializers as the graph reads them on `device`: each uploaded once
// per device; small ones also host values, which shape arithmetic reads.
std::unordered_map<std::string, Value> OnnxModel::Impl::initializer_values(const std::string& device) const {
  std::unordered_map<std::string, Value> env;
  std::lock_guard<std::mutex> lock(mutex);
  auto& cache = on_device[device];
  for (auto& [name, v] : initializers) {
    if (unread.count(name)) continue;
    Value copy;
    copy.elem = v.elem;
    copy.shape = v.shape;
    // Small initializers stay host values so shape arithmetic can read them.
    if (v.data.size() <= 4096) {
      copy.host = true;
      copy.data = v.data;
    }
    // Every initializer is uploaded once per device; small ones also keep
    // their host copy for shape arithmetic.
    auto it = cache.find(name);
    if (it != cache.end()) {
      copy.tensor = it->second;
    } else if (onnx_detail::ShapesOnly::active()) {
      // Shape inference reads no device value: nothing to upload.
      if (!copy.host && numel(v.shape) > 0)
        copy.tensor = onnx_detail::stand_in(v.shape, onnx_detail::tl_dtype(v.elem, "initializer"), device);
    } else if (numel(v.shape) > 0) {
      Value tmp = v;
      copy.tensor = onnx_detail::device_tensor(tmp, device).realize();
      cache[name] = copy.tensor;
    }
    env[name] = std::move(copy);
  }
  return env;
}

OnnxModel::OnnxModel(const std::string& path) : OnnxModel(path, onnx_detail::parse_model(path)) {}

OnnxModel::OnnxModel(const std::string& path, onnx_detail::ParsedModel&& parsed) : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.path = path;
  const uint64_t model_bytes = parsed.bytes;
  m.model = std::move(parsed.model);
  m.opset = default_opset(m.model);
  const auto& g = m.model.graph();
  onnx_detail::check_graph_names(m.model, path);
  const std::string dir = onnx_detail::model_folder(path);
  onnx_detail::InitializerBudget budget(path, model_bytes);
  const bool decoded = parsed.initializers.size() == size_t(g.initializer_size());
  for (int i = 0; i < g.initializer_size(); ++i) {
    const auto& t = g.initializer(i);
    Value v = decoded ? std::move(parsed.initializers[size_t(i)]) : onnx_detail::value_from_proto(t, dir, path, &budget);
    m.parameters += int64_t(v.data.size());
    m.initializers[t.name()] = std::move(v);
  }
  m.file_bytes = decoded ? parsed.file_bytes : budget.file_bytes();
  onnx_detail::check_declared_shapes(m.model, path, m.file_bytes);
  for (const auto& i : g.input())
    if (!m.initializers.count(i.name())) m.inputs.push_back(value_info(i));
  for (const auto& o : g.output()) m.outputs.push_back(value_info(o));
  for (const auto& i : g.input())
    if (!i.type().has_tensor_type()) {
      const auto& t = i.type();
      std::string kind = t.has_sequence_type() ? "sequence" : t.has_optional_type() ? "optional" : t.has_map_type() ? "map" : "non-tensor";
      throw OnnxUnsupported("unsupported ONNX input '" + i.name() + "' of " + path + ": " + kind + " values", "type:" + kind);
    }
  for (const auto& n : g.node()) {
    std::string why = onnx_detail::op_unsupported_reason(n.domain(), n.op_type(), m.opset);
    if (!why.empty()) {
      std::string dom = n.domain().empty() ? "ai.onnx" : n.domain();
      throw OnnxUnsupported("unsupported ONNX op '" + dom + "::" + n.op_type() + "' (opset " +
                                std::to_string(m.opset) + ") in " + path + ": " + why,
                            dom + "::" + n.op_type());
    }
    for (const auto& a : n.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
        throw OnnxUnsupported("unsupported ONNX op 'ai.onnx::" + n.op_type() + "' (opset " + std::to_string(m.opset) +
                                  "): subgraph attributes",
                              "ai.onnx::" + n.op_type());
  }
  // Checked after the nodes, so an op the runtime lacks is what is reported.
  for (const auto& o : g.output())
    if (!o.type().has_tensor_type() && o.type().value_case() != onnx::TypeProto::VALUE_NOT_SET)
      throw OnnxUnsupported("unsupported ONNX output '" + o.name() + "' of " + path +
                                ": non-tensor values (OnnxModel::run returns tensors)",
                            "type:" + std::string(o.type().has_sequence_type() ? "sequence" : "non-tensor"));
  m.file_nodes = g.node_size();
  if (!onnx_detail::folding_disabled()) {
    std::set<std::string> names, read;
    for (const auto& [name, v] : m.initializers) names.insert(name);
    m.folds = onnx_detail::fold_batch_norms(*m.model.mutable_graph(), names);
    for (const auto& n : g.node()) read.insert(n.input().begin(), n.input().end());
    for (const auto& o : g.output()) read.insert(o.name());
    for (const auto& name : names)
      if (!read.count(name)) m.unread.insert(name);
  }
  m.last_read = onnx_detail::last_readers(m.model.graph());
}

OnnxModel::~OnnxModel() = default;
const std::string& OnnxModel::path() const { return impl_->path; }
int64_t OnnxModel::opset() const { return impl_->opset; }
const std::vector<OnnxValueInfo>& OnnxModel::inputs() const { return impl_->inputs; }
const std::vector<OnnxValueInfo>& OnnxModel::outputs() const { return impl_->outputs; }
int64_t OnnxModel::parameters() const { return impl_->parameters; }
int64_t OnnxModel::nodes() const { return impl_->file_nodes; }

std::vector<Tensor> OnnxModel::run(const std::vector<Tensor>& inputs) const {
  auto& m = *impl_;
  if (onnx_detail::ShapesOnly::active()) return run(inputs, nullptr);
  // The outputs are realized inside the bound on the device bytes held.
  RunMemory bound = onnx_detail::bound_run_memory(m.path, m.file_bytes, m.inputs, inputs);
  if (inputs.size() != 1 || m.inputs.size() != 1 || m.outputs.size() != 1 || !inputs[0].defined()) {
    std::vector<Tensor> out = run(inputs, nullptr);
    if (out.size() == 1) out[0].realize();
    m.last_peak_bytes = bound.peak_bytes();
    return out;
  }
  check_run_budget(inputs, inputs[0].device());  // before a capture: the walk may realize shape arithmetic
  Impl::DeviceJit& j = m.jit_for(inputs[0].device());
  std::lock_guard<std::mutex> lock(j.mutex);
  if (!j.jit) j.jit = std::make_unique<Jit>([this](const Tensor& x) { return run({x}, nullptr).at(0); });
  Tensor out = (*j.jit)(inputs[0]);
  m.last_peak_bytes = bound.peak_bytes();
  return {out};
}

uint64_t OnnxModel::last_run_peak_bytes() const { return impl_->last_peak_bytes; }

bool OnnxModel::jit_captured(const std::string& device) const {
  Impl::DeviceJit& j = impl_->jit_for(device);
  std::lock_guard<std::mutex> lock(j.mutex);
  return j.jit && j.jit->captured();
}

// The caller's tensors as the graph's inputs in `env`, moved to `device` and
// cast to the element types the graph declares; initializers listed as
// inputs keep their values unless given.
static void bind_inputs(const onnx::GraphProto& g, const std::vector<OnnxValueInfo>& declared,
                        const std::unordered_map<std::string, Value>& initializers, const std::string& path,
                        const std::vector<Tensor>& inputs, const std::string& device,
                        std::unordered_map<std::string, Value>& env) {
  size_t k = 0;
  for (const auto& gi : g.input()) {
    if (initializers.count(gi.name())) continue;  // a default the caller may override, or a weight
    if (k >= inputs.size()) break;
    const Tensor& t = inputs[k];
    const auto& info = declared[k++];
    if (!t.defined()) continue;
    // Declared shapes are hints (ONNX's own cases contradict theirs); only
    // a fixed size at a matching rank is checked.
    for (size_t d = 0; info.shape.size() == t.shape().size() && d < info.shape.size(); ++d)
      if (info.shape[d] >= 0 && info.shape[d] != t.shape()[d])
        throw ShapeError("input '" + info.name + "' of " + path + " expects dimension " + std::to_string(d) +
                         " = " + std::to_string(info.shape[d]) + ", got " + shape_str(t.shape()));
    Value v;
    const auto elem = gi.type().tensor_type().elem_type();
    v.elem = elem ? elem : TP::FLOAT;
    v.shape = t.shape();
    v.tensor = t.device() == device ? t : t.to(device);
    if (v.tensor.dtype() != onnx_detail::tl_dtype(v.elem, "input")) v.tensor = v.tensor.cast(onnx_detail::tl_dtype(v.elem, "input"));
    env[gi.name()] = std::move(v);
  }
}

// The shapes of `env`'s values into `shapes` (when given), and of the values
// folded away as the ones they became.
static void record_shapes(const std::unordered_map<std::string, Value>& env, const onnx_detail::GraphFolds& folds,
                   std::map<std::string, Shape>* shapes) {
  if (!shapes) return;
  for (const auto& [name, v] : env)
    if (v.present) (*shapes)[name] = v.shape;
  for (const auto& [gone, kept] : folds.same_shape)
    if (shapes->count(kept)) (*shapes)[gone] = shapes->at(kept);
}

OnnxRunCost OnnxModel::estimate_run(const std::vector<Tensor>& inputs, std::map<std::string, Shape>* shapes,
                                     std::string* error) const {
  std::map<std::string, Shape> own;
  if (!shapes) shapes = &own;
  double flops = 0;
  bool complete = true;
  {
    onnx_detail::ShapesOnly walk;
    try {
      run(inputs, shapes);
    } catch (const onnx_detail::NeedsValues&) {
      complete = false;  // shapes past a node that needs computed values are unknown
    } catch (const std::exception& e) {
      // A node the walk cannot build: a run will say the same; the estimate
      // covers the nodes before it.
      complete = false;
      if (error) *error = e.what();
    }
    flops = walk.flops();
  }
  OnnxRunCost cost = onnx_detail::run_cost(impl_->model.graph(), impl_->last_read, *shapes, flops);
  cost.complete = complete;
  return cost;
}

void OnnxModel::check_run_budget(const std::vector<Tensor>& inputs, const std::string& device) const {
  auto& m = *impl_;
  const std::string shown = shapes_of(inputs), key = device + " " + shown;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.within_budget.count(key)) return;
  }
  const OnnxRunCost cost = estimate_run(inputs);
  const bool accelerator = Registry::instance().get(device).info().kind != "CPU";
  io::check_run_budget(cost.flops, cost.peak_bytes, m.file_bytes, input_bytes_of(inputs), accelerator,
                       m.path + " run on an input of " + shown +
                           (cost.busiest.empty() ? "" : " (most held after node " + cost.busiest + ")"),
                       onnx_detail::batch_of(m.inputs, inputs));
  std::lock_guard<std::mutex> lock(m.mutex);
  m.within_budget.insert(key);
}

std::vector<Tensor> OnnxModel::run(const std::vector<Tensor>& inputs, std::map<std::string, Shape>* shapes) const {
  auto& m = *impl_;
  if (inputs.size() > m.inputs.size())
    throw ShapeError(m.path + " takes " + std::to_string(m.inputs.size()) + " inputs, got " + std::to_string(inputs.size()));
  const std::string device = inputs.empty() ? default_device() : inputs[0].device();
  // Every value a node makes is held to the load budget of the model's files
  // plus the inputs given (4 bytes an element, as the device stores them),
  // times a batch the caller chose.
  const int64_t max_elements =
      io::value_element_budget(m.file_bytes, input_bytes_of(inputs), onnx_detail::batch_of(m.inputs, inputs));
  if (!onnx_detail::ShapesOnly::active()) check_run_budget(inputs, device);
  std::unordered_map<std::string, Value> env = m.initializer_values(device);
  const auto& g = m.model.graph();
  bind_inputs(g, m.inputs, m.initializers, m.path, inputs, device, env);
  record_shapes(env, m.folds, shapes);  // the inputs and initializers; the rest as they are made
  Value absent;
  absent.present = false;
  using onnx_detail::run_limits::kMaxLazyDepth;
  onnx_detail::DepthMemo depth_memo;
  // Values the same on every run (initializers, folds) and those set by the inputs' shapes (fold_kind).
  std::set<std::string> constant, by_shape;
  for (const auto& [name, v] : m.initializers) constant.insert(name);
  const bool fold = !onnx_detail::ShapesOnly::active();
  const std::string shape_key = device + " " + shapes_of(inputs);
  try {
  for (int k = 0; k < g.node_size(); ++k) {
    const auto& n = g.node(k);
    const bool builder = onnx_detail::foldable_op(n.op_type());
    const auto kind = fold ? onnx_detail::fold_kind(n, constant, by_shape) : onnx_detail::FoldKind::None;
    const bool folds = kind != onnx_detail::FoldKind::None;
    auto& known = kind == onnx_detail::FoldKind::ByShape ? by_shape : constant;
    // A Shape or Size node runs every time (a value's shape may depend on the
    // input's values: NonZero's), and what it reads counts as known only
    // while it equals what it read when the values after it were kept.
    const bool reads_shape = n.op_type() == "Shape" || n.op_type() == "Size";
    std::optional<std::vector<double>> kept_shape;
    if (folds) {
      std::lock_guard<std::mutex> lock(m.mutex);
      auto& cache = m.folded.of(kind == onnx_detail::FoldKind::ByShape ? shape_key : device);
      if (auto it = cache.find(n.output(0)); it != cache.end()) {
        if (reads_shape && kind == onnx_detail::FoldKind::ByShape) {
          kept_shape = it->second.data;
        } else {
          env[n.output(0)] = it->second;
          if (shapes) (*shapes)[n.output(0)] = it->second.shape;
          known.insert(n.output(0));
          continue;
        }
      }
    }
    std::vector<Value*> ins;
    for (const auto& name : n.input()) {
      if (name.empty()) {
        ins.push_back(&absent);
        continue;
      }
      auto it = env.find(name);
      if (auto f = m.folds.made_by.find(name); it == env.end() && f != m.folds.made_by.end()) {
        std::lock_guard<std::mutex> lock(m.mutex);
        onnx_detail::bring_fold(m.folds, f->second, m.initializers, env, m.folded.of(device), device);
        it = env.find(name);
        if (shapes && it != env.end()) (*shapes)[name] = it->second.shape;
      }
      if (it == env.end())
        throw ShapeError("ONNX node '" + n.name() + "' (" + n.op_type() + ") reads '" + name +
                         "', which no earlier node, input or initializer defines");
      ins.push_back(&it->second);
    }
    const OriginScope origin(m.folds.file_index(k));  // what it makes names its node in the file
    std::vector<Value> outs = onnx_detail::in_node(m.path, k, n, [&] {
      return onnx_detail::run_node(n, ins, m.opset, device, max_elements);
    });
    if (kept_shape) {
      if (outs.size() == 1 && outs[0].host && outs[0].data == *kept_shape) known.insert(n.output(0));
    } else if (folds && outs.size() == 1 && outs[0].present && !outs[0].is_sequence &&
        (builder || numel(outs[0].shape) <= (kind == onnx_detail::FoldKind::ByShape ? onnx_detail::kFoldByShapeElements
                                                                                   : onnx_detail::kFoldSmallElements))) {
      onnx_detail::make_keepable(outs[0], device);
      std::lock_guard<std::mutex> lock(m.mutex);
      m.folded.of(kind == onnx_detail::FoldKind::ByShape ? shape_key : device)[n.output(0)] = outs[0];
      known.insert(n.output(0));
    }
    // A value more than kMaxLazyDepth lazy ops away from anything computed is
    // computed now: long chains (thousands of elementwise nodes) are slow to
    // fuse and deep enough to overflow the stack of a realize.
    for (auto& v : outs) {
      if (!v.present || v.host || !v.tensor.defined() || v.tensor.node()->realized()) continue;
      if (onnx_detail::too_deep(onnx_detail::lazy_depth(v.tensor.node(), depth_memo), kMaxLazyDepth)) {
        onnx_detail::bound_chain(v.tensor);
        depth_memo.clear();  // realized nodes forget their sources; addresses may be reused
      }
    }
    for (int i = 0; i < n.output_size() && size_t(i) < outs.size(); ++i)
      if (!n.output(i).empty()) {
        if (shapes && outs[size_t(i)].present) (*shapes)[n.output(i)] = outs[size_t(i)].shape;
        env[n.output(i)] = std::move(outs[size_t(i)]);
      }
    // A value whose last reader this was is dropped: a long graph holds only
    // what later nodes read (their shapes are kept as they are made).
    for (const auto& name : n.input())
      if (auto it = m.last_read.find(name);
          it != m.last_read.end() && it->second == k && !constant.count(name) && !by_shape.count(name))
        env.erase(name);
  }
  } catch (...) {
    record_shapes(env, m.folds, shapes);  // the shapes found before the node that failed or needs values
    throw;
  }
  record_shapes(env, m.folds, shapes);
  std::vector<Tensor> result;
  for (const auto& o : g.output()) {
    auto it = env.find(o.name());
    if (it == env.end()) throw ShapeError("graph output '" + o.name() + "' of " + m.path + " is never computed");
    result.push_back(onnx_detail::device_tensor(it->second, device));
  }
  // One realize for several outputs: a realize keeps only its roots.
  if (onnx_detail::ShapesOnly::active()) onnx_detail::ShapesOnly::count(result);
  else if (result.size() > 1) Tensor::realize_all(result);
  return result;
}

}  // namespace tl
