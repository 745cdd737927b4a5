// One kernel's generated source, highlighted, with its compiler log below;
// clicking a diagnostic in the log jumps to its source line.
#pragma once
#include <QWidget>

#include "ui/source_highlight.h"

class QLabel;
class QPlainTextEdit;
class QSplitter;

namespace tlui {

class SourcePane : public QWidget {
  Q_OBJECT
 public:
  explicit SourcePane(QWidget* parent = nullptr);
  // extension: the device's dialect's (".c", ".cl", ".cu"), for Save.
  void setKernel(const QString& title, const QString& source, const QString& buildLog,
                 const QString& extension = ".c");
  QString source() const;
  QString buildLog() const;
  QString title() const;
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }
  // Moves the source view to the diagnostic's line; returns the line (1-based).
  int jumpToDiagnostic(int index);
  int currentSourceLine() const;
  bool save(const QString& path, QString* error) const;
  // What Save offers: the kernel's name and device, letters, digits and
  // '_' only, with .cl for OpenCL sources and .c otherwise.
  QString suggestedFileName() const;
  QPlainTextEdit* sourceView() const { return source_; }
  QPlainTextEdit* logView() const { return log_; }

 private:
  void markDiagnostics();
  QLabel* title_;
  QPlainTextEdit* source_;
  QPlainTextEdit* log_;
  QSplitter* split_;
  std::vector<Diagnostic> diagnostics_;
  QString extension_ = ".c";
};

}  // namespace tlui
