# Writes a C++ file that holds every kernel template as a string, so the
# installed program never looks for kernel files on disk.
set(body "#include <map>\n#include <string>\nnamespace tl {\nconst std::map<std::string, std::string>& embedded_kernels() {\n  static const std::map<std::string, std::string> k = {\n")
string(REPLACE "," ";" FILES "${FILES}")
foreach(f ${FILES})
  get_filename_component(name ${f} NAME)
  file(READ ${f} text)
  set(body "${body}    {\"${name}\", R\"TLKERNEL(${text})TLKERNEL\"},\n")
endforeach()
set(body "${body}  };\n  return k;\n}\n}  // namespace tl\n")
file(WRITE ${OUT}.tmp "${body}")
file(RENAME ${OUT}.tmp ${OUT})
