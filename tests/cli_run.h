// Runs the built command-line twin and collects what it did: for the suites
// that test it from outside (test_cli, test_trace).
#pragma once
#include <QCoreApplication>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace tltest {

struct CliRun {
  int code = -1;  // -1: it crashed, or did not start or finish
  QString out, err;
};

// The binary lands in the build folder's root, the suites in build/tests/.
inline QString cli_path() { return QCoreApplication::applicationDirPath() + "/../tinylens-cli"; }

inline CliRun run_cli(const QStringList& args, const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment(),
                      int timeout_ms = 10 * 60 * 1000) {
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(cli_path(), args);
  CliRun r;
  if (!p.waitForStarted() || !p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "did not start or finish: " + p.errorString();
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

}  // namespace tltest
