// File > Export Trace, File > Export Report, and the headless --report.
#include <QApplication>
#include <QDockWidget>
#include <QFileInfo>
#include <QLabel>
#include <QTimer>

#include "ui/main_window.h"

namespace tlui {

namespace {
// Exports are answered by job: the window listens once per request.
void whenExported(MainWindow* window, Session* session, quint64 job) {
  auto* context = new QObject(window);
  QObject::connect(session, &Session::exported, context, [window, context, job](quint64 done, const QString& path) {
    if (done != job) return;
    emit window->exportFinished(job, path);
    context->deleteLater();
  });
  QObject::connect(session, &Session::failed, context, [context, job](quint64 failed, Session::FailureSource, const QString&) {
    if (failed == job) context->deleteLater();
  });
}
}  // namespace

bool MainWindow::exportTrace(const QString& path, QString* error, quint64* job) {
  if (!lastRun_ || !lastRun_->trace) {
    if (error) *error = tr("There is no run to trace yet: classify an image first.");
    return false;
  }
  const quint64 id = session_->exportTrace(path, lastRun_);
  whenExported(this, session_, id);
  if (job) *job = id;
  status_->setText(tr("Exporting the trace of %1 to %2").arg(runSubject(*lastRun_), QFileInfo(path).absoluteFilePath()));
  return true;
}

bool MainWindow::exportReport(const QString& path, QString* error, quint64* job) {
  if (!lastRun_ || lastRun_->top.empty()) {
    if (error) *error = tr("There is no result to report yet: classify an image first.");
    return false;
  }
  const quint64 id = session_->exportReport(path, lastRun_, lastCompare_, lastModel_);
  whenExported(this, session_, id);
  if (job) *job = id;
  status_->setText(tr("Exporting the report of %1 to %2").arg(runSubject(*lastRun_), QFileInfo(path).absoluteFilePath()));
  return true;
}

bool MainWindow::raisePane(const QString& title) {
  for (QDockWidget* dock : findChildren<QDockWidget*>())
    if (dock->windowTitle().compare(title, Qt::CaseInsensitive) == 0) {
      dock->show();
      dock->raise();
      return true;
    }
  return false;
}

void MainWindow::setReportPath(const QString& path) {
  reportPath_ = path;
  QTimer::singleShot(600000, this, [] {
    qWarning("tinylens: no result within 10 minutes; no report written");
    QApplication::exit(4);
  });
  connect(this, &MainWindow::runFailed, this, [](const QString& message) {
    qWarning("tinylens: %s", qPrintable(message));
    QApplication::exit(5);
  });
  connect(this, &MainWindow::runFinished, this, [this] {
    if (reportPath_.isEmpty()) return;
    const QString target = reportPath_;
    reportPath_.clear();  // the first result only
    QString error;
    quint64 job = 0;
    if (!exportReport(target, &error, &job)) {
      qWarning("tinylens: %s", qPrintable(error));
      QApplication::exit(6);
      return;
    }
    connect(this, &MainWindow::exportFinished, this, [job](quint64 done, const QString&) {
      if (done == job) QApplication::exit(0);
    });
    connect(session_, &Session::failed, this, [job](quint64 failed, Session::FailureSource, const QString& message) {
      if (failed != job) return;
      qWarning("tinylens: %s", qPrintable(message));
      QApplication::exit(6);
    });
  });
}

}  // namespace tlui
