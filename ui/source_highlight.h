// Syntax colours for generated C / OpenCL C / CUDA C kernels, and the
// compiler-log reader that turns "file:line:col: warning: ..." into jumps.
#pragma once
#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>
#include <vector>

namespace tlui {

class KernelSourceHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
 public:
  explicit KernelSourceHighlighter(QTextDocument* document);

 protected:
  void highlightBlock(const QString& text) override;

 private:
  struct Rule {
    QRegularExpression pattern;
    QTextCharFormat format;
  };
  std::vector<Rule> rules_;
  QTextCharFormat comment_;
};

struct Diagnostic {
  int logLine = 0;      // 0-based line in the build log
  int line = 0;         // 1-based line in the source
  int column = 0;       // 1-based, 0 when absent
  QString severity;     // "error", "warning", "note"
  QString message;
};

// Every "path:line[:col]: severity: message" line of a compiler log (gcc,
// clang, PoCL and NVRTC all print this shape).
std::vector<Diagnostic> parseBuildLog(const QString& log);

class BuildLogHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
 public:
  explicit BuildLogHighlighter(QTextDocument* document);

 protected:
  void highlightBlock(const QString& text) override;
};

}  // namespace tlui
