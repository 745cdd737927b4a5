#include "ui/panes/source_pane.h"

#include <QApplication>
#include <QClipboard>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTextBlock>
#include <QVBoxLayout>
#include <algorithm>

namespace tlui {

SourcePane::SourcePane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* bar = new QHBoxLayout;
  title_ = new QLabel(tr("No kernel selected"));
  title_->setToolTip(tr("Select a kernel in the kernel table to see its source and build log"));
  // A long title must not widen the dock past a small screen: it is cut
  // instead (the tooltip has it whole).
  title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* copy = new QPushButton(tr("Copy"));
  auto* save = new QPushButton(tr("Save..."));
  bar->addWidget(title_, 1);
  bar->addWidget(copy);
  bar->addWidget(save);
  layout->addLayout(bar);
  QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  source_ = new QPlainTextEdit;
  source_->setReadOnly(true);
  source_->setFont(mono);
  source_->setLineWrapMode(QPlainTextEdit::NoWrap);
  new KernelSourceHighlighter(source_->document());
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setFont(mono);
  log_->setPlaceholderText(tr("Build log: empty (the compiler printed nothing)"));
  log_->setLineWrapMode(QPlainTextEdit::NoWrap);
  new BuildLogHighlighter(log_->document());
  // A set minimum (not 0, which lets the splitter fall back to the editor's
  // own 70 px hint): an empty log can shrink to its two lines.
  log_->setMinimumHeight(fontMetrics().height() + 8);
  source_->setMinimumHeight(fontMetrics().height() * 3);
  split_ = new QSplitter(Qt::Vertical);
  split_->addWidget(source_);
  split_->addWidget(log_);
  split_->setStretchFactor(0, 4);
  split_->setStretchFactor(1, 1);
  split_->setSizes({400, 2 * fontMetrics().height() + 12});
  layout->addWidget(split_, 1);

  connect(copy, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(source_->toPlainText()); });
  connect(save, &QPushButton::clicked, this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Save kernel source"), suggestedFileName(),
                                                tr("C / OpenCL C (*.c *.cl *.cu);;All files (*)"));
    QString error;
    if (!path.isEmpty() && !this->save(path, &error)) QMessageBox::warning(this, tr("Save failed"), error);
  });
  connect(log_, &QPlainTextEdit::cursorPositionChanged, this, [this] {
    int block = log_->textCursor().blockNumber();
    for (size_t i = 0; i < diagnostics_.size(); ++i)
      if (diagnostics_[i].logLine == block) {
        jumpToDiagnostic(int(i));
        return;
      }
  });
}

void SourcePane::setKernel(const QString& title, const QString& source, const QString& buildLog,
                           const QString& extension) {
  title_->setText(title);
  extension_ = extension;
  title_->setToolTip(title);
  source_->setPlainText(source);
  const QString log = nameTempFiles(buildLog, kernelFileName(title, extension));
  log_->setPlainText(log);
  diagnostics_ = parseBuildLog(log);
  markDiagnostics();
  // An empty log takes two lines; a log with something in it a quarter.
  const int total = std::max(split_->height(), 200);
  const int logHeight = log.trimmed().isEmpty() ? 2 * fontMetrics().height() + 12
                                                     : std::max(total / 4, 5 * fontMetrics().height());
  split_->setSizes({std::max(total - logHeight, 1), logHeight});
}

QString SourcePane::suggestedFileName() const {
  QString stem;
  for (QChar c : title_->text()) {
    if (c.isLetterOrNumber() || c == '_' || c == '-') stem += c;
    else if (!stem.isEmpty() && !stem.endsWith('_')) stem += '_';
  }
  while (stem.endsWith('_')) stem.chop(1);
  if (stem.isEmpty()) stem = "kernel";
  return stem + extension_;
}

QString SourcePane::source() const { return source_->toPlainText(); }
QString SourcePane::buildLog() const { return log_->toPlainText(); }
QString SourcePane::title() const { return title_->text(); }

void SourcePane::markDiagnostics() {
  QList<QTextEdit::ExtraSelection> marks;
  for (const auto& d : diagnostics_) {
    QTextBlock block = source_->document()->findBlockByNumber(d.line - 1);
    if (!block.isValid()) continue;
    QTextEdit::ExtraSelection s;
    s.cursor = QTextCursor(block);
    s.format.setBackground(d.severity == "error" ? QColor(255, 220, 220) : QColor(255, 243, 205));
    s.format.setProperty(QTextFormat::FullWidthSelection, true);
    s.format.setToolTip(d.message);
    marks << s;
  }
  source_->setExtraSelections(marks);
}

int SourcePane::jumpToDiagnostic(int index) {
  if (index < 0 || size_t(index) >= diagnostics_.size()) return 0;
  const auto& d = diagnostics_[size_t(index)];
  QTextBlock block = source_->document()->findBlockByNumber(d.line - 1);
  if (!block.isValid()) return 0;
  QTextCursor c(block);
  if (d.column > 0) c.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor, std::min(d.column - 1, block.length() - 1));
  source_->setTextCursor(c);
  source_->centerCursor();
  source_->setFocus();
  return d.line;
}

int SourcePane::currentSourceLine() const { return source_->textCursor().blockNumber() + 1; }

bool SourcePane::save(const QString& path, QString* error) const {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    if (error) *error = tr("Could not write %1: %2").arg(path, f.errorString());
    return false;
  }
  f.write(source_->toPlainText().toUtf8());
  return true;
}

}  // namespace tlui
