#include "core/settings.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace tl {

namespace {
thread_local std::vector<std::pair<const char*, std::string>> overrides;  // innermost last
std::atomic<uint64_t> generation{0}, keyed_changes{0};

const char* value_of(const char* name) {
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (std::strcmp(it->first, name) == 0) return it->second.c_str();
  return std::getenv(name);
}
}  // namespace

const char* setting_value(SettingName name) { return value_of(name.c_str()); }

SettingOverride::SettingOverride(SettingName name, std::string value) {
  overrides.emplace_back(name.c_str(), std::move(value));
  ++generation;
}
SettingOverride::~SettingOverride() {
  overrides.pop_back();
  ++generation;
}

uint64_t settings_generation() { return generation.load(std::memory_order_relaxed); }
void settings_changed() {
  ++keyed_changes;
  ++generation;
}

bool setting_is_on(SettingName name) {
  const char* v = setting_value(name);
  return v && *v && std::string_view(v) != "0";
}

bool setting_equals(SettingName name, std::string_view value) {
  const char* v = setting_value(name);
  return v && std::string_view(v) == value;
}

std::string settings_key() {
  std::string key;
  for (const Setting& s : kSettings) {
    if (!s.keyed) continue;
    const char* v = value_of(s.name);
    key += v ? v : "";
    key += '\0';
  }
  if (const uint64_t n = keyed_changes.load()) key += std::to_string(n) + '\0';
  return key;
}

std::string settings_markdown(bool tests) {
  std::string out = "| variable | default | what it does |\n|---|---|---|\n";
  for (const Setting& s : kSettings)
    if (s.tests == tests) out += std::string("| `") + s.name + "` | " + s.fallback + " | " + s.effect + " |\n";
  return out;
}

std::string settings_report() {
  std::string out;
  for (bool tests : {false, true}) {
    out += tests ? "\nread by the tests and scripts:\n" : "read by tinylens and tinylens-cli:\n";
    for (const Setting& s : kSettings) {
      if (s.tests != tests) continue;
      const char* v = std::getenv(s.name);
      out += std::string(s.name) + (v ? "=" + std::string(v) : " (unset)") + "\n";
      out += std::string("    default: ") + s.fallback + "\n    " + s.effect + "\n    read in " + s.read_in + "\n";
    }
  }
  return out;
}

}  // namespace tl
