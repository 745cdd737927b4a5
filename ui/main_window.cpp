#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QScreen>
#include <QScrollArea>
#include <QWindow>
#include <QSettings>
#include <QStatusBar>
#include <QTimer>
#include <algorithm>
#include <set>
#include <QToolButton>

#include "core/runtime/registry.h"

namespace tlui {

namespace {
constexpr int kMaxRecent = 10;

// Each pane sits in a scroll area: a dock can then be made as small as the
// user likes (or as a 1280x800 screen needs) whatever its pane's own
// minimum size; below that minimum it scrolls instead of pushing the window
// past the screen's edge.
QDockWidget* makeDock(QMainWindow* window, const QString& title, const QString& objectName, QWidget* content) {
  auto* dock = new QDockWidget(title, window);
  dock->setObjectName(objectName);
  auto* scroll = new QScrollArea;
  scroll->setObjectName(objectName + "Scroll");
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(content);
  scroll->setMinimumSize(80, 60);
  dock->setWidget(scroll);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable |
                    QDockWidget::DockWidgetClosable);
  return dock;
}

// The file extension of `device`'s kernels, from its dialect (".c", ".cl",
// ".cu"), for saving a kernel's source.
QString sourceExtension(const QString& device) {
  for (auto& d : tl::Registry::instance().devices())
    if (d->name() == device.toStdString()) return QString::fromStdString(d->dialect().source_extension);
  return ".c";
}
}  // namespace

bool MainWindow::isModelFile(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  return suffix == "pth" || suffix == "pt" || suffix == "safetensors" || suffix == "onnx";
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), session_(new Session(this)) {
  setWindowTitle("tinylens");
  setAcceptDrops(true);
  setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks | QMainWindow::AllowNestedDocks);
  image_ = new ImagePane;
  model_ = new ModelPane;
  devices_ = new DevicePane;
  graph_ = new GraphPane;
  kernels_ = new KernelPane;
  source_ = new SourcePane;
  compare_ = new ComparePane;
  training_ = new TrainingPane(session_);
  memory_ = new MemoryPane;
  timeline_ = new TimelinePane;
  tuner_ = new TunerPane;
  buildDocks();
  buildMenus();

  status_ = new QLabel(tr("Ready. Drop an image to classify it."));
  progress_ = new QProgressBar;
  progress_->setRange(0, 100);
  progress_->setMaximumWidth(200);
  progress_->hide();
  cancel_ = new QToolButton;
  cancel_->setText(tr("Cancel"));
  cancel_->hide();
  statusBar()->addWidget(status_, 1);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QToolButton::clicked, session_, &Session::cancel);

  connectProgress();
  connectResults();
  connectTuner();

  // ---- widgets -> session ----
  connect(image_, &ImagePane::fileDropped, this, &MainWindow::openFile);
  connect(model_, &ModelPane::builtinChosen, this, &MainWindow::openModel);
  connect(model_, &ModelPane::openRequested, this, [this] {
    QString path = QFileDialog::getOpenFileName(this, tr("Open model"), {},
                                                tr("Models (*.pth *.pt *.safetensors *.onnx);;All files (*)"));
    if (!path.isEmpty()) openModel(path);
  });
  connect(devices_, &DevicePane::devicePicked, this, &MainWindow::setDevice);
  connect(kernels_, &KernelPane::kernelSelected, this, &MainWindow::showKernel);
  connect(memory_, &MemoryPane::kernelSelected, kernels_, &KernelPane::selectRecord);
  connect(timeline_, &TimelinePane::kernelSelected, kernels_, &KernelPane::selectRecord);
  connect(tuner_, &TunerPane::kernelSelected, kernels_, &KernelPane::selectRecord);
  connect(graph_, &GraphPane::kernelSelected, this, [this](int record) {
    kernels_->selectRecord(record);
  });
  connect(graph_, &GraphPane::layoutReady, this, &MainWindow::maybeScreenshot);
  connect(compare_, &ComparePane::compareRequested, this, &MainWindow::compareDevices);
  connect(training_, &TrainingPane::graphCaptured, this, &MainWindow::showTrainingGraph);

  // ---- settings ----
  QSettings settings;
  device_ = settings.value("device", "cpu").toString();
  training_->setDevice(device_);
  if (!restoreGeometry(settings.value("geometry").toByteArray())) resize(1560, 960);
  sizeDocksOnShow_ = !restoreState(settings.value("windowState").toByteArray());
  fitToScreen();
  rebuildRecentMenu();
  session_->enumerateDevices();
}

MainWindow::~MainWindow() = default;

// ---- session -> widgets ----
// What the worker is doing: the status line, the progress bar and Cancel.
void MainWindow::connectProgress() {
  connect(session_, &Session::progress, this, [this](quint64, const QString& stage, int pct) {
    status_->setText(stage);
    progress_->setRange(0, 100);
    progress_->setValue(pct);
    progress_->setFormat("%p%");
    progress_->show();
    // Only a run or a comparison can be cancelled; a model load cannot.
    cancel_->setVisible(session_->busy());
  });
  // A cold run spends nearly all its time compiling: say how far it got.
  connect(session_, &Session::compileProgress, this, [this](quint64, const QString& device, int compiled, int total) {
    const QString text = tr("Compiling kernels for %1... %2/%3").arg(device).arg(compiled).arg(total);
    status_->setText(text);
    progress_->setRange(0, std::max(total, 1));
    progress_->setValue(compiled);
    progress_->setFormat(tr("%1/%2 kernels").arg(compiled).arg(total));
    progress_->show();
    cancel_->show();
    image_->setActivity(text);
  });
  connect(session_, &Session::runProgress, this, [this](quint64, const QString& device, int run, int runs) {
    const QString text = tr("Timing on %1: run %2/%3").arg(device).arg(run).arg(runs);
    status_->setText(text);
    progress_->setRange(0, runs);
    progress_->setValue(run - 1);
    progress_->setFormat(tr("run %1/%2").arg(run).arg(runs));
    progress_->show();
    cancel_->show();
    image_->setActivity(text);
  });
  connect(session_, &Session::idle, this, [this] {
    settleProgress();
    compare_->setBusy(false);
  });
}

// What the worker answered: each pane shows its part.
void MainWindow::connectResults() {
  connect(session_, &Session::warningKernelBuilt, this,
          [this](const QString& device, const QString& name, const QString& source, const QString& log) {
            source_->setKernel(tr("%1 (%2)").arg(name, device), source, log, sourceExtension(device));
            if (auto* dock = findChild<QDockWidget*>("sourceDock")) {
              dock->show();
              dock->raise();
            }
            const int warnings = int(source_->diagnostics().size());
            status_->setText(warnings ? tr("Built %1 on %2: %3; click one in the build log to jump to its line")
                                            .arg(name, device,
                                                 warnings == 1 ? tr("1 diagnostic") : tr("%1 diagnostics").arg(warnings))
                                      : tr("Built %1 on %2: its compiler gave no diagnostic").arg(name, device));
            emit warningKernelShown();
          });
  connect(session_, &Session::devicesReady, this, [this](const DeviceList& list) {
    devices_->setDevices(list);
    compare_->setDevices(list);
    if (devices_->model()->rowOf(device_) < 0 || !devices_->model()->availableNames().contains(device_)) device_ = "cpu";
    devices_->setCurrent(device_);
    emit devicesKnown();
  });
  connect(session_, &Session::modelLoaded, this, [this](const ModelPtr& m) {
    settleProgress();
    loadedModel_ = m->nameOrPath;
    lastModel_ = m;
    model_->setModel(m);
    // The ONNX graph belongs to the .onnx it came from; another model hides it.
    if (m->job != 0 && !m->nameOrPath.endsWith(".onnx", Qt::CaseInsensitive) && graph_->onnx()) {
      graph_->setOnnx(nullptr);
      if (graph_->mode() == GraphPane::OnnxGraph) graph_->setMode(GraphPane::OpGraph);
    }
    // A model the user picked re-runs the current image; the built-in one
    // loaded on demand by a run does not (that run is already going).
    if (m->job != 0 && m->nameOrPath == pendingModel_) {
      pendingModel_.clear();
      addRecent(m->nameOrPath);
      status_->setText(tr("Model %1 loaded").arg(QString::fromStdString(m->summary.name)));
      if (!currentImage_.isEmpty()) rerun();
    }
  });
  connect(session_, &Session::onnxInspected, this, [this](const OnnxPtr& onnx) {
    hint_->hide();
    graph_->setOnnx(onnx);
    graph_->setMode(GraphPane::OnnxGraph);
    status_->setText(tr("ONNX graph of %1: %2 nodes, %3 unsupported")
                         .arg(QFileInfo(onnx->path).fileName())
                         .arg(onnx->info.nodes.size())
                         .arg(onnx->unsupported));
  });
  connect(session_, &Session::imageDecoded, this,
          [this](quint64, const QString& path, const QImage& img, const QSize& size) {
    // Another image decoded: the old one's predictions no longer apply. (A
    // file that fails to decode leaves the previous image and results.)
    if (path != currentImage_) image_->clearPredictions();
    if (hint_->isVisible())
      hint_->setText(tr("<p style='font-size:large'><b>Running the model on %1</b></p>"
                        "<p>Its op graph appears here when the run finishes.</p>").arg(device_.toHtmlEscaped()));
    placeHint();
    currentImage_ = path;
    updateRunActions();
    image_->setImage(path, img, size);
    image_->setError({});
    addRecent(path);
  });
  connect(session_, &Session::classified, this, &MainWindow::onClassified);
  connect(session_, &Session::compared, this, [this](const ComparePtr& r) {
    lastCompare_ = r;
    compare_->setResult(r);
    timeline_->setCompare(r);
    showCompare();
    status_->setText(tr("Compared %1 devices").arg(r->runs.size()));
  });
  connect(session_, &Session::cancelled, this, [this](quint64) {
    // The results shown stay those of the last finished run, which may be
    // another model's or device's: every pane names what it shows.
    updateRunActions();
    QString shown = lastRun_ ? lastRun_->device : QString();
    const QString model = modelShortName(loadedModel_.isEmpty() ? QString("efficientnet-lite0") : loadedModel_);
    devices_->setResultsDevice(shown);
    if (shown.isEmpty()) {
      status_->setText(tr("Cancelled the run of %1 on %2.").arg(model, device_));
      image_->setActivity(tr("Run of %1 on %2 cancelled.").arg(model, device_));
      return;
    }
    const QString shownModel = modelShortName(lastRun_->model);
    status_->setText(tr("Cancelled the run of %1 on %2; the results shown are from %3 (%4, %5).")
                         .arg(model, device_, shown, shownModel, QFileInfo(lastRun_->imagePath).fileName()));
    if (shown == device_ && shownModel == model)
      image_->setActivity(tr("Run on %1 cancelled; the results below are from its previous run.").arg(device_));
    else
      image_->setActivity(tr("Run of %1 on %2 cancelled; the results below are from %3 (%4).")
                              .arg(model, device_, shown, shownModel));
  });
  connect(session_, &Session::failed, this, [this](quint64, Session::FailureSource source, const QString& message) {
    using Source = Session::FailureSource;
    if (source == Source::Train) return;  // the training page shows its own errors
    if (source == Source::Model) pendingModel_.clear();
    // A failed load ends without an idle (it is not a run): the progress
    // bar and Cancel go, unless a run is still going.
    settleProgress();
    if (source == Source::Run || source == Source::Image) image_->setActivity({});
    showError(message);
  });

}

// A geometry saved on a larger screen (or the default size) must not put
// the status bar below the edge of this one.
void MainWindow::fitToScreen() {
  QScreen* screen = this->screen();
  if (!screen) return;
  const QRect available = screen->availableGeometry();
  // The window manager's frame is not known before the window is shown:
  // leave room for a title bar and borders.
  const QSize frame = isVisible() ? frameGeometry().size() - geometry().size() : QSize(8, 32);
  QSize size = this->size().boundedTo(available.size() - frame).expandedTo(minimumSizeHint());
  if (size != this->size()) resize(size);
  QRect g = geometry();
  int x = std::clamp(g.x(), available.left(), std::max(available.left(), available.right() - g.width() - frame.width()));
  int y = std::clamp(g.y(), available.top(), std::max(available.top(), available.bottom() - g.height() - frame.height()));
  if (x != g.x() || y != g.y()) move(x, y);
}

void MainWindow::buildDocks() {
  setCentralWidget(graph_);
  // Until the first run the op graph is empty: say how to fill it.
  hint_ = new QLabel(tr("<p style='font-size:large'><b>No model run yet</b></p>"
                        "<p>Open an image (File &gt; Open Image, or drop one on this window) to classify it; "
                        "its op graph appears here.<br>Or open a model file (File &gt; Open Model) to see its graph.</p>"),
                     graph_);
  hint_->setObjectName("graphHint");
  hint_->setAlignment(Qt::AlignCenter);
  hint_->setWordWrap(true);
  hint_->setStyleSheet("QLabel { color: #555; background: rgba(255,255,255,220); border: 1px solid #ccc; "
                       "border-radius: 6px; padding: 12px; }");
  graph_->installEventFilter(this);
  makeDock(this, tr("Image and predictions"), "imageDock", image_);
  makeDock(this, tr("Model"), "modelDock", model_);
  makeDock(this, tr("Devices"), "deviceDock", devices_);
  makeDock(this, tr("Kernels"), "kernelDock", kernels_);
  makeDock(this, tr("Kernel source"), "sourceDock", source_);
  makeDock(this, tr("Training"), "trainingDock", training_);
  makeDock(this, tr("Memory"), "memoryDock", memory_);
  makeDock(this, tr("Timeline"), "timelineDock", timeline_);
  makeDock(this, tr("Tuner"), "tunerDock", tuner_);
  // The image column runs the full height: on a 768-pixel screen the
  // bottom docks would otherwise leave the picture a strip.
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
  placeDocks();
  // The comparison has a dozen columns and a chart: a window of its own
  // (View > Compare Devices), not a quarter of the bottom dock.
  compare_->setParent(this, Qt::Window);
  compare_->setWindowTitle(tr("Compare devices - tinylens"));
  compare_->resize(1200, 760);
}

// The first start's layout, also what View > Reset Layout brings back
// (restoring a state saved before the window had its size gave other
// splits, and the Training dock's buttons fell below its edge).
void MainWindow::placeDocks() {
  auto dock = [this](const char* name) { return findChild<QDockWidget*>(name); };
  for (QDockWidget* d : findChildren<QDockWidget*>()) {
    d->setFloating(false);
    d->show();
  }
  addDockWidget(Qt::LeftDockWidgetArea, dock("imageDock"));
  addDockWidget(Qt::LeftDockWidgetArea, dock("modelDock"));
  tabifyDockWidget(dock("modelDock"), dock("deviceDock"));
  dock("modelDock")->raise();
  addDockWidget(Qt::BottomDockWidgetArea, dock("kernelDock"));
  tabifyDockWidget(dock("kernelDock"), dock("trainingDock"));
  tabifyDockWidget(dock("kernelDock"), dock("memoryDock"));
  tabifyDockWidget(dock("kernelDock"), dock("timelineDock"));
  tabifyDockWidget(dock("kernelDock"), dock("tunerDock"));
  dock("kernelDock")->raise();
  addDockWidget(Qt::BottomDockWidgetArea, dock("sourceDock"));
  sizeDocks();
}

// Shares of the window rather than pixels, so that a 1280x800 screen and a
// 1920x1200 one both get every pane usable.
void MainWindow::sizeDocks() {
  auto dock = [this](const char* name) { return findChild<QDockWidget*>(name); };
  const int w = std::max(width(), 800), h = std::max(height(), 600);
  const int left = std::clamp(w * 3 / 10, 300, 440);
  resizeDocks({dock("imageDock")}, {left}, Qt::Horizontal);
  resizeDocks({dock("imageDock"), dock("modelDock")}, {h * 56 / 100, h * 44 / 100}, Qt::Vertical);
  resizeDocks({dock("kernelDock")}, {h * 42 / 100}, Qt::Vertical);
  resizeDocks({dock("kernelDock"), dock("sourceDock")}, {(w - left) * 58 / 100, (w - left) * 42 / 100}, Qt::Horizontal);
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  // A first start (no saved layout) sizes its docks for the window it got.
  if (sizeDocksOnShow_) {
    sizeDocksOnShow_ = false;
    QTimer::singleShot(0, this, &MainWindow::sizeDocks);
  }
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &Image..."), QKeySequence::Open, this, [this] {
    QString path = QFileDialog::getOpenFileName(this, tr("Open image"), {},
                                                tr("Images (*.jpg *.jpeg *.png *.bmp *.gif *.tga *.ppm *.pgm);;All files (*)"));
    if (!path.isEmpty()) openImage(path);
  });
  file->addAction(tr("Open &Model..."), QKeySequence(tr("Ctrl+M")), this, [this] {
    QString path = QFileDialog::getOpenFileName(this, tr("Open model"), {},
                                                tr("Models (*.pth *.pt *.safetensors *.onnx);;All files (*)"));
    if (!path.isEmpty()) openModel(path);
  });
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  file->addSeparator();
  file->addAction(tr("&Close Image"), QKeySequence::Close, this, &MainWindow::closeImage);
  file->addAction(tr("Close Mo&del"), this, &MainWindow::closeModel);
  file->addSeparator();
  file->addAction(tr("Export Op Graph as &SVG..."), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Export graph"), "graph.svg", tr("SVG (*.svg)"));
    QString error;
    if (!path.isEmpty() && !exportGraph(path, &error)) showError(error);
  });
  file->addAction(tr("Export Op Graph as &PNG..."), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Export graph"), "graph.png", tr("PNG (*.png)"));
    QString error;
    if (!path.isEmpty() && !exportGraph(path, &error)) showError(error);
  });
  file->addAction(tr("Export &Kernel Table as CSV..."), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Export kernels"), "kernels.csv", tr("CSV (*.csv)"));
    QString error;
    if (!path.isEmpty() && !exportKernelsCsv(path, &error)) showError(error);
  });
  file->addAction(tr("Export &Trace..."), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), "trace.json", tr("Trace JSON (*.json)"));
    QString error;
    if (!path.isEmpty() && !exportTrace(path, &error)) showError(error);
  });
  file->addAction(tr("Export &Report..."), this, [this] {
    QString path = QFileDialog::getSaveFileName(this, tr("Export report"), "report.html", tr("HTML (*.html)"));
    QString error;
    if (!path.isEmpty() && !exportReport(path, &error)) showError(error);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (auto* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
  view->addSeparator();
  view->addAction(tr("&Op Graph"), this, [this] { graph_->setMode(GraphPane::OpGraph); });
  view->addAction(tr("&Kernel Graph"), this, [this] { graph_->setMode(GraphPane::KernelGraph); });
  view->addAction(tr("O&NNX Graph"), this, [this] { graph_->setMode(GraphPane::OnnxGraph); });
  view->addAction(tr("&Fit Graph"), QKeySequence(tr("Ctrl+0")), graph_, &GraphPane::fit);
  QAction* zoomIn = view->addAction(tr("Zoom &In"), graph_, &GraphPane::zoomIn);
  zoomIn->setShortcuts({QKeySequence(tr("Ctrl+=")), QKeySequence::ZoomIn});
  view->addAction(tr("Zoom O&ut"), QKeySequence(tr("Ctrl+-")), graph_, &GraphPane::zoomOut);
  view->addAction(tr("Fin&d Node..."), QKeySequence::Find, graph_, &GraphPane::focusSearch);
  view->addAction(tr("&Compare Devices..."), QKeySequence(tr("Ctrl+Shift+D")), this, &MainWindow::showCompare);
  view->addSeparator();
  view->addAction(tr("&Reset Layout"), this, &MainWindow::placeDocks);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  rerunAction_ = run->addAction(tr("&Re-run"), QKeySequence::Refresh, this, &MainWindow::rerun);
  cancelAction_ = run->addAction(tr("&Cancel"), QKeySequence(Qt::Key_Escape), session_, &Session::cancel);
  updateRunActions();
  run->addAction(tr("Com&pare Checked Devices"), this, [this] { compareDevices(compare_->checkedDevices()); });

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("Build a Kernel with a Known &Warning"), this, &MainWindow::buildWarningKernel);
  help->addSeparator();
  help->addAction(tr("&About tinylens"), this, [this] {
    QStringList devices = devices_->model()->availableNames();
    QMessageBox::about(
        this, tr("About tinylens"),
        tr("<h3>tinylens %1</h3>"
           "<p>A model explorer on a tiny lazy tensor core. It classifies an image with a model "
           "(EfficientNet-Lite0 built in; .pth, .safetensors and .onnx files) and shows what ran: "
           "the op graph, the fused kernels, their generated sources with compiler logs, and their "
           "timings on every device.</p>"
           "<p><b>How to start</b>: drop an image on the window. Pick a device in the Devices dock "
           "and press <i>Use this device</i>; a first run on a device compiles its kernels (cached on "
           "disk afterwards).</p>"
           "<p><b>Devices here</b>: %2<br><b>Qt</b>: %3<br><b>Command line</b>: <tt>tinylens --help</tt></p>")
            .arg(QApplication::applicationVersion(), devices.isEmpty() ? tr("(not enumerated yet)") : devices.join(", "),
                 QString::fromLatin1(qVersion())));
  });
}

void MainWindow::openFile(const QString& path) {
  if (isModelFile(path)) openModel(path);
  else openImage(path);
}

void MainWindow::openImage(const QString& path) {
  status_->setText(tr("Classifying %1 on %2...").arg(QFileInfo(path).fileName(), device_));
  image_->setActivity(tr("Classifying on %1...").arg(device_));
  session_->classify(path, device_);
  updateRunActions();
}

void MainWindow::openModel(const QString& nameOrPath) {
  pendingModel_ = nameOrPath;
  session_->loadModel(nameOrPath);
}

void MainWindow::closeImage() {
  session_->closeImage();
  currentImage_.clear();
  lastRun_.reset();
  image_->clearImage();
  kernels_->setRecords({}, 0, false, {});
  graph_->setRun(nullptr);
  source_->setKernel({}, {}, {}, {});
  updateRunActions();
  settleProgress();
  status_->setText(tr("Image closed."));
}

void MainWindow::closeModel() {
  closeImage();
  session_->closeModel();
  pendingModel_.clear();
  loadedModel_.clear();
  model_->setModel(nullptr);
  graph_->setOnnx(nullptr);
  status_->setText(tr("Model closed: the next image runs on the built-in model."));
}

void MainWindow::setDevice(const QString& name) {
  if (name.isEmpty()) return;
  device_ = name;
  devices_->setCurrent(name);
  training_->setDevice(name);  // used from the next Reset
  QSettings().setValue("device", name);
  if (!currentImage_.isEmpty()) rerun();
}

void MainWindow::rerun() {
  if (currentImage_.isEmpty()) {
    status_->setText(tr("Open an image first."));
    return;
  }
  openImage(currentImage_);
}

void MainWindow::showCompare() {
  // On the window's screen, whole: at 1280x800 its 1200x760 went past the
  // bottom edge with the title bar.
  if (!compare_->isVisible()) {
    if (QScreen* screen = this->screen()) {
      const QRect available = screen->availableGeometry();
      const QSize frame(16, 48);  // borders and a title bar, before the window manager says
      const QSize size = QSize(1200, 760).boundedTo(available.size() - frame);
      compare_->resize(size);
      QRect placed(QPoint(0, 0), size + frame);
      placed.moveCenter(frameGeometry().center());
      placed.moveLeft(std::clamp(placed.left(), available.left(), available.right() + 1 - placed.width()));
      placed.moveTop(std::clamp(placed.top(), available.top(), available.bottom() + 1 - placed.height()));
      compare_->move(placed.topLeft());
    }
  }
  compare_->show();
  compare_->raise();
  compare_->activateWindow();
}

void MainWindow::compareDevices(const QStringList& devices) {
  if (currentImage_.isEmpty()) {
    showError(tr("Open an image first: the comparison runs the current image on each device."));
    return;
  }
  if (devices.isEmpty()) {
    showError(tr("Check at least one device to compare."));
    return;
  }
  compare_->setBusy(true);
  session_->compare(currentImage_, devices);
  updateRunActions();
}

// Kernels that share a source share one compiled program, so a run can
// launch more kernels than it compiled (Lite0 on PoCL: 75 launches of 50
// kernels), and the compile progress counts the 50: say both.
QString MainWindow::kernelCountText(const RunData& run) {
  std::set<std::string> sources;
  for (const auto& r : run.records) sources.insert(r.kernel->source);
  if (sources.size() == run.records.size()) return tr("%1 kernels").arg(run.records.size());
  return tr("%1 kernel launches of %2 kernels").arg(run.records.size()).arg(sources.size());
}

void MainWindow::onClassified(const RunPtr& run) {
  lastRun_ = run;
  hint_->hide();
  image_->setRun(*run);
  model_->setRunNote(run->model, placeholderNote(*run));
  image_->setActivity({});
  image_->setError({});
  devices_->setResultsDevice(run->device);
  kernels_->setRecords(run->records, run->warmSeconds, run->jitReplayed, runSubject(*run));
  memory_->setRun(run);
  timeline_->setRun(run);
  tuner_->setRun(run);
  graph_->setRun(run);
  if (!run->records.empty()) kernels_->selectRecord(0);
  status_->setText(tr("%1 on %2: %3 (%4 %), warm %5 ms (median run), %6")
                       .arg(QFileInfo(run->imagePath).fileName(), run->device,
                            run->top.empty() ? QString("-") : QString::fromStdString(run->top[0].label))
                       .arg(run->top.empty() ? 0.0 : run->top[0].probability * 100.0, 0, 'f', 1)
                       .arg(run->warmSeconds * 1e3, 0, 'f', 2)
                       .arg(kernelCountText(*run)));
  screenshotResult_ = true;
  // The ONNX graph does not relayout for a run, so no layoutReady will come.
  if (graph_->mode() == GraphPane::OnnxGraph && !graph_->layoutPending()) maybeScreenshot();
  emit runFinished(run);
}

// The graph, kernel and source docks then inspect the training step: the
// same RunData shape as a classification, so clicking through works alike.
void MainWindow::showTrainingGraph(const RunPtr& run) {
  lastRun_ = run;
  hint_->hide();
  kernels_->setRecords(run->records, 0, false, run->model);
  memory_->setRun(run);
  graph_->setRun(run);
  if (!run->records.empty()) kernels_->selectRecord(0);
  status_->setText(tr("Op graph of %1: %2 nodes, %3 kernels").arg(run->model).arg(run->graph.size()).arg(run->records.size()));
}

void MainWindow::showKernel(int record) {
  if (!lastRun_ || record < 0 || size_t(record) >= lastRun_->records.size()) return;
  const auto& k = *lastRun_->records[size_t(record)].kernel;
  memory_->selectLaunch(record);
  source_->setKernel(QString("#%1 %2 (%3)").arg(record).arg(QString::fromStdString(k.name), QString::fromStdString(k.device)),
                     QString::fromStdString(k.source), QString::fromStdString(k.build_log),
                     sourceExtension(QString::fromStdString(k.device)));
}

void MainWindow::buildWarningKernel() {
  status_->setText(tr("Building a kernel with a known warning on %1...").arg(device_));
  session_->buildWarningKernel(device_);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  if (watched == graph_ && event->type() == QEvent::Resize) placeHint();
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::placeHint() {
  if (!hint_) return;
  hint_->setFixedWidth(std::max(std::min(graph_->width() - 40, 520), 120));
  hint_->adjustSize();
  hint_->move((graph_->width() - hint_->width()) / 2, (graph_->height() - hint_->height()) / 2);
}

void MainWindow::showError(const QString& message) {
  image_->setError(message);
  status_->setText(message.section('\n', 0, 0));
  statusBar()->setToolTip(message);
  emit runFailed(message);
}

QString MainWindow::statusText() const { return status_->text(); }

void MainWindow::settleProgress() {
  updateRunActions();
  if (session_->busy()) return;
  progress_->hide();
  cancel_->hide();
}

// Re-run needs an image; Cancel, a run or comparison going on.
void MainWindow::updateRunActions() {
  if (rerunAction_) rerunAction_->setEnabled(!currentImage_.isEmpty());
  if (cancelAction_) cancelAction_->setEnabled(session_->busy());
}

void MainWindow::addRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value("recentFiles").toStringList();
  QString absolute = QFileInfo(path).exists() ? QFileInfo(path).absoluteFilePath() : path;
  recent.removeAll(absolute);
  recent.prepend(absolute);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue("recentFiles", recent);
  rebuildRecentMenu();
}

QStringList MainWindow::recentFiles() const { return QSettings().value("recentFiles").toStringList(); }

void MainWindow::rebuildRecentMenu() {
  if (!recentMenu_) return;
  recentMenu_->clear();
  const QStringList recent = recentFiles();
  for (const QString& path : recent) {
    // A built-in model is a name, not a file: no folder to show.
    const QFileInfo info(path);
    QString text = info.isAbsolute() ? info.fileName() + "  —  " + info.path() : path;
    auto* action = recentMenu_->addAction(text.replace('&', "&&"), this, [this, path] { openFile(path); });
    action->setToolTip(path);
  }
  recentMenu_->setEnabled(!recent.isEmpty());
}

// Each export says where it wrote, in the status line.
bool MainWindow::exportGraph(const QString& path, QString* error) {
  const QString what = graph_->mode() == GraphPane::OnnxGraph ? tr("ONNX graph")
                       : graph_->mode() == GraphPane::KernelGraph ? tr("kernel graph")
                                                                   : tr("op graph");
  if (path.endsWith(".svg", Qt::CaseInsensitive)) {
    if (!graph_->exportSvg(path, error)) return false;
    status_->setText(tr("Exported the %1 to %2").arg(what, QFileInfo(path).absoluteFilePath()));
    return true;
  }
  QStringList files;
  if (!graph_->exportPng(path, error, &files)) return false;
  if (files.size() > 1)
    status_->setText(tr("Exported the %1 to %2: the graph is large, written as %3 tiles, %4 to %5")
                         .arg(what, QFileInfo(path).absolutePath())
                         .arg(files.size())
                         .arg(QFileInfo(files.first()).fileName(), QFileInfo(files.last()).fileName()));
  else
    status_->setText(tr("Exported the %1 to %2").arg(what, QFileInfo(path).absoluteFilePath()));
  return true;
}

bool MainWindow::exportKernelsCsv(const QString& path, QString* error) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
    if (error) *error = tr("Could not write %1: %2").arg(path, f.errorString());
    return false;
  }
  f.write(kernels_->model()->toCsv().toUtf8());
  status_->setText(tr("Exported %1 kernels to %2").arg(kernels_->model()->rowCount()).arg(QFileInfo(path).absoluteFilePath()));
  return true;
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const auto urls = event->mimeData()->urls();
  if (urls.isEmpty() || !urls[0].isLocalFile()) return;
  event->acceptProposedAction();
  openFile(urls[0].toLocalFile());
}

void MainWindow::saveSettings() {
  QSettings settings;
  settings.setValue("geometry", saveGeometry());
  settings.setValue("windowState", saveState());
  settings.setValue("device", device_);
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (screenshotPath_.isEmpty()) saveSettings();
  QMainWindow::closeEvent(event);
}

void MainWindow::setScreenshotPath(const QString& path, int lingerMs) {
  screenshotPath_ = path;
  screenshotLingerMs_ = std::max(lingerMs, 0);
  // A run that never finishes must not hang a script.
  QTimer::singleShot(600000, this, [] {
    qWarning("tinylens: no result within 10 minutes; no screenshot taken");
    QApplication::exit(4);
  });
  connect(this, &MainWindow::runFailed, this, [this](const QString& message) {
    if (screenshotPath_.isEmpty()) return;
    qWarning("tinylens: %s", qPrintable(message));
    QApplication::exit(5);
  });
}

void MainWindow::maybeScreenshot() {
  if (screenshotPath_.isEmpty() || !screenshotResult_) return;
  // The picture explains more with one block's details open.
  if (int node = graph_->slowestNode(); node >= 0) graph_->showDetails(node);
  // Let the layout pass and the chart's animation settle before grabbing.
  QTimer::singleShot(800, this, [this] {
    QPixmap shot = grab();
    bool ok = shot.save(screenshotPath_, "PNG");
    if (!ok) qWarning("tinylens: could not write %s", qPrintable(screenshotPath_));
    QTimer::singleShot(screenshotLingerMs_, qApp, [ok] { QApplication::exit(ok ? 0 : 6); });
  });
}

}  // namespace tlui
