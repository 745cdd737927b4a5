// What the command files of tinylens-cli share: a command's parsed
// arguments, the usage error, and the helpers several commands use.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/trace.h"

namespace tlcli {

// A command's arguments: the words after its name, and its options
// (`--name value`, `--name=value`, or "1" for a flag).
struct Args {
  std::vector<std::string> words;
  std::map<std::string, std::string> options;
  bool has(const std::string& k) const { return options.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback = "") const {
    auto it = options.find(k);
    return it == options.end() ? fallback : it->second;
  }
};

// Wrong words on the command line: main prints the message, then the usage
// of the command at hand, on stderr, and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int positive_option(const Args& a, const std::string& key, int fallback);
// "all": every available device; else the one named, or the default.
std::vector<std::string> pick_devices(const std::string& spec);
// One source file and one build log per distinct kernel, in launch order.
void dump_kernels(const std::vector<tl::ProfileRecord>& records, const std::string& dir);

// --trace FILE: checked before the work starts, so an unwritable path fails
// at once and not after a long benchmark; then written from the run.
void check_writable(const std::string& path, const std::string& what);
void save_trace(const std::string& path, const tl::TraceDocument& doc);
// Appends `more` (another device's run) to `into`, keeping into's origin.
void merge_trace(tl::TraceDocument& into, tl::TraceDocument more);

}  // namespace tlcli
