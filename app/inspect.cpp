// tinylens-cli inspect MODEL: what the window shows when it opens a model,
// as text, through the same core call (tl::inspect_model_file). A file that
// cannot be opened gives one line on stderr and exit status 1.
#include <cstdio>
#include <string>
#include <vector>

#include "core/models/inspect.h"

namespace {

// The first line of a message, so an error is always one line.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

int cmd_inspect(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fputs("usage: tinylens-cli inspect MODEL   (a .onnx, .pth or .safetensors file, or efficientnet-lite0)\n",
               stderr);
    return 2;
  }
  try {
    tl::ModelInspection m = tl::inspect_model_file(args[0]);
    // A graph whose every input has a fixed size but that cannot be built
    // with those sizes is broken, not merely unusual.
    bool fixed_inputs = m.graph.has_value();
    if (m.graph)
      for (const auto& in : m.graph->inputs)
        for (auto d : in.shape) fixed_inputs = fixed_inputs && d >= 0;
    if (m.graph && m.unsupported == 0 && !m.shapes_inferred && fixed_inputs) {
      std::fprintf(stderr, "tinylens-cli: inspect: %s: %s\n", args[0].c_str(), first_line(m.shapes_error).c_str());
      return 1;
    }
    std::fputs(tl::format_inspection(m).c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tinylens-cli: inspect: %s\n", first_line(e.what()).c_str());
    return 1;
  }
}
