// The build never downgrades quietly: with the defaults, a missing library is
// a configure error that names the Debian packages to install, and leaving a
// library out is an explicit flag. Each case configures the real top-level
// CMakeLists.txt in a scratch folder with one package hidden from CMake.
#include <QtTest/QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include "tests/testing.h"

class TestConfigure : public QObject {
  Q_OBJECT

  struct Result {
    int exit_code = -1;
    QString output;  // stdout and stderr together
  };

  static Result configure(const QStringList& extra) {
    QTemporaryDir scratch;
    Result r;
    if (!scratch.isValid()) {
      r.output = "cannot make a scratch folder";
      return r;
    }
    QProcess cmake;
    cmake.setProcessChannelMode(QProcess::MergedChannels);
    QStringList args = {"-S", TL_SOURCE_DIR, "-B", scratch.path()};
    args += extra;
    cmake.start("cmake", args);
    if (!cmake.waitForFinished(300000)) {
      r.output = "cmake did not finish: " + cmake.errorString();
      return r;
    }
    r.exit_code = cmake.exitStatus() == QProcess::NormalExit ? cmake.exitCode() : -1;
    // CMake folds long messages over lines; compare words, not layout.
    r.output = QString::fromLocal8Bit(cmake.readAll()).simplified();
    return r;
  }

 private slots:
  void missingLibraryStopsTheConfigure_data() {
    QTest::addColumn<QString>("hide");
    QTest::addColumn<QStringList>("packages");  // each must be named in the error
    QTest::addColumn<QString>("optOut");
    QTest::newRow("Qt6") << "Qt6" << QStringList{"qt6-base-dev", "qt6-charts-dev", "qt6-svg-dev", "libqt6opengl6-dev"}
                         << "TL_WITH_QT=OFF";
    // What happened on a fresh machine: Qt6Charts failed (its CMake package
    // needs Qt6OpenGL) and the window was dropped without a word.
    QTest::newRow("Qt6Charts") << "Qt6Charts" << QStringList{"qt6-charts-dev", "libqt6opengl6-dev"}
                               << "TL_WITH_QT=OFF";
    QTest::newRow("OpenCL") << "OpenCL" << QStringList{"ocl-icd-opencl-dev", "opencl-headers"} << "TL_WITH_OPENCL=OFF";
    QTest::newRow("ONNX") << "ONNX" << QStringList{"libonnx-dev"} << "TL_WITH_ONNX=OFF";
    QTest::newRow("Protobuf") << "Protobuf" << QStringList{"libprotobuf-dev", "protobuf-compiler"}
                              << "TL_WITH_ONNX=OFF";
  }
  void missingLibraryStopsTheConfigure() {
    QFETCH(QString, hide);
    QFETCH(QStringList, packages);
    QFETCH(QString, optOut);
    const Result r = configure({"-DCMAKE_DISABLE_FIND_PACKAGE_" + hide + "=ON"});
    QVERIFY2(r.exit_code != 0, qPrintable("configure succeeded without " + hide + ":\n" + r.output.right(2000)));
    QVERIFY2(r.output.contains("CMake Error"), qPrintable(r.output.right(2000)));
    for (const QString& p : packages)
      QVERIFY2(r.output.contains(p), qPrintable("the error does not name " + p + ": " + r.output.right(2000)));
    QVERIFY2(r.output.contains("-D" + optOut), qPrintable("the error does not say how to opt out: " + r.output.right(2000)));
  }

  // Opting out is one explicit flag, and then the configure says what it left out.
  void explicitOptOutConfigures() {
    const Result r = configure({"-DTL_WITH_QT=OFF", "-DCMAKE_DISABLE_FIND_PACKAGE_Qt6=ON"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.output.right(3000)));
    QVERIFY2(r.output.contains("TL_WITH_QT=OFF: building only tinylens_core and tinylens-cli"),
             qPrintable(r.output.right(2000)));
  }

  // cmake --install puts both programs, the desktop entry, its icon and the
  // models under the prefix, and the installed CLI finds its models there with
  // no help from the environment or the source tree.
  void installedProgramFindsItsModels() {
    const QString build = QCoreApplication::applicationDirPath() + "/..";
    const QString models = QString(TL_SOURCE_DIR) + "/resources/models/efficientnet-lite0-57934424.pth";
    TL_REQUIRE(QFileInfo::exists(models), "EfficientNet-Lite0 weights not installed (run scripts/setup)");
    QTemporaryDir prefix, home;
    QVERIFY(prefix.isValid() && home.isValid());
    QProcess install;
    install.setProcessChannelMode(QProcess::MergedChannels);
    install.start("cmake", {"--install", build, "--prefix", prefix.path()});
    QVERIFY(install.waitForFinished(300000));
    QVERIFY2(install.exitCode() == 0, install.readAll().constData());
    for (const char* file : {"bin/tinylens", "bin/tinylens-cli", "share/applications/tinylens.desktop",
                             "share/icons/hicolor/scalable/apps/tinylens.svg",
                             "share/tinylens/models/efficientnet-lite0-57934424.pth",
                             "share/tinylens/models/imagenet_classes.txt"})
      QVERIFY2(QFileInfo::exists(prefix.filePath(file)), file);
    QFile desktop(prefix.filePath("share/applications/tinylens.desktop"));
    QVERIFY(desktop.open(QIODevice::ReadOnly));
    const QByteArray entry = desktop.readAll();
    QVERIFY(entry.contains("\nExec=tinylens %F\n"));
    QVERIFY(entry.contains("\nIcon=tinylens\n"));

    const QString image = "/usr/share/doc/opencv-doc/examples/data/squirrel_cls.jpg";
    TL_REQUIRE(QFileInfo::exists(image), "opencv-doc's sample images are not installed");
    QProcess cli;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("TINYLENS_MODELS");
    env.remove("XDG_DATA_HOME");
    env.insert("HOME", home.path());  // an empty user data folder
    cli.setProcessEnvironment(env);
    cli.setWorkingDirectory(home.path());
    cli.start(prefix.filePath("bin/tinylens-cli"), {"classify", image, "--runs", "1"});
    QVERIFY(cli.waitForFinished(600000));
    const QString out = QString::fromLocal8Bit(cli.readAllStandardOutput());
    QVERIFY2(cli.exitCode() == 0, qPrintable(out + cli.readAllStandardError()));
    const QStringList lines = out.split('\n');
    QVERIFY2(lines.size() > 1 && lines[1].contains("fox squirrel"), qPrintable(out));
  }
};

QTEST_GUILESS_MAIN(TestConfigure)
#include "test_configure.moc"
