#include "ui/panes/graph_pane.h"

#include <QApplication>
#include <QClipboard>
#include <QContextMenuEvent>
#include <QMenu>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QGraphicsPathItem>
#include <QStyleOptionGraphicsItem>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <QtConcurrent/QtConcurrent>
#include <cmath>
#include <set>
#include <QSvgGenerator>

#include "core/dtype.h"
#include "ui/onnx_graph.h"

namespace tlui {

namespace {
constexpr int kNodeRole = 0;  // QGraphicsItem::data key holding the display node index

// A box that paints its own label: a QGraphicsTextItem per node builds a
// QTextDocument each, which for the ~1500 nodes of an ONNX file blocked the
// UI thread for a quarter of a second; this paints only what is visible.
class NodeBox : public QGraphicsPathItem {
 public:
  NodeBox(const QPainterPath& path, QString label, const QFont& font)
      : QGraphicsPathItem(path), label_(std::move(label)), font_(font) {}
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override {
    QGraphicsPathItem::paint(painter, option, widget);
    painter->setPen(Qt::black);
    const QRectF room = boundingRect().adjusted(2, 0, -2, 0);
    // Zoomed out below legibility (a whole graph fitted), the first line
    // alone (a block's name, an op) is drawn at a readable size, cut to
    // the box, rather than the whole label as specks.
    const double lod = QStyleOptionGraphicsItem::levelOfDetailFromTransform(painter->worldTransform());
    const double shown = GraphPane::labelPixels(QFontInfo(font_).pixelSize(), lod);
    if (lod <= 0 || shown <= QFontInfo(font_).pixelSize() * lod + 0.01) {
      painter->setFont(font_);
      painter->drawText(room, Qt::AlignCenter, label_);
      return;
    }
    QFont big = font_;
    big.setPixelSize(std::max(1, int(std::round(shown / lod))));
    painter->setFont(big);
    // Cut at the left: "...ks.12" keeps what tells blocks apart.
    const QString first = QFontMetricsF(big).elidedText(label_.section('\n', 0, 0), Qt::ElideLeft, room.width());
    painter->drawText(room, Qt::AlignCenter, first);
  }

 private:
  QString label_;
  QFont font_;
};
}  // namespace

GraphView::GraphView(QWidget* parent) : QGraphicsView(parent) {
  setDragMode(QGraphicsView::ScrollHandDrag);
  setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
  setOptimizationFlags(QGraphicsView::DontSavePainterState);
  setBackgroundBrush(QColor(250, 250, 250));
}

void GraphView::zoomBy(double factor) {
  autoFit_ = false;
  double current = transform().m11();
  // A huge graph fitted whole may start below the usual floor.
  double next = std::clamp(current * factor, std::min(0.02, current), 8.0);
  scale(next / current, next / current);
}

void GraphView::showReadable(const QRectF& rect, double minScale) {
  autoFit_ = false;
  resetTransform();
  const QRectF view = viewport()->rect();
  double factor = std::min(view.width() / std::max(rect.width(), 1.0), view.height() / std::max(rect.height(), 1.0));
  factor = std::clamp(factor, minScale, std::max(minScale, 1.5));
  scale(factor, factor);
  centerOn(rect.center());
}

void GraphView::fitWhole() {
  if (!scene() || sceneRect().isEmpty()) return;
  resetTransform();
  fitInView(sceneRect(), Qt::KeepAspectRatio);
  autoFit_ = true;
}

void GraphView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  // A graph laid out while the view was hidden or small is fitted again
  // once the view has its real size.
  if (autoFit_) fitWhole();
}

void GraphView::wheelEvent(QWheelEvent* event) {
  zoomBy(std::pow(1.0015, event->angleDelta().y()));
  event->accept();
}

int GraphView::nodeAt(const QPoint& pos) const {
  for (QGraphicsItem* item = itemAt(pos); item; item = item->parentItem()) {
    QVariant v = item->data(kNodeRole);
    if (v.isValid()) return v.toInt();
  }
  return -1;
}

void GraphView::mousePressEvent(QMouseEvent* event) {
  int node = nodeAt(event->pos());
  if (node >= 0 && event->button() == Qt::LeftButton) emit nodeClicked(node);
  QGraphicsView::mousePressEvent(event);
}

void GraphView::mouseDoubleClickEvent(QMouseEvent* event) {
  int node = nodeAt(event->pos());
  if (node >= 0) emit nodeDoubleClicked(node);
  QGraphicsView::mouseDoubleClickEvent(event);
}

void GraphView::contextMenuEvent(QContextMenuEvent* event) {
  const int node = nodeAt(event->pos());
  if (node < 0) return QGraphicsView::contextMenuEvent(event);
  emit nodeMenuRequested(node, event->globalPos());
  event->accept();
}

GraphPane::GraphPane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  auto* bar = new QHBoxLayout;
  modeBox_ = new QComboBox;
  modeBox_->addItems({tr("Op graph (blocks collapsed)"), tr("Kernel graph (after scheduling)"), tr("ONNX graph (file)")});
  auto* fitButton = new QPushButton(tr("Fit"));
  auto* collapseButton = new QPushButton(tr("Collapse all"));
  searchEdit_ = new QLineEdit;
  searchEdit_->setPlaceholderText(tr("Search nodes by name (Enter: next)"));
  searchEdit_->setClearButtonEnabled(true);
  info_ = new QLabel;
  bar->addWidget(modeBox_);
  bar->addWidget(fitButton);
  bar->addWidget(collapseButton);
  bar->addWidget(searchEdit_, 1);
  bar->addWidget(info_);
  layout->addLayout(bar);
  // What the colours mean, and what they measure.
  auto* legendRow = new QHBoxLayout;
  metricBox_ = new QComboBox;
  metricBox_->addItems({tr("Colour by kernel time"), tr("Colour by FLOPs"), tr("Colour by bytes moved"), tr("No colour")});
  metricBox_->setToolTip(tr("What a box's colour measures: its kernels' time, arithmetic or memory traffic"));
  legend_ = new QLabel;
  legend_->setTextFormat(Qt::RichText);
  legendRow->addWidget(metricBox_);
  legendRow->addWidget(legend_, 1);
  layout->addLayout(legendRow);

  auto* split = new QSplitter(Qt::Horizontal);
  scene_ = new QGraphicsScene(this);
  view_ = new GraphView;
  view_->setScene(scene_);
  details_ = new QTextBrowser;
  details_->setOpenLinks(false);
  details_->setPlaceholderText(tr("Click a node for its shapes, attributes and kernel; double-click a block to expand it."));
  split->addWidget(view_);
  split->addWidget(details_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 0);
  split->setSizes({900, 260});
  details_->setMinimumWidth(180);
  layout->addWidget(split, 1);

  connect(modeBox_, &QComboBox::currentIndexChanged, this, [this](int i) { setMode(Mode(i)); });
  connect(metricBox_, &QComboBox::currentIndexChanged, this, [this](int i) { setMetric(Metric(i)); });
  connect(fitButton, &QPushButton::clicked, this, &GraphPane::fit);
  connect(collapseButton, &QPushButton::clicked, this, [this] {
    expanded_.clear();
    relayout();
  });
  connect(searchEdit_, &QLineEdit::returnPressed, this, [this] { search(searchEdit_->text()); });
  connect(view_, &GraphView::nodeClicked, this, &GraphPane::showDetails);
  connect(view_, &GraphView::nodeMenuRequested, this, [this](int node, const QPoint& at) {
    QMenu* menu = makeNodeMenu(node);
    menu->exec(at);
    delete menu;
  });
  connect(view_, &GraphView::nodeDoubleClicked, this, [this](int node) {
    if (node < 0 || size_t(node) >= graph_.nodes.size()) return;
    const auto& d = graph_.nodes[size_t(node)];
    if (d.group || (!d.groupKey.isEmpty() && mode_ == OpGraph)) {
      focusKey_ = d.groupKey;  // shown, readable, once laid out again
      toggleGroup(d.groupKey);
    }
  });
  connect(details_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    if (url.scheme() == "kernel") emit kernelSelected(url.path().toInt());
    if (url.scheme() == "onnx-node") selectOnnxNode(url.path().toInt());
  });
}

void GraphPane::setRun(const RunPtr& run) {
  run_ = run;
  nodeById_.clear();
  if (run_)
    for (const auto& n : run_->graph) nodeById_[n.id] = &n;
  if (mode_ == OnnxGraph) {  // the file's graph stays, with this run's costs when it ran the file
    if (onnx_ && run_ && runIsOf(*run_, onnx_->path)) relayout();
    return;
  }
  details_->clear();
  relayout();
}

void GraphPane::setOnnx(const OnnxPtr& onnx) {
  onnx_ = onnx;
  if (mode_ == OnnxGraph) {
    details_->clear();
    relayout();
  }
}

void GraphPane::showOnnxSummary() {
  if (!onnx_) return;
  QString html = onnxSummaryHtml(onnx_->info, onnx_->path);
  if (onnx_->shapesInferred) html += tr("<p><i>Shapes of intermediate values were inferred with every dynamic dimension = 1.</i></p>");
  details_->setHtml(html);
}

void GraphPane::selectOnnxNode(int index) {
  if (mode_ != OnnxGraph) return;
  for (size_t i = 0; i < graph_.nodes.size(); ++i)
    if (graph_.nodes[i].onnxNode == index) {
      scene_->clearSelection();
      if (i < nodeItems_.size()) {
        nodeItems_[i]->setSelected(true);
        view_->centerOn(nodeItems_[i]);
      }
      showDetails(int(i));
      return;
    }
}

void GraphPane::setMode(Mode mode) {
  if (mode_ == mode) return;
  mode_ = mode;
  modeBox_->setCurrentIndex(int(mode));
  details_->clear();
  relayout();
}

void GraphPane::toggleGroup(const QString& key) {
  if (key.isEmpty()) return;
  if (expanded_.contains(key)) expanded_.remove(key);
  else expanded_.insert(key);
  relayout();
}

void GraphPane::relayout() {
  quint64 generation = ++generation_;
  updateModeText();
  if (mode_ == OnnxGraph ? !onnx_ : !run_) {
    scene_->clear();
    nodeItems_.clear();
    graph_ = {};
    pending_ = false;
    info_->setText(mode_ == OnnxGraph ? tr("open a .onnx model to see its graph") : tr("classify an image to see its graph"));
    return;
  }
  pending_ = true;
  info_->setText(tr("laying out..."));
  RunPtr run = run_;
  OnnxPtr onnx = onnx_;
  Mode mode = mode_;
  QSet<QString> expanded = expanded_;
  auto* watcher = new QFutureWatcher<std::pair<DisplayGraph, GraphLayout>>(this);
  connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
    watcher->deleteLater();
    if (generation != generation_) return;  // a newer layout was asked for
    auto result = watcher->result();
    pending_ = false;
    draw(result.first, result.second);
    if (mode_ == OnnxGraph && details_->toPlainText().isEmpty()) showOnnxSummary();
    emit layoutReady();
  });
  const QFont font = nodeFont(false), groupFont = nodeFont(true);
  watcher->setFuture(QtConcurrent::run([run, onnx, mode, expanded, font, groupFont] {
    DisplayGraph g = mode == OnnxGraph ? buildOnnxGraph(onnx->info, run && runIsOf(*run, onnx->path) ? run.get() : nullptr)
                     : mode == OpGraph ? buildOpGraph(run->graph, run->records, expanded)
                                       : buildKernelGraph(run->records, run->graph, run->kernelReads);
    const QFontMetricsF plain(font), bold(groupFont);
    for (auto& d : g.nodes) {
      QRectF r = (d.group ? bold : plain).boundingRect(QRectF(0, 0, 4000, 4000), Qt::AlignLeft | Qt::AlignTop, d.label);
      d.width = r.width() + (d.group ? 16 : 10);
      d.height = r.height() + (d.group ? 10 : 6);
    }
    GraphLayout l = layoutGraph(g);
    return std::make_pair(std::move(g), std::move(l));
  }));
}

double GraphPane::labelPixels(int fontPixels, double scale) {
  return std::max(double(fontPixels) * scale, kMinLabelPixels);
}

QFont GraphPane::nodeFont(bool group) {
  QFont font = QApplication::font();
  font.setPointSizeF(group ? 10.5 : 9);
  font.setBold(group);
  return font;
}

QColor GraphPane::colourFor(double value, double max) const {
  if (metric_ == NoColour || value <= 0 || max <= 0) return QColor(236, 240, 245);
  // Square root so the many small kernels are not all the same pale colour.
  double t = std::sqrt(std::clamp(value / max, 0.0, 1.0));
  return QColor::fromHsvF(0.08 - 0.08 * t, 0.15 + 0.75 * t, 1.0 - 0.1 * t);
}

double GraphPane::metricValue(int node) const {
  if (!run_ || node < 0 || size_t(node) >= graph_.nodes.size()) return 0;
  const DisplayNode& d = graph_.nodes[size_t(node)];
  if (mode_ == OnnxGraph)  // the node's share of its kernels (onnxRunCosts)
    return !d.costed ? 0 : metric_ == ByFlops ? d.flops * 1e-6 : metric_ == ByBytes ? d.bytes * 1e-6 : d.seconds * 1e3;
  std::set<int> kernels;
  if (d.kernel >= 0) kernels.insert(d.kernel);
  if (d.group) {
    const auto kernelOf = kernelOfNodes(run_->records);
    for (uint64_t id : d.members)
      if (auto k = kernelOf.find(id); k != kernelOf.end()) kernels.insert(k->second);
  }
  double sum = 0;
  for (int k : kernels) {
    if (size_t(k) >= run_->records.size()) continue;
    const auto& r = run_->records[size_t(k)];
    sum += metric_ == ByFlops ? r.kernel->flops * 1e-6 : metric_ == ByBytes ? r.kernel->bytes * 1e-6 : r.seconds * 1e3;
  }
  return sum;
}

void GraphPane::recolour() {
  // An ONNX file's boxes are coloured by op, or by the metric once a run of
  // the file has mapped its kernels back onto them.
  const bool onnx = mode_ == OnnxGraph;
  const bool costed = std::any_of(graph_.nodes.begin(), graph_.nodes.end(), [](const DisplayNode& d) { return d.costed; });
  metricBox_->setEnabled(!onnx || costed);
  if (onnx && !costed) {
    legend_->setText(tr("Boxes coloured by op kind; red border: unsupported. Classify an image with this model "
                        "for each node's time, FLOPs and bytes."));
    return;
  }
  std::vector<double> values(graph_.nodes.size());
  double max = 0;
  for (size_t i = 0; i < values.size(); ++i) max = std::max(max, values[i] = metricValue(int(i)));
  for (size_t i = 0; i < nodeItems_.size() && i < values.size(); ++i) {
    const DisplayNode& d = graph_.nodes[i];
    auto* box = dynamic_cast<QAbstractGraphicsShapeItem*>(nodeItems_[i]);
    if (!box || (onnx ? !d.costed : d.fill != 0)) continue;
    box->setBrush(onnx && metric_ == NoColour ? QColor(d.fill) : colourFor(values[i], max));
  }
  if (metric_ == NoColour || max <= 0) {
    legend_->setText(metric_ == NoColour ? (onnx ? tr("Boxes coloured by op kind") : tr("No colour"))
                                         : tr("Nothing to colour: no kernel times"));
    return;
  }
  const QString unit = metric_ == ByFlops ? tr("MFLOP") : metric_ == ByBytes ? tr("MB") : tr("ms");
  auto swatch = [&](double share) {
    return QString("<span style='background:%1'>&nbsp;&nbsp;&nbsp;&nbsp;</span>").arg(colourFor(share * max, max).name());
  };
  legend_->setText(tr("%1 0 %2 %3 %4 %5 %6 (the largest box)%7")
                       .arg(swatch(0.001), swatch(0.25))
                       .arg(0.25 * max, 0, 'g', 3)
                       .arg(swatch(1.0))
                       .arg(max, 0, 'g', 3)
                       .arg(unit)
                       .arg(onnx ? tr("; a kernel fused from several nodes is split by their FLOPs") : QString()));
}

void GraphPane::setMetric(Metric metric) {
  metric_ = metric;
  if (metricBox_->currentIndex() != int(metric)) metricBox_->setCurrentIndex(int(metric));
  recolour();
}

QString GraphPane::legendText() const { return legend_->text(); }

void GraphPane::zoomIn() { view_->zoomBy(1.25); }
void GraphPane::zoomOut() { view_->zoomBy(0.8); }

void GraphPane::focusSearch() {
  searchEdit_->setFocus(Qt::ShortcutFocusReason);
  searchEdit_->selectAll();
}

// After a double-click: the block's boxes (expanded) or its one box
// (collapsed) in view at a readable scale, and details that say what a
// double-click now does.
void GraphPane::focusBlock() {
  const QString key = focusKey_;
  focusKey_.clear();
  QRectF rect;
  int count = 0, box = -1;
  for (size_t i = 0; i < graph_.nodes.size() && i < nodeItems_.size(); ++i)
    if (graph_.nodes[i].groupKey == key) {
      rect = rect.united(nodeItems_[i]->sceneBoundingRect());
      ++count;
      if (box < 0 || graph_.nodes[i].group) box = int(i);
    }
  if (count == 0) return;
  view_->showReadable(rect.adjusted(-20, -20, 20, 20), 0.9);
  if (expanded_.contains(key))
    details_->setHtml(tr("<h3>Block %1, expanded</h3><p>%2 nodes. Click one for its details; double-click any of "
                         "them to collapse the block again.</p>")
                          .arg(key.toHtmlEscaped())
                          .arg(count));
  else
    showDetails(box);
}

void GraphPane::draw(const DisplayGraph& graph, const GraphLayout& layout) {
  graph_ = graph;
  scene_->clear();
  nodeItems_.clear();
  if (!layout.error.isEmpty()) {
    info_->setText(layout.error);
    return;
  }
  QPen edgePen(QColor(120, 120, 130), 1.0);
  for (size_t i = 0; i < layout.edges.size(); ++i) {
    const auto& pts = layout.edges[i].points;
    if (pts.empty()) continue;
    QPainterPath path(QPointF(pts[0].first, pts[0].second));
    for (size_t p = 1; p + 2 < pts.size(); p += 3)
      path.cubicTo(QPointF(pts[p].first, pts[p].second), QPointF(pts[p + 1].first, pts[p + 1].second),
                   QPointF(pts[p + 2].first, pts[p + 2].second));
    QPointF end = path.currentPosition();
    auto* item = scene_->addPath(path, edgePen);
    item->setZValue(0);
    if (layout.edges[i].hasTip) {
      QPointF tip(layout.edges[i].tip.first, layout.edges[i].tip.second);
      QLineF dir(end, tip);
      if (dir.length() > 0.1) {
        QLineF n = dir.normalVector();
        n.setLength(3.0);
        QPointF side(n.dx(), n.dy());
        QPolygonF head({tip, end + side, end - side});
        scene_->addPolygon(head, edgePen, QBrush(edgePen.color()))->setZValue(0);
      }
    }
  }
  const QFont font = nodeFont(false), groupFont = nodeFont(true);
  for (size_t i = 0; i < graph.nodes.size() && i < layout.nodes.size(); ++i) {
    const auto& d = graph.nodes[i];
    const auto& l = layout.nodes[i];
    QRectF rect(l.x - l.w / 2, l.y - l.h / 2, l.w, l.h);
    QPainterPath shape;
    shape.addRoundedRect(rect, d.group ? 6 : 3, d.group ? 6 : 3);
    QPen border(d.group ? QColor(60, 90, 140) : QColor(110, 110, 120), d.group ? 1.6 : 0.8);
    if (d.unsupported) border = QPen(QColor(200, 0, 0), 2.4);
    auto* box = new NodeBox(shape, d.label, d.group ? groupFont : font);
    box->setPen(border);
    box->setBrush(d.fill ? QColor(d.fill) : colourFor(0, 0));
    scene_->addItem(box);
    box->setData(kNodeRole, int(i));
    box->setZValue(1);
    box->setToolTip(d.label);
    box->setFlag(QGraphicsItem::ItemIsSelectable);
    nodeItems_.push_back(box);
  }
  scene_->setSceneRect(QRectF(-10, -10, layout.width + 20, layout.height + 20));
  // Says whose graph it is: after a cancelled run the other panes may show
  // another model's results than the file opened here.
  if (mode_ == OnnxGraph && onnx_) {
    info_->setText(tr("%1: %2 ONNX nodes, %3 unsupported")
                       .arg(modelShortName(onnx_->path)).arg(onnx_->info.nodes.size()).arg(onnx_->unsupported) +
                   (run_ && runIsOf(*run_, onnx_->path)
                        ? tr("; costs of its run on %1 (%2 kernels)").arg(run_->device).arg(run_->records.size())
                        : QString()));
    info_->setToolTip(tr("The graph stored in %1").arg(onnx_->path));
  } else if (run_) {
    info_->setText(tr("%1 on %2: %3 nodes, %4 edges")
                       .arg(modelShortName(run_->model), run_->device).arg(graph.nodes.size()).arg(graph.edges.size()));
    info_->setToolTip(tr("The graph of the run of %1").arg(runSubject(*run_)));
  }
  recolour();
  fit();
  if (!focusKey_.isEmpty()) focusBlock();
}

// The whole graph in view: an overview to zoom into (wheel, search, a click
// on a node); Ctrl+0 comes back to it.
void GraphPane::fit() {
  if (scene_->items().isEmpty()) return;
  view_->fitWhole();
}

void GraphPane::updateModeText() {
  const int n = int(expanded_.size());
  modeBox_->setItemText(OpGraph, n == 0   ? tr("Op graph (blocks collapsed)")
                                 : n == 1 ? tr("Op graph (1 block expanded)")
                                          : tr("Op graph (%1 blocks expanded)").arg(n));
}

QString GraphPane::modeText() const { return modeBox_->currentText(); }

bool GraphPane::search(const QString& text) {
  if (text.isEmpty() || graph_.nodes.empty()) return false;
  if (text != lastSearch_) searchFrom_ = 0;
  lastSearch_ = text;
  std::vector<int> hits;
  for (size_t i = 0; i < graph_.nodes.size(); ++i)
    if (matches(int(i), text)) hits.push_back(int(i));
  if (hits.empty()) {
    info_->setText(tr("no node matches \"%1\"").arg(text));
    return false;
  }
  // The first match at or after the last one's successor, wrapping around.
  auto next = std::lower_bound(hits.begin(), hits.end(), searchFrom_);
  if (next == hits.end()) next = hits.begin();
  const int i = *next;
  searchFrom_ = i + 1;
  scene_->clearSelection();
  if (size_t(i) < nodeItems_.size()) {
    nodeItems_[size_t(i)]->setSelected(true);
    view_->showReadable(nodeItems_[size_t(i)]->sceneBoundingRect(), 1.0);
  }
  showDetails(i);
  info_->setText(tr("match %1 of %2").arg(int(next - hits.begin()) + 1).arg(hits.size()));
  return true;
}

bool GraphPane::matches(int index, const QString& text) const {
  const auto& d = graph_.nodes[size_t(index)];
  if (d.label.contains(text, Qt::CaseInsensitive) || d.groupKey.contains(text, Qt::CaseInsensitive)) return true;
  if (mode_ != OnnxGraph && d.members.size() == 1)
    if (auto it = nodeById_.find(d.members[0]); it != nodeById_.end())
      if (QString::fromStdString(it->second->scope).contains(text, Qt::CaseInsensitive)) return true;
  if (mode_ == OnnxGraph && onnx_ && d.onnxNode >= 0)
    return QString::fromStdString(onnx_->info.nodes[size_t(d.onnxNode)].name).contains(text, Qt::CaseInsensitive);
  if (mode_ != OnnxGraph && d.kernel >= 0 && run_ && size_t(d.kernel) < run_->records.size())
    return QString::fromStdString(run_->records[size_t(d.kernel)].kernel->name).contains(text, Qt::CaseInsensitive);
  return false;
}

int GraphPane::slowestNode() const {
  int best = -1;
  for (size_t i = 0; i < graph_.nodes.size(); ++i)
    if (best < 0 || graph_.nodes[i].seconds > graph_.nodes[size_t(best)].seconds) best = int(i);
  return best;
}

QMenu* GraphPane::makeNodeMenu(int node) {
  auto* menu = new QMenu(this);
  if (node < 0 || size_t(node) >= graph_.nodes.size()) return menu;
  showDetails(node);  // the details pane then shows what is copied
  const QString details = details_->toPlainText(), label = graph_.nodes[size_t(node)].label;
  menu->addAction(tr("Copy Details (shape, attributes, kernel)"), this,
                  [details] { QApplication::clipboard()->setText(details); })->setEnabled(!details.isEmpty());
  menu->addAction(tr("Copy Label"), this, [label] { QApplication::clipboard()->setText(label); });
  return menu;
}

QString GraphPane::detailsText() const { return details_->toPlainText(); }
QString GraphPane::infoText() const { return info_->text(); }

void GraphPane::showDetails(int node) {
  if (mode_ == OnnxGraph) {
    if (!onnx_ || node < 0 || size_t(node) >= graph_.nodes.size()) return;
    int index = graph_.nodes[size_t(node)].onnxNode;
    if (index >= 0)
      details_->setHtml(onnxNodeHtml(onnx_->info, index) +
                        (run_ && runIsOf(*run_, onnx_->path) ? onnxNodeRunHtml(onnx_->info, index, *run_) : QString()));
    else showOnnxSummary();  // a graph input or output box
    return;
  }
  if (!run_ || node < 0 || size_t(node) >= graph_.nodes.size()) return;
  const auto& d = graph_.nodes[size_t(node)];
  QString html;
  auto kernelLine = [&](int k) {
    if (k < 0 || size_t(k) >= run_->records.size()) return QString("<i>no kernel (realized buffer)</i>");
    const auto& r = run_->records[size_t(k)];
    return QString("<a href='kernel:%1'>%2</a> on %3, %4 ms")
        .arg(k)
        .arg(QString::fromStdString(r.kernel->name).toHtmlEscaped(), QString::fromStdString(r.kernel->device))
        .arg(r.seconds * 1e3, 0, 'f', 3);
  };
  if (mode_ == KernelGraph && d.kernel >= 0) {
    const auto& k = *run_->records[size_t(d.kernel)].kernel;
    QStringList ops;
    for (auto& o : k.ops) ops << QString::fromStdString(o);
    html = QString("<h3>Kernel %1</h3><p>%2</p><p>Output shape %3<br>Fused ops: %4<br>%5 graph nodes</p>")
               .arg(QString::fromStdString(k.name).toHtmlEscaped(), kernelLine(d.kernel),
                    QString::fromStdString(k.output_shape), ops.join(", "))
               .arg(k.node_ids.size());
  } else if (d.group) {
    std::map<std::string, int> ops;
    std::set<int> kernels;
    auto kernelOf = kernelOfNodes(run_->records);
    for (uint64_t id : d.members) {
      auto it = nodeById_.find(id);
      if (it != nodeById_.end()) ops[it->second->op]++;
      auto k = kernelOf.find(id);
      if (k != kernelOf.end()) kernels.insert(k->second);
    }
    QStringList opList;
    for (auto& [op, count] : ops) opList << QString("%1 &times;%2").arg(QString::fromStdString(op)).arg(count);
    QStringList kernelList;
    for (int k : kernels) kernelList << kernelLine(k);
    html = QString("<h3>Block %1</h3><p>%2 primitive nodes, %3 kernels, %4 ms</p><p>%5</p><p>Kernels:<br>%6</p>"
                   "<p><i>Double-click the block to expand it into its nodes.</i></p>")
               .arg(d.groupKey.toHtmlEscaped())
               .arg(d.members.size())
               .arg(kernels.size())
               .arg(d.seconds * 1e3, 0, 'f', 3)
               .arg(opList.join(", "), kernelList.join("<br>"));
  } else if (!d.members.empty()) {
    auto it = nodeById_.find(d.members[0]);
    if (it == nodeById_.end()) return;
    const tl::GraphNode& n = *it->second;
    QStringList inputs;
    for (uint64_t in : n.inputs) {
      auto src = nodeById_.find(in);
      if (src != nodeById_.end())
        inputs << QString("#%1 %2 %3").arg(in).arg(QString::fromStdString(src->second->op),
                                                   QString::fromStdString(tl::shape_str(src->second->shape)));
    }
    html = QString("<h3>%1 <small>#%2</small></h3><p>Scope: %3<br>Shape: %4 %5<br>Attributes: %6<br>%7</p>"
                   "<p>Inputs:<br>%8</p><p>Kernel: %9</p>")
               .arg(QString::fromStdString(n.op))
               .arg(n.id)
               .arg(QString::fromStdString(n.scope.empty() ? "(top level)" : n.scope).toHtmlEscaped(),
                    QString::fromStdString(tl::shape_str(n.shape)), QString::fromStdString(tl::dtype_name(n.dtype)),
                    QString::fromStdString(n.detail.empty() ? "none" : n.detail).toHtmlEscaped(),
                    n.realized ? tr("realized buffer") : QString(), inputs.join("<br>"), kernelLine(d.kernel));
    if (!d.groupKey.isEmpty() && mode_ == OpGraph)
      html += tr("<p><i>In block %1: double-click to collapse it.</i></p>").arg(d.groupKey.toHtmlEscaped());
  }
  details_->setHtml(html);
}

bool GraphPane::exportPng(const QString& path, QString* error, QStringList* files) const {
  QRectF rect = scene_->sceneRect();
  if (rect.isEmpty() || scene_->items().isEmpty()) {
    if (error) *error = tr("The graph is empty: run a model first.");
    return false;
  }
  const double scale = std::max(rect.width(), rect.height()) * 2 <= kPngTile ? 2.0 : 1.0;
  const int width = int(std::ceil(rect.width() * scale)), height = int(std::ceil(rect.height() * scale));
  const int cols = (width + kPngTile - 1) / kPngTile, rows = (height + kPngTile - 1) / kPngTile;
  const QFileInfo info(path);
  if (files) files->clear();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int index = r * cols + c;
      const QString file = index == 0 ? path
                                      : info.dir().filePath(QString("%1-%2.%3").arg(info.completeBaseName()).arg(index + 1)
                                                                .arg(info.suffix().isEmpty() ? "png" : info.suffix()));
      const int x0 = c * kPngTile, y0 = r * kPngTile;
      QImage image(QSize(std::min(kPngTile, width - x0), std::min(kPngTile, height - y0)), QImage::Format_RGB32);
      image.fill(Qt::white);
      QPainter painter(&image);
      painter.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
      const QRectF source(rect.left() + x0 / scale, rect.top() + y0 / scale, image.width() / scale,
                          image.height() / scale);
      scene_->render(&painter, QRectF(0, 0, image.width(), image.height()), source, Qt::IgnoreAspectRatio);
      painter.end();
      if (!image.save(file, "PNG")) {
        if (error) *error = tr("Could not write %1").arg(file);
        return false;
      }
      if (files) *files << file;
    }
  return true;
}

bool GraphPane::exportSvg(const QString& path, QString* error) const {
  QRectF rect = scene_->sceneRect();
  if (rect.isEmpty() || scene_->items().isEmpty()) {
    if (error) *error = tr("The graph is empty: run a model first.");
    return false;
  }
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(rect.size().toSize());
  svg.setViewBox(QRectF(QPointF(0, 0), rect.size()));
  svg.setTitle("tinylens op graph");
  QPainter painter;
  if (!painter.begin(&svg)) {
    if (error) *error = tr("Could not write %1").arg(path);
    return false;
  }
  scene_->render(&painter, QRectF(QPointF(0, 0), rect.size()), rect);
  painter.end();
  return true;
}

}  // namespace tlui
