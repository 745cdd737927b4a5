#include "core/settings.h"

#include <cstdlib>

namespace tl {

const char* setting_value(SettingName name) { return std::getenv(name.c_str()); }

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
    const char* v = std::getenv(s.name);
    key += v ? v : "";
    key += '\0';
  }
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
