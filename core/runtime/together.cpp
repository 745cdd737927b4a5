#include "core/runtime/together.h"

#include <cctype>
#include <set>

namespace tl {

namespace {
bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
}  // namespace

std::string rename_kernel(const std::string& source, const std::string& from, const std::string& to) {
  std::string out;
  out.reserve(source.size() + 64);
  for (size_t i = 0; i < source.size();) {
    if (!identifier_char(source[i])) {
      out += source[i++];
      continue;
    }
    size_t end = i;
    while (end < source.size() && identifier_char(source[end])) ++end;
    std::string word = source.substr(i, end - i);
    if (word == from || word.rfind(from + "_", 0) == 0) word = to + word.substr(from.size());
    out += word;
    i = end;
  }
  return out;
}

std::vector<KernelSource> with_unique_names(const std::vector<KernelSource>& kernels) {
  std::vector<KernelSource> out;
  std::set<std::string> taken;
  for (size_t i = 0; i < kernels.size(); ++i) {
    KernelSource k = kernels[i];
    if (!taken.insert(k.name).second) {
      std::string name = k.name + "_b" + std::to_string(i);
      k.source = rename_kernel(k.source, k.name, name);
      k.name = name;
      taken.insert(name);
    }
    out.push_back(std::move(k));
  }
  return out;
}

// "#define NAME" or "#  define NAME(" at the start of a line -> NAME.
static std::vector<std::string> defined_macros(const std::string& source) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < source.size()) {
    size_t end = source.find('\n', pos);
    if (end == std::string::npos) end = source.size();
    size_t i = pos;
    auto skip_blanks = [&] {
      while (i < end && (source[i] == ' ' || source[i] == '\t')) ++i;
    };
    skip_blanks();
    if (i < end && source[i] == '#') {
      ++i;
      skip_blanks();
      if (source.compare(i, 6, "define") == 0 && i + 6 < end && !identifier_char(source[i + 6])) {
        i += 6;
        skip_blanks();
        size_t start = i;
        while (i < end && identifier_char(source[i])) ++i;
        if (i > start) names.push_back(source.substr(start, i - start));
      }
    }
    pos = end + 1;
  }
  return names;
}

std::string one_translation_unit(const std::vector<KernelSource>& kernels) {
  std::string text;
  for (auto& k : kernels) {
    text += "// ---- kernel " + k.name + "\n" + k.source;
    if (!text.empty() && text.back() != '\n') text += '\n';
    std::set<std::string> undone;
    for (auto& m : defined_macros(k.source)) {
      const bool include_guard = k.source.find("#ifndef " + m + "\n#define " + m + "\n") != std::string::npos;
      if (!include_guard && undone.insert(m).second) text += "#undef " + m + "\n";
    }
  }
  return text;
}

}  // namespace tl
