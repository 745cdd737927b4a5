// tinylens: the Qt window. `tinylens [--device NAME] [--screenshot FILE] [--report FILE] [MODEL] [IMAGE]`
#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QIcon>
#include <QTimer>
#include <cstdio>
#include <cstdlib>

#include "ui/main_window.h"

int main(int argc, char** argv) {
  // Without a display Qt would abort in its platform plugin; exit cleanly so
  // scripts/run can fall back to tinylens-cli.
  auto unset = [](const char* name) {
    const char* v = std::getenv(name);
    return !v || !*v;
  };
  if (unset("QT_QPA_PLATFORM") && unset("DISPLAY") && unset("WAYLAND_DISPLAY")) {
    std::fprintf(stderr, "tinylens: no display (DISPLAY, WAYLAND_DISPLAY and QT_QPA_PLATFORM are unset); "
                         "use tinylens-cli, or run under xvfb-run\n");
    return 3;
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName("tinylens");
  QApplication::setApplicationName("tinylens");
  QApplication::setApplicationVersion(TL_VERSION);
  QApplication::setDesktopFileName("tinylens");  // resources/tinylens.desktop, installed by cmake --install
  QApplication::setWindowIcon(QIcon(":/tinylens.svg"));

  QCommandLineParser parser;
  parser.setApplicationDescription("Model explorer: op graph, kernels, sources and timings per device.");
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption device("device", "Run on this device (cpu, opencl:0:0, ...).", "name");
  QCommandLineOption screenshot("screenshot", "Save a grab of the window after the first result and exit.", "file");
  QCommandLineOption linger("screenshot-linger",
                            "With --screenshot: keep the window this many milliseconds after saving the grab "
                            "(so a script can capture the whole screen with its window manager).",
                            "ms", "0");
  QCommandLineOption report("report", "Write the HTML report (File > Export Report) after the first result and exit.",
                            "file");
  parser.addOption(device);
  parser.addOption(screenshot);
  QCommandLineOption pane("pane", "Bring this pane to the front (e.g. Timeline, Memory, Kernels).", "title");
  parser.addOption(report);
  parser.addOption(pane);
  parser.addOption(linger);
  parser.addPositionalArgument("model", "A built-in model name or a .pth / .safetensors file (optional).");
  parser.addPositionalArgument("image", "An image to classify (optional).");
  parser.process(app);

  tlui::MainWindow window;
  if (parser.isSet(screenshot)) window.setScreenshotPath(parser.value(screenshot), parser.value(linger).toInt());
  if (parser.isSet(report)) window.setReportPath(parser.value(report));
  if (parser.isSet(device)) window.setDevice(parser.value(device));
  window.show();
  if (parser.isSet(pane) && !window.raisePane(parser.value(pane))) {
    std::fprintf(stderr, "tinylens: no pane titled '%s'\n", qPrintable(parser.value(pane)));
    return 2;
  }

  QString model, image;
  for (const QString& arg : parser.positionalArguments()) {
    if (tlui::MainWindow::isModelFile(arg) || arg == "efficientnet-lite0") model = arg;
    else image = arg;
  }
  if (!model.isEmpty()) window.openModel(model);
  if (!image.isEmpty()) window.openImage(image);
  return app.exec();
}
