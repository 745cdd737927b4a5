#include "ui/source_highlight.h"

#include <QRegularExpression>

#include <QStringList>

namespace tlui {

namespace {
const QRegularExpression& diagnosticPattern() {
  static const QRegularExpression re(
      R"(^\s*(.*?):(\d+):(?:(\d+):)?\s*(fatal error|error|warning|note|remark):\s*(.*)$)");
  return re;
}

// PoCL's form puts the severity first: "warning: /tmp/x.cl:3:15: message".
const QRegularExpression& severityFirstPattern() {
  static const QRegularExpression re(
      R"(^\s*(fatal error|error|warning|note|remark):\s*(.*?):(\d+):(?:(\d+):)?\s*(.*)$)");
  return re;
}

// One log line as a diagnostic (logLine left 0), or false.
bool matchDiagnostic(const QString& text, Diagnostic* d) {
  if (auto m = diagnosticPattern().match(text); m.hasMatch()) {
    d->line = m.captured(2).toInt();
    d->column = m.captured(3).isEmpty() ? 0 : m.captured(3).toInt();
    d->severity = m.captured(4) == "fatal error" ? "error" : m.captured(4);
    d->message = m.captured(5);
    return true;
  }
  if (auto m = severityFirstPattern().match(text); m.hasMatch()) {
    d->line = m.captured(3).toInt();
    d->column = m.captured(4).isEmpty() ? 0 : m.captured(4).toInt();
    d->severity = m.captured(1) == "fatal error" ? "error" : m.captured(1);
    d->message = m.captured(5);
    return true;
  }
  return false;
}
}  // namespace

KernelSourceHighlighter::KernelSourceHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
  auto fmt = [](QColor colour, bool bold = false, bool italic = false) {
    QTextCharFormat f;
    f.setForeground(colour);
    if (bold) f.setFontWeight(QFont::Bold);
    f.setFontItalic(italic);
    return f;
  };
  const QStringList keywords = {"if", "else", "for", "while", "do", "return", "break", "continue", "switch", "case",
                                "default", "const", "static", "inline", "restrict", "__restrict__", "struct",
                                "typedef", "sizeof", "extern", "volatile", "unsigned", "signed"};
  const QStringList types = {"void", "float", "double", "half", "int", "long", "short", "char", "bool", "size_t",
                             "int64_t", "int32_t", "uint32_t", "uint64_t", "uint8_t", "float2", "float4", "float8",
                             "float16", "int2", "int4", "uint"};
  auto words = [](const QStringList& list) { return QRegularExpression("\\b(" + list.join('|') + ")\\b"); };
  rules_.push_back({QRegularExpression(R"(\b[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?[fFuUlL]*\b)"), fmt(QColor(160, 80, 0))});
  rules_.push_back({words(keywords), fmt(QColor(0, 0, 160), true)});
  rules_.push_back({words(types), fmt(QColor(0, 110, 110), true)});
  rules_.push_back({QRegularExpression(R"((__kernel|__global__|__device__|__shared__|__global|__local|__constant|__private)\b)"),
                    fmt(QColor(140, 0, 140), true)});
  rules_.push_back({QRegularExpression(R"(\b(get_global_id|get_local_id|get_group_id|barrier|threadIdx|blockIdx|blockDim)\b)"),
                    fmt(QColor(140, 0, 140))});
  rules_.push_back({QRegularExpression(R"(^\s*#.*$)"), fmt(QColor(120, 90, 0))});
  rules_.push_back({QRegularExpression(R"("([^"\\]|\\.)*")"), fmt(QColor(0, 120, 0))});
  rules_.push_back({QRegularExpression(R"(//[^\n]*)"), fmt(QColor(110, 110, 110), false, true)});
  comment_ = fmt(QColor(110, 110, 110), false, true);
}

void KernelSourceHighlighter::highlightBlock(const QString& text) {
  for (const auto& rule : rules_) {
    auto it = rule.pattern.globalMatch(text);
    while (it.hasNext()) {
      auto m = it.next();
      setFormat(int(m.capturedStart()), int(m.capturedLength()), rule.format);
    }
  }
  // Block comments may span lines: state 1 means "inside /* */".
  setCurrentBlockState(0);
  qsizetype start = previousBlockState() == 1 ? 0 : text.indexOf("/*");
  while (start >= 0) {
    qsizetype end = text.indexOf("*/", start + (previousBlockState() == 1 && start == 0 ? 0 : 2));
    qsizetype length;
    if (end < 0) {
      setCurrentBlockState(1);
      length = text.length() - start;
    } else {
      length = end - start + 2;
    }
    setFormat(int(start), int(length), comment_);
    start = end < 0 ? -1 : text.indexOf("/*", start + length);
  }
}

std::vector<Diagnostic> parseBuildLog(const QString& log) {
  std::vector<Diagnostic> out;
  const QStringList lines = log.split('\n');
  for (int i = 0; i < lines.size(); ++i) {
    Diagnostic d;
    if (!matchDiagnostic(lines[i], &d)) continue;
    d.logLine = i;
    out.push_back(d);
  }
  return out;
}

BuildLogHighlighter::BuildLogHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {}

void BuildLogHighlighter::highlightBlock(const QString& text) {
  Diagnostic d;
  if (!matchDiagnostic(text, &d)) return;
  QTextCharFormat f;
  const QString& severity = d.severity;
  if (severity.contains("error")) {
    f.setForeground(QColor(180, 0, 0));
    f.setBackground(QColor(255, 228, 228));
    f.setFontWeight(QFont::Bold);
  } else if (severity == "warning") {
    f.setForeground(QColor(140, 90, 0));
    f.setBackground(QColor(255, 244, 210));
  } else {
    f.setForeground(QColor(0, 80, 160));
  }
  f.setFontUnderline(true);  // they are links to the source line
  setFormat(0, int(text.length()), f);
}

QString nameTempFiles(const QString& log, const QString& fileName) {
  static const QRegularExpression temp(R"((?:[^\s:'"]*/)?tempfile_[A-Za-z0-9]+\.(?:cl|cu|c)\b)");
  QString out = log;
  return out.replace(temp, fileName);
}

QString kernelFileName(const QString& title, const QString& extension) {
  QString name = title;
  name.remove(QRegularExpression(R"(^#\d+\s+)"));
  name.remove(QRegularExpression(R"(\s+\([^()]*\)$)"));
  name = name.trimmed();
  if (name.isEmpty() || name.contains(' ')) name = "kernel";
  return name + extension;
}

}  // namespace tlui
