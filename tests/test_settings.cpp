// The settings table (core/settings.h) against the source tree, the READMEs
// and `tinylens-cli env`: every TINYLENS_ name the tree spells is a row, each
// row is read where it says, the core reads none except through the table,
// the READMEs hold the table's text, and env prints every row with its value.
#include <QProcess>
#include <QtTest/QtTest>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/settings.h"
#include "tests/testing.h"

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_row(const std::string& name) {
  for (const tl::Setting& s : tl::kSettings)
    if (name == s.name) return true;
  return false;
}

// The text files of the tree a setting may be named in: code, scripts, docs.
std::vector<fs::path> tree_files() {
  const fs::path root = tltest::source_dir();
  std::vector<fs::path> out{root / "CMakeLists.txt", root / "README.md"};
  for (const char* top : {"core", "app", "ui", "tests", "scripts", "kernels"})
    for (auto& e : fs::recursive_directory_iterator(root / top)) {
      if (!e.is_regular_file() || e.path().string().find("/tests/data/") != std::string::npos) continue;
      const std::string ext = e.path().extension().string();
      if (ext.empty() || ext == ".cpp" || ext == ".h" || ext == ".c" || ext == ".cl" || ext == ".cu" ||
          ext == ".py" || ext == ".md" || ext == ".txt" || ext == ".cmake")
        out.push_back(e.path());
    }
  return out;
}

struct EnvGuard {  // restores a variable on every way out
  std::string name;
  std::optional<std::string> old;
  explicit EnvGuard(std::string n) : name(std::move(n)) {
    if (const char* v = std::getenv(name.c_str())) old = v;
  }
  ~EnvGuard() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
};

}  // namespace

class TestSettings : public QObject {
  Q_OBJECT

 private slots:
  void everyNameInTheTreeIsARow() {
    const std::regex name("TINYLENS_[A-Z0-9_]*[A-Z0-9]");
    std::set<std::string> seen, missing;
    for (const fs::path& file : tree_files()) {
      const std::string text = read_text(file);
      for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
        if (it->str().ends_with("_H")) continue;  // an include guard (kernels/gemm_cpu.h)
        seen.insert(it->str());
        if (!is_row(it->str())) missing.insert(it->str() + " (" + file.string() + ")");
      }
    }
    // QVERIFY2 builds its message whether or not the check fails.
    const std::string first = missing.empty() ? std::string() : *missing.begin();
    QVERIFY2(missing.empty(), qPrintable(QString::fromStdString("not in core/settings.h: " + first)));
    QVERIFY(seen.count("TINYLENS_TUNE") && seen.count("TINYLENS_STRICT"));
    for (const tl::Setting& s : tl::kSettings)  // and no row is dead
      QVERIFY2(seen.count(s.name), s.name);
  }

  void everyRowIsReadWhereItSays() {
    for (const tl::Setting& s : tl::kSettings) {
      std::stringstream files(s.read_in);
      int count = 0;
      for (std::string file; std::getline(files, file, ',');) {
        file.erase(0, file.find_first_not_of(' '));
        const fs::path path = fs::path(tltest::source_dir()) / file;
        QVERIFY2(fs::is_regular_file(path), qPrintable(QString("%1: no file %2").arg(s.name, file.c_str())));
        QVERIFY2(read_text(path).find(s.name) != std::string::npos,
                 qPrintable(QString("%1 is not named in %2").arg(s.name, file.c_str())));
        ++count;
      }
      QVERIFY2(count > 0, s.name);
      QVERIFY2(*s.fallback && *s.effect, s.name);
    }
  }

  // Only core/settings.cpp calls getenv for a TINYLENS_ variable in the
  // programs' code; the rest ask the table.
  void theProgramsReadSettingsOnlyThroughTheTable() {
    const std::regex direct("(getenv|qgetenv|qEnvironmentVariable\\w*)\\s*\\(\\s*\"TINYLENS_");
    const fs::path root = tltest::source_dir();
    for (const char* top : {"core", "app", "ui"})
      for (auto& e : fs::recursive_directory_iterator(root / top)) {
        if (!e.is_regular_file()) continue;
        const std::string text = read_text(e.path());
        QVERIFY2(!std::regex_search(text, direct), qPrintable(QString::fromStdString(e.path().string())));
      }
  }

  void readmesHoldTheTable() {
    const std::string top = read_text(fs::path(tltest::source_dir()) / "README.md");
    const std::string tests = read_text(fs::path(tltest::source_dir()) / "tests" / "README.md");
    QVERIFY2(top.find(tl::settings_markdown(false)) != std::string::npos,
             ("README.md lacks the programs' settings as `settings_markdown(false)` writes them:\n" +
              tl::settings_markdown(false)).c_str());
    QVERIFY2(tests.find(tl::settings_markdown(true)) != std::string::npos,
             ("tests/README.md lacks the tests' settings as `settings_markdown(true)` writes them:\n" +
              tl::settings_markdown(true)).c_str());
  }

  void helpersReadTheEnvironmentNow() {
    EnvGuard fold("TINYLENS_NOFOLD"), tune("TINYLENS_TUNE");
    for (auto [value, on] : {std::pair<const char*, bool>{nullptr, false}, {"", false}, {"0", false}, {"1", true},
                             {"yes", true}}) {
      value ? ::setenv("TINYLENS_NOFOLD", value, 1) : ::unsetenv("TINYLENS_NOFOLD");
      QCOMPARE(tl::setting_is_on("TINYLENS_NOFOLD"), on);
      QCOMPARE(tl::setting_value("TINYLENS_NOFOLD") != nullptr, value != nullptr);
    }
    ::setenv("TINYLENS_TUNE", "retune", 1);
    QVERIFY(tl::setting_equals("TINYLENS_TUNE", "retune"));
    QVERIFY(!tl::setting_equals("TINYLENS_TUNE", "retun"));
  }

  // The key joins the eight keyed settings in their order, unset as empty.
  void settingsKeyIsTheOldKey() {
    const char* keyed[] = {"TINYLENS_NOPOOLFUSION", "TINYLENS_NOREUSE",     "TINYLENS_TUNE",
                           "TINYLENS_GEMM",         "TINYLENS_REDUCE",      "TINYLENS_CUDA_TILE",
                           "TINYLENS_CUDA_PLANES",  "TINYLENS_CUDA_MATH"};
    std::vector<EnvGuard> guards;
    for (const char* name : keyed) guards.emplace_back(name), ::unsetenv(name);
    QCOMPARE(tl::settings_key(), std::string(8, '\0'));
    ::setenv("TINYLENS_TUNE", "1", 1);
    ::setenv("TINYLENS_CUDA_TILE", "64x64x16x4x4", 1);
    ::setenv("TINYLENS_CUDA_MATH", "fp32", 1);
    QCOMPARE(tl::settings_key(), std::string("\0\0" "1\0\0\0" "64x64x16x4x4\0\0" "fp32\0", 25));
    int rows = 0;
    for (const tl::Setting& s : tl::kSettings) rows += s.keyed;
    QCOMPARE(rows, 8);
  }

  void envPrintsEveryRowWithItsValue() {
    QProcess p;
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("TINYLENS_POOL_MB", "7");
    env.remove("TINYLENS_NOFOLD");
    p.setProcessEnvironment(env);
    p.start(QCoreApplication::applicationDirPath() + "/../tinylens-cli", {"env"});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(out.contains("\nTINYLENS_POOL_MB=7\n"), qPrintable(out));
    QVERIFY2(out.contains("\nTINYLENS_NOFOLD (unset)\n"), qPrintable(out));
    QVERIFY(out.contains("read in core/runtime/buffer_pool.cpp"));
    for (const tl::Setting& s : tl::kSettings) QVERIFY2(out.contains(QString(s.name)), s.name);
  }
};

QTEST_GUILESS_MAIN(TestSettings)
#include "test_settings.moc"
