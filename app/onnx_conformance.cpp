// The ONNX conformance-case runner (see onnx_conformance.h).
#include "app/onnx_conformance.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/io/onnx.h"
#ifdef TL_HAVE_SAFETENSORS
#include <nlohmann/json.hpp>
#endif

namespace tl {

namespace fs = std::filesystem;

const char* onnx_status_name(OnnxCaseResult::Status s) {
  switch (s) {
    case OnnxCaseResult::Status::Pass: return "PASS";
    case OnnxCaseResult::Status::Fail: return "FAIL";
    case OnnxCaseResult::Status::Unsupported: return "UNSUPPORTED";
    case OnnxCaseResult::Status::ExpectedFailure: return "XFAIL";
  }
  return "?";
}

std::map<std::string, std::string> read_onnx_expected_failures(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError("cannot open the expected-failures list " + path);
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto h = line.find('#'); h != std::string::npos) line.erase(h);
    std::istringstream ss(line);
    std::string name;
    if (!(ss >> name)) continue;
    std::string reason;
    std::getline(ss, reason);
    reason.erase(0, reason.find_first_not_of(" \t"));
    out[name] = reason.empty() ? "listed without a reason" : reason;
  }
  return out;
}

std::vector<std::string> onnx_case_dirs(const std::string& dir, std::vector<std::string>* link_only) {
  std::vector<std::string> out;
  std::error_code ec, probe;
  if (fs::is_regular_file(fs::path(dir) / "model.onnx", probe)) return {dir};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_directory(probe)) continue;
    if (fs::is_regular_file(e.path() / "model.onnx", probe)) out.push_back(e.path().string());
    else if (link_only && fs::is_regular_file(e.path() / "data.json", probe)) link_only->push_back(e.path().string());
  }
  if (ec) throw IOError("cannot list " + dir + ": " + ec.message());
  std::sort(out.begin(), out.end());
  if (link_only) std::sort(link_only->begin(), link_only->end());
  return out;
}

std::string onnx_case_link(const std::string& dir) {
#ifdef TL_HAVE_SAFETENSORS
  std::ifstream in(fs::path(dir) / "data.json");
  auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_object() && json.contains("url") && json["url"].is_string()) return json["url"].get<std::string>();
#else
  (void)dir;
#endif
  return {};
}

namespace {

std::vector<std::string> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && n.size() > prefix.size() + 3 && n.substr(n.size() - 3) == ".pb")
      found.push_back({std::atoi(n.c_str() + prefix.size()), e.path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

}  // namespace

OnnxCaseResult run_onnx_case(const std::string& case_dir, const std::string& device,
                             const std::map<std::string, std::string>& expected_failures, double rtol, double atol) {
  OnnxCaseResult r;
  r.name = fs::path(case_dir).filename().string();
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(case_dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  // Whether the case counts towards the float32 pass rate: every input float32.
  try {
    r.float_inputs = true;
    if (!sets.empty())
      for (const auto& p : numbered(sets[0], "input_"))
        if (load_onnx_tensor(p).elem_type != 1 /* onnx::TensorProto::FLOAT */) r.float_inputs = false;
  } catch (const std::exception&) {
    r.float_inputs = false;
  }
  auto xfail = expected_failures.find(r.name);
  try {
    for (const auto& n : inspect_onnx((fs::path(case_dir) / "model.onnx").string()).nodes) r.ops.push_back(n.op_type);
  } catch (const std::exception&) {
    // A model that does not parse fails below with the reason.
  }
  try {
    OnnxModel model((fs::path(case_dir) / "model.onnx").string());
    if (sets.empty()) throw IOError("no test_data_set_* in " + case_dir);
    double worst = 0;
    std::string worst_where;
    for (const auto& set : sets) {
      std::vector<Tensor> ins;
      for (const auto& p : numbered(set, "input_")) ins.push_back(onnx_tensor_to_tensor(load_onnx_tensor(p), device));
      std::vector<Tensor> outs = model.run(ins);
      auto want_files = numbered(set, "output_");
      if (want_files.size() != outs.size())
        throw ShapeError("model gives " + std::to_string(outs.size()) + " outputs, the case has " +
                         std::to_string(want_files.size()));
      for (size_t o = 0; o < outs.size(); ++o) {
        OnnxTensorData want = load_onnx_tensor(want_files[o]);
        Shape got_shape = outs[o].shape();
        if (got_shape != want.shape) {
          r.status = OnnxCaseResult::Status::Fail;
          r.detail = "wrong output: output " + std::to_string(o) + " has shape " + shape_str(got_shape) + ", want " +
                     shape_str(want.shape);
          if (xfail != expected_failures.end()) {
            r.status = OnnxCaseResult::Status::ExpectedFailure;
            r.detail = xfail->second + " [" + r.detail + "]";
          }
          return r;
        }
        std::vector<double> got = outs[o].to_doubles();
        for (size_t i = 0; i < got.size(); ++i) {
          double x = got[i], y = want.values[i];
          double err;
          if (std::isnan(y) || std::isnan(x)) err = std::isnan(x) == std::isnan(y) ? 0 : INFINITY;
          else if (std::isinf(y) || std::isinf(x)) err = x == y ? 0 : INFINITY;
          else {
            // float32 outputs compared in float: the reference is float too.
            err = std::fabs(x - y) / (atol + rtol * std::fabs(y));
          }
          if (err > worst) {
            worst = err;
            std::ostringstream s;
            s << "output " << o << " [" << i << "]: " << x << " vs " << y;
            worst_where = s.str();
          }
        }
      }
    }
    if (worst <= 1) {
      r.status = OnnxCaseResult::Status::Pass;
      if (xfail != expected_failures.end()) r.detail = "passes although listed as expected failure";
      return r;
    }
    r.status = OnnxCaseResult::Status::Fail;
    std::ostringstream s;
    s << "wrong output: max err " << worst << "x tolerance at " << worst_where;
    r.detail = s.str();
  } catch (const OnnxUnsupported& e) {
    r.status = OnnxCaseResult::Status::Unsupported;
    r.op = e.op;
    r.detail = e.what();
    return r;
  } catch (const std::exception& e) {
    r.status = OnnxCaseResult::Status::Fail;
    r.detail = std::string("error: ") + e.what();
  }
  if (xfail != expected_failures.end()) {
    r.status = OnnxCaseResult::Status::ExpectedFailure;
    r.detail = xfail->second + " [" + r.detail + "]";
  }
  return r;
}

std::string onnx_table_coverage(const std::vector<OnnxCaseResult>& results) {
  std::set<std::string> passed;
  for (const auto& r : results)
    if (r.status == OnnxCaseResult::Status::Pass) passed.insert(r.ops.begin(), r.ops.end());
  const auto table = onnx_supported_ops();
  std::string missing;
  int host = 0;
  for (const auto& op : table) {
    host += op.host;
    if (!passed.count(op.name)) missing += " " + op.name;
  }
  std::ostringstream s;
  s << "op table: " << table.size() << " ops (" << table.size() - size_t(host) << " device, " << host << " host); "
    << table.size() - (missing.empty() ? 0 : size_t(std::count(missing.begin(), missing.end(), ' ')))
    << " ran in a passing case";
  if (!missing.empty()) s << "; no passing case for:" << missing;
  return s.str();
}

}  // namespace tl
