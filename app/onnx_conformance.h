// The runner of ONNX's own backend conformance cases
// (onnx/backend/test/data/node/<case>/: model.onnx + test_data_set_*/*.pb).
// Tool code for tinylens-cli onnx-test and tests/test_onnx.cpp, not part of
// the library a program embeds; it uses only core's public ONNX API.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace tl {

struct OnnxCaseResult {
  enum class Status { Pass, Fail, Unsupported, ExpectedFailure };
  std::string name;       // the case folder's name
  Status status = Status::Fail;
  std::string detail;     // "max err 0.3 at 12", "ai.onnx::Einsum", the xfail reason
  bool float_inputs = false;  // every input is float32
  std::string op;         // unsupported op, when status is Unsupported
  std::vector<std::string> ops;  // op types of the case's model (when it parses)
};
const char* onnx_status_name(OnnxCaseResult::Status s);  // PASS FAIL UNSUPPORTED XFAIL

// "case_name  reason" lines; '#' starts a comment.
std::map<std::string, std::string> read_onnx_expected_failures(const std::string& path);

// Runs every test_data_set_* of one case folder on `device` and compares each
// output (|got - want| <= atol + rtol * |want|, NaN where NaN).
OnnxCaseResult run_onnx_case(const std::string& case_dir, const std::string& device,
                             const std::map<std::string, std::string>& expected_failures = {},
                             double rtol = 1e-3, double atol = 1e-4);

// Case folders (those holding a model.onnx) directly under `dir`, or `dir`
// itself when it is one; sorted by name.
// Folders holding only a data.json (the wheel's real-model tests: a download
// link, no model) go to `link_only` when given.
std::vector<std::string> onnx_case_dirs(const std::string& dir, std::vector<std::string>* link_only = nullptr);
// The download URL in such a folder's data.json; empty when there is none
// (or when this build has no JSON reader).
std::string onnx_case_link(const std::string& dir);

// The report's summary of the op table against a set of results: how many
// ops the table holds, which ones no case passed with, "" when all did.
std::string onnx_table_coverage(const std::vector<OnnxCaseResult>& results);

}  // namespace tl
