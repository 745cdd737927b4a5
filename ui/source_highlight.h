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

// A compiler that builds from a temporary file names it in its log (PoCL:
// ".../pocl/kcache/tempfile_Wm62kL.cl:3:1: warning: ..."): each such path
// becomes `fileName` ("r_16_4.cl:3:1"), the kernel the log is about.
QString nameTempFiles(const QString& log, const QString& fileName);
// "#3 r_16_4 (opencl:0:0)" and ".cl" -> "r_16_4.cl": the kernel of a source
// pane title, as a file name.
QString kernelFileName(const QString& title, const QString& extension);

class BuildLogHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
 public:
  explicit BuildLogHighlighter(QTextDocument* document);

 protected:
  void highlightBlock(const QString& text) override;
};

}  // namespace tlui
