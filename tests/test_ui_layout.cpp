// The window as a new user meets it (issue 14): it fits a 1280x800 screen,
// a saved geometry from a larger screen is clamped, progress advances with
// numbers, the numbers shown agree with each other, a device is picked with
// a clear action, the menus and file names read right, and a compiler
// warning in a build log jumps to its line. One window and one cold CPU run
// for the whole suite.
#include <QAbstractItemModelTester>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTextBlock>
#include <filesystem>

#include "core/models/classifier.h"
#include "tests/testing.h"
#include "ui/main_window.h"

using namespace tlui;

namespace {

using tltest::kSquirrel;


QMenu* menuNamed(QMainWindow* window, const QString& title) {
  for (QAction* a : window->menuBar()->actions())
    if (a->menu() && a->text() == title) return a->menu();
  return nullptr;
}

// The text a menu shows: "&&" is a literal '&', a lone '&' marks a mnemonic.
QString shownText(QString text) {
  text.replace("&&", "\x01");
  text.remove('&');
  return text.replace("\x01", "&");
}

}  // namespace

class TestUiLayout : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> window_;
  QTemporaryDir tmp_;

 private slots:
  void initTestCase() {
    // An empty kernel cache: the progress test needs a cold run that compiles.
    QString home = qEnvironmentVariable("XDG_CACHE_HOME", QDir::homePath() + "/.cache");
    if (!qEnvironmentVariableIsSet("POCL_CACHE_DIR")) qputenv("POCL_CACHE_DIR", (home + "/pocl/kcache").toUtf8());
    qputenv("XDG_CACHE_HOME", tmp_.filePath("cache").toUtf8());
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("tinylens-test");
    QCoreApplication::setApplicationName("tinylens-layout-test");
    QSettings().clear();
    // What a user's earlier session left: a built-in model and a file.
    QSettings().setValue("recentFiles", QStringList{QString(kSquirrel), "efficientnet-lite0"});
    window_ = std::make_unique<MainWindow>();
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTRY_VERIFY_WITH_TIMEOUT(window_->devicePane()->model()->rowCount() > 0, 30000);
  }

  // Item 1: the default layout, every dock included, fits 1280x800, and
  // 1366x768 with room for a title bar and a panel.
  void minimumSizeFitsSmallScreens() {
    const QSize min = window_->minimumSizeHint().expandedTo(window_->minimumSize());
    qInfo("minimum size with every default dock: %dx%d", min.width(), min.height());
    QVERIFY2(min.width() <= 1280 && min.height() <= 800, qPrintable(QString("%1x%2").arg(min.width()).arg(min.height())));
    QVERIFY2(min.height() <= 768 - 70, qPrintable(QString("height %1").arg(min.height())));
    const auto docks = window_->findChildren<QDockWidget*>();
    // Image, devices, model, graph, kernels and source, training, memory,
    // timeline, tuner; Compare devices is a window of its own.
    QCOMPARE(docks.size(), 9);
    // At 1280x800 less a title bar, each dock shown (or the front tab of its
    // group) has room to be used.
    window_->resize(1280, 800 - 32);
    QTest::qWait(100);
    QCOMPARE(window_->size(), QSize(1280, 800 - 32));
    for (QDockWidget* dock : docks) {
      QVERIFY2(dock->toggleViewAction()->isChecked(), qPrintable(dock->windowTitle()));
      QVERIFY2(!dock->isFloating(), qPrintable(dock->windowTitle()));
      if (!dock->isVisible() || dock->visibleRegion().isEmpty()) {  // a back tab: its group's front dock is checked below
        QVERIFY2(!window_->tabifiedDockWidgets(dock).isEmpty(), qPrintable(dock->windowTitle()));
        continue;
      }
      const QSize size = dock->widget()->size();
      qInfo("%s: %dx%d, visible region empty %d", qPrintable(dock->windowTitle()), size.width(), size.height(),
            int(dock->visibleRegion().isEmpty()));
      QVERIFY2(size.width() >= 200 && size.height() >= 120,
               qPrintable(QString("%1: %2x%3").arg(dock->windowTitle()).arg(size.width()).arg(size.height())));
    }
    QVERIFY(window_->statusBar()->geometry().bottom() < window_->height());
  }

  // Issue 45 item 8: View > Reset Layout gives what a first start at the
  // window's size gives (it restored a state saved before the window had
  // its size), whatever the user did to the docks and the window since.
  void resetLayoutIsTheFirstStart() {
    struct Seen {
      Qt::DockWidgetArea area;
      bool shown;
      QSize size;
    };
    auto look = [](MainWindow& window) {
      std::map<QString, Seen> out;
      for (QDockWidget* d : window.findChildren<QDockWidget*>())
        out[d->objectName()] = {window.dockWidgetArea(d), d->isVisible() && !d->visibleRegion().isEmpty(),
                                d->widget()->size()};
      return out;
    };
    const QSize big(1600, 1000 - 32);
    QSettings().remove("windowState");
    std::map<QString, Seen> first;
    {
      MainWindow fresh;
      fresh.resize(big);
      fresh.show();
      QVERIFY(QTest::qWaitForWindowExposed(&fresh));
      QTest::qWait(100);
      first = look(fresh);
    }
    MainWindow window;
    window.resize(1280, 800 - 32);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTest::qWait(50);
    window.resize(big);
    window.findChild<QDockWidget*>("trainingDock")->setFloating(true);
    window.findChild<QDockWidget*>("sourceDock")->hide();
    window.resizeDocks({window.findChild<QDockWidget*>("kernelDock")}, {120}, Qt::Vertical);
    QTest::qWait(50);
    QAction* reset = nullptr;
    for (QAction* a : menuNamed(&window, "&View")->actions())
      if (a->text() == "&Reset Layout") reset = a;
    QVERIFY(reset);
    reset->trigger();
    QTest::qWait(100);
    const auto after = look(window);
    for (const auto& [name, seen] : first) {
      const Seen& now = after.at(name);
      QCOMPARE(now.area, seen.area);
      QCOMPARE(now.shown, seen.shown);
      if (!seen.shown) continue;  // a back tab has no size of its own
      QVERIFY2(std::abs(now.size.width() - seen.size.width()) <= 4 && std::abs(now.size.height() - seen.size.height()) <= 4,
               qPrintable(QString("%1: %2x%3 after the reset, %4x%5 at a first start").arg(name)
                              .arg(now.size.width()).arg(now.size.height()).arg(seen.size.width()).arg(seen.size.height())));
    }
  }

  // Issue 45 item 8: with the Training dock in front, Reset, Step, Run and
  // Evaluate are in view at 1280x800 and at 1600x1000 (they were below the
  // fold, under the settings).
  void trainingButtonsInView() {
    QSettings().remove("windowState");
    MainWindow window;
    for (QSize size : {QSize(1280, 800 - 32), QSize(1600, 1000 - 32)}) {
      window.resize(size);
      window.show();
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      QTest::qWait(100);
      QDockWidget* dock = window.findChild<QDockWidget*>("trainingDock");
      dock->raise();
      QTest::qWait(50);
      TrainingPane* page = window.trainingPane();
      for (QPushButton* b : {page->resetButton(), page->stepButton(), page->runButton(), page->evaluateButton()}) {
        QScrollArea* scroll = nullptr;
        for (QWidget* w = b->parentWidget(); w && !scroll; w = w->parentWidget()) scroll = qobject_cast<QScrollArea*>(w);
        QVERIFY(scroll);
        const QRect inView(b->mapTo(scroll->viewport(), QPoint(0, 0)), b->size());
        QVERIFY2(b->isVisible() && scroll->viewport()->rect().contains(inView),
                 qPrintable(QString("%1 at %2x%3: button at y %4..%5, view 0..%6").arg(b->text()).arg(size.width())
                                .arg(size.height()).arg(inView.top()).arg(inView.bottom())
                                .arg(scroll->viewport()->height())));
      }
    }
  }

  // Item 1: a geometry saved on a 1600-wide screen, restored on a smaller
  // one, is clamped to the screen.
  void savedGeometryIsClamped() {
    QWidget big;
    big.setGeometry(20, 40, 1560, 1032);
    QSettings().setValue("geometry", big.saveGeometry());
    MainWindow window;
    const QRect available = window.screen()->availableGeometry();
    const QSize min = window.minimumSizeHint();
    qInfo("screen %dx%d, restored window %dx%d", available.width(), available.height(), window.width(), window.height());
    QVERIFY(window.width() <= std::max(available.width(), min.width()));
    QVERIFY(window.height() <= std::max(available.height(), min.height()));
    QVERIFY(window.width() < 1560 && window.height() < 1032);
    QVERIFY(window.x() >= available.left() && window.y() >= available.top());
    QSettings().remove("geometry");
  }

  // Item 9: no "&" read as a mnemonic, Open Recent without "— .", the open
  // button says .onnx, and the op graph says how to start.
  void menusAndLabelsReadRight() {
    QMenu* view = menuNamed(window_.get(), "&View");
    QVERIFY(view);
    QStringList docks;
    for (QDockWidget* dock : window_->findChildren<QDockWidget*>()) docks << dock->windowTitle();
    for (QAction* a : view->actions()) {
      if (a->isSeparator()) continue;
      QString t = a->text();
      t.replace("&&", "");
      QVERIFY2(!t.contains("& ") && !t.endsWith('&'), qPrintable(a->text()));
      if (docks.contains(a->text())) QCOMPARE(shownText(a->text()), a->text());
    }
    QVERIFY(docks.contains("Image and predictions"));

    QMenu* file = menuNamed(window_.get(), "&File");
    QVERIFY(file);
    QMenu* recent = nullptr;
    for (QAction* a : file->actions())
      if (a->menu() && a->text() == "Open &Recent") recent = a->menu();
    QVERIFY(recent);
    QStringList texts;
    for (QAction* a : recent->actions()) texts << shownText(a->text());
    QCOMPARE(texts.size(), 2);
    QCOMPARE(texts[1], QString("efficientnet-lite0"));
    QVERIFY2(texts[0].startsWith("squirrel_cls.jpg") && texts[0].contains("/usr/share/doc"), qPrintable(texts[0]));

    bool onnxSaid = false;
    for (QPushButton* b : window_->modelPane()->findChildren<QPushButton*>())
      if (b->text().startsWith("Open")) onnxSaid = b->toolTip().contains(".onnx") || b->text().contains(".onnx");
    QVERIFY(onnxSaid);

    QVERIFY(window_->graphHint()->isVisible());
    QVERIFY(window_->graphHint()->text().contains("Open an image"));
  }

  // Item 9: Save offers a plain file name; the source gets the room, not an
  // empty build log.
  void sourcePaneSaveNameAndRoom() {
    SourcePane* pane = window_->sourcePane();
    QString source;
    for (int i = 0; i < 40; ++i) source += QString("  float v%1 = %1.0f;\n").arg(i);
    pane->setKernel("#0 E_1 (cpu)", "void E_1(int b, int e, void** a) {\n" + source + "}\n", "");
    const QString name = pane->suggestedFileName();
    QCOMPARE(name, QString("0_E_1_cpu.c"));
    pane->setKernel("#3 r_16_4 (opencl:0:0)", "__kernel void r_16_4(__global float* out) {}\n", "", ".cl");
    QCOMPARE(pane->suggestedFileName(), QString("3_r_16_4_opencl_0_0.cl"));
    if (pane->isVisible()) {
      QTRY_VERIFY(pane->sourceView()->height() > 3 * pane->logView()->height());
    }
  }

  // Item 2: a cold run tells kernels compiled of total, then runs done,
  // while the image is already shown with a line saying what is happening.
  void progressAdvancesWithNumbers() {
    TL_REQUIRE(tltest::weights_installed(), "EfficientNet-Lite0 weights not installed (run scripts/setup)");
    QSignalSpy compiles(window_->session(), &Session::compileProgress);
    QSignalSpy runs(window_->session(), &Session::runProgress);
    QSignalSpy done(window_.get(), &MainWindow::runFinished);
    QSignalSpy failed(window_.get(), &MainWindow::runFailed);
    // What the window showed when the first compile report arrived.
    bool imageShown = false;
    QString activity, status;
    auto once = connect(window_->session(), &Session::compileProgress, this, [&](quint64, const QString&, int c, int t) {
      if (c < t / 2 || !activity.isEmpty()) return;
      imageShown = !window_->imagePane()->image().isNull();
      activity = window_->imagePane()->activity();
      status = window_->statusText();
    });
    window_->openImage(kSquirrel);
    QTRY_VERIFY_WITH_TIMEOUT(!done.isEmpty() || !failed.isEmpty(), tltest::kRunTimeoutMs);
    disconnect(once);
    QVERIFY2(failed.isEmpty(), qPrintable(failed.isEmpty() ? QString() : failed[0][0].toString()));
    QVERIFY2(compiles.size() >= 3, qPrintable(QString::number(compiles.size())));
    int last = -1;
    const int total = compiles[0][3].toInt();
    QCOMPARE(compiles[0][2].toInt(), 0);
    QVERIFY(total > 10);
    QCOMPARE(compiles[0][1].toString(), QString("cpu"));
    // Reports come per realize batch (each starts at 0); within one the
    // count only grows.
    for (const auto& c : compiles) {
      int compiled = c[2].toInt();
      QVERIFY(compiled >= 0 && compiled <= c[3].toInt());
      if (compiled != 0) QVERIFY(compiled >= last);
      last = compiled;
    }
    QCOMPARE(compiles.last()[2].toInt(), compiles.last()[3].toInt());
    qInfo("%d compile reports, first batch %d kernels", int(compiles.size()), total);
    QCOMPARE(runs.size(), 3);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(runs[i][2].toInt(), i + 1);
      QCOMPARE(runs[i][3].toInt(), 3);
    }
    QVERIFY(imageShown);
    QVERIFY2(activity.startsWith("Compiling kernels for cpu") && activity.contains('/'), qPrintable(activity));
    QVERIFY2(status.contains("Compiling kernels"), qPrintable(status));
    QVERIFY(window_->imagePane()->activity().isEmpty());
    QVERIFY(!window_->graphHint()->isVisible());
  }

  // Item 4: the kernel table is the run whose latency is shown, and each
  // number says what it measures.
  void numbersAgree() {
    RunPtr run = window_->lastRun();
    TL_REQUIRE(run, "no run (weights missing)");
    QCOMPARE(run->warmRuns, 3);
    double sum = 0;
    for (auto& r : run->records) sum += r.seconds;
    QCOMPARE(run->kernelSeconds, sum);
    QVERIFY2(sum <= run->warmSeconds, qPrintable(QString("%1 > %2").arg(sum).arg(run->warmSeconds)));
    QCOMPARE(window_->kernelPane()->model()->totalSeconds(), sum);
    const QString warm = QString::number(run->warmSeconds * 1e3, 'f', 2);
    QVERIFY2(window_->kernelPane()->totalText().contains(warm), qPrintable(window_->kernelPane()->totalText()));
    QVERIFY2(window_->imagePane()->timesText().contains(warm), qPrintable(window_->imagePane()->timesText()));
    QVERIFY(window_->imagePane()->timesText().contains(QString::number(sum * 1e3, 'f', 2)));
    QVERIFY(window_->imagePane()->timesToolTip().contains("median"));
    QVERIFY(window_->imagePane()->timesToolTip().contains("compil"));
    QVERIFY(!window_->kernelPane()->findChildren<QLabel*>().isEmpty());
  }

  // Issue 45 item 8: at 1280x800 the kernel totals show whole (they were
  // cut at "host overhead 0."), the filter box is not "Fi...", the source
  // header's first words fit, and the Devices dock shows every device row.
  void panesReadableAt1280() {
    TL_REQUIRE(window_->lastRun(), "no run (weights missing)");
    window_->resize(1280, 800 - 32);
    QTest::qWait(100);
    KernelPane* kernels = window_->kernelPane();
    QLabel* total = nullptr;
    for (QLabel* l : kernels->findChildren<QLabel*>())
      if (l->text() == kernels->totalText()) total = l;
    QVERIFY(total);
    QVERIFY2(total->height() >= total->heightForWidth(total->width()),
             qPrintable(QString("%1 px tall, its text needs %2").arg(total->height()).arg(total->heightForWidth(total->width()))));
    QLineEdit* filter = kernels->findChild<QLineEdit*>();
    QVERIFY(filter);
    QVERIFY2(filter->width() >= filter->fontMetrics().horizontalAdvance("Filter kernels"), qPrintable(QString::number(filter->width())));
    SourcePane* source = window_->sourcePane();
    QLabel* title = source->findChildren<QLabel*>().value(0);
    QVERIFY(title);
    QVERIFY2(title->width() >= title->fontMetrics().horizontalAdvance(title->text().left(24)),
             qPrintable(QString("%1 in %2 px").arg(title->text()).arg(title->width())));
    QDockWidget* devices = window_->findChild<QDockWidget*>("deviceDock");
    devices->raise();
    QTest::qWait(50);
    QTableView* table = window_->devicePane()->view();
    auto* scroll = window_->findChild<QScrollArea*>("deviceDockScroll");
    QVERIFY(scroll);
    const QRect inView(table->mapTo(scroll->viewport(), QPoint(0, 0)), table->size());
    QVERIFY2(scroll->viewport()->rect().contains(inView),
             qPrintable(QString("device table at y %1..%2 in a view 0..%3").arg(inView.top()).arg(inView.bottom())
                            .arg(scroll->viewport()->height())));
    QVERIFY(table->height() >= table->horizontalHeader()->height() +
                                   table->model()->rowCount() * table->verticalHeader()->defaultSectionSize());
    window_->findChild<QDockWidget*>("modelDock")->raise();
  }

  // Item 5: every device in view; selecting one starts nothing; the button
  // picks it; after a cancel the results name their device.
  void pickingADevice() {
    TL_REQUIRE(window_->lastRun(), "no run (weights missing)");
    DevicePane* pane = window_->devicePane();
    QAbstractItemModelTester tester(pane->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    const int rows = pane->model()->rowCount();
    QVERIFY(pane->view()->minimumHeight() >= rows * pane->view()->verticalHeader()->defaultSectionSize());
    QStringList devices = pane->model()->availableNames();
    devices.removeAll("cpu");
    TL_REQUIRE(!devices.isEmpty(), "no second device (PoCL, scripts/setup installs it)");
    const QString other = devices[0];
    QModelIndex idx = pane->model()->index(pane->model()->rowOf(other), 0);
    pane->view()->selectionModel()->setCurrentIndex(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    QTest::qWait(200);
    QVERIFY(!window_->session()->busy());
    QCOMPARE(window_->device(), QString("cpu"));
    QVERIFY(pane->useButton()->isEnabled());

    QSignalSpy cancelled(window_->session(), &Session::cancelled);
    QTest::mouseClick(pane->useButton(), Qt::LeftButton);
    QVERIFY(window_->session()->busy());
    QCOMPARE(window_->device(), other);
    window_->session()->cancel();
    QTRY_VERIFY_WITH_TIMEOUT(!cancelled.isEmpty(), tltest::kRunTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(!window_->session()->busy(), 60000);
    QCOMPARE(window_->lastRun()->device, QString("cpu"));
    QVERIFY2(pane->resultsNote().contains("results shown are from <b>cpu</b>"), qPrintable(pane->resultsNote()));
    QVERIFY2(window_->imagePane()->activity().contains("results below are from cpu"),
             qPrintable(window_->imagePane()->activity()));
    QVERIFY(window_->imagePane()->timesText().contains("Results from cpu"));
    QVERIFY(window_->statusText().contains("results shown are from cpu"));
    QCOMPARE(pane->useButton()->text(), QString("Run here again"));
    // Back to cpu without a run: the CPU results are already shown.
    window_->setDevice("cpu");
    QTRY_VERIFY_WITH_TIMEOUT(!window_->session()->busy(), tltest::kRunTimeoutMs);
  }

  // Item 10: a kernel with a known warning shows in the source pane, and
  // clicking the warning in the log jumps to its line.
  void knownWarningJumpsToItsLine() {
    QSignalSpy shown(window_.get(), &MainWindow::warningKernelShown);
    QTRY_VERIFY_WITH_TIMEOUT(!window_->session()->busy(), tltest::kRunTimeoutMs);
    window_->buildWarningKernel();
    QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty(), 120000);
    SourcePane* pane = window_->sourcePane();
    const auto& diags = pane->diagnostics();
    QVERIFY2(!diags.empty(), qPrintable(pane->buildLog()));
    int warning = -1;
    for (size_t i = 0; i < diags.size(); ++i)
      if (diags[i].severity == "warning") warning = int(i);
    QVERIFY2(warning >= 0, qPrintable(pane->buildLog()));
    const Diagnostic d = diags[size_t(warning)];
    QVERIFY2(d.message.contains("parentheses"), qPrintable(d.message));
    QVERIFY(pane->source().split('\n').value(d.line - 1).contains("odd = i % 2"));
    // Put the source cursor elsewhere, then click the warning's log line.
    QTextCursor top(pane->sourceView()->document());
    pane->sourceView()->setTextCursor(top);
    QCOMPARE(pane->currentSourceLine(), 1);
    QPlainTextEdit* log = pane->logView();
    QTextBlock block = log->document()->findBlockByNumber(d.logLine);
    QVERIFY(block.isValid());
    log->setTextCursor(QTextCursor(log->document()));  // the click must move the cursor
    log->ensureCursorVisible();
    QTextCursor at(block);
    log->setTextCursor(at);
    log->ensureCursorVisible();
    QRect r = log->cursorRect(at);
    log->setTextCursor(QTextCursor(log->document()));
    if (d.logLine == 0) {  // the cursor is already on it: click elsewhere first
      log->setTextCursor(QTextCursor(log->document()->lastBlock()));
    }
    QTest::mouseClick(log->viewport(), Qt::LeftButton, Qt::NoModifier, r.center() + QPoint(10, 0));
    QCOMPARE(log->textCursor().blockNumber(), d.logLine);
    QCOMPARE(pane->currentSourceLine(), d.line);

    // The OpenCL variant: which warnings it gives depends on the device's
    // compiler (a double constant warns only without cl_khr_fp64), so only
    // that it builds and shows is checked; the log is printed.
    const QStringList devices = window_->devicePane()->model()->availableNames();
    QString opencl;
    for (const QString& name : devices)
      if (name.startsWith("opencl")) opencl = name;
    if (opencl.isEmpty()) return;
    shown.clear();
    window_->session()->buildWarningKernel(opencl);
    QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty(), 120000);
    QVERIFY(pane->source().contains("int steps = 2.5;"));
    QVERIFY(pane->title().contains(opencl));
    qInfo("%s build log (%d diagnostics):\n%s", qPrintable(opencl), int(pane->diagnostics().size()),
          qPrintable(pane->buildLog()));
    // PoCL writes "warning: FILE:3:15: ..." (severity first): still a link.
    if (!pane->diagnostics().empty()) {
      QVERIFY(pane->diagnostics()[0].line >= 1);
      QCOMPARE(pane->jumpToDiagnostic(0), pane->diagnostics()[0].line);
      QCOMPARE(pane->currentSourceLine(), pane->diagnostics()[0].line);
    }
  }

  void cleanupTestCase() {
    window_.reset();
    QSettings().clear();
  }
};

QTEST_MAIN(TestUiLayout)
#include "test_ui_layout.moc"
