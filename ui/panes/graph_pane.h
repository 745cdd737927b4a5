// The op graph (collapsed by block), the kernel graph and an opened ONNX
// file's own graph, laid out by Graphviz on a pool thread and drawn in a
// QGraphicsView.
#pragma once
#include <QGraphicsView>
#include <QSet>
#include <QWidget>

#include "ui/graph_data.h"
#include "ui/run_data.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QMenu;
class QTextBrowser;

namespace tlui {

class GraphView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit GraphView(QWidget* parent = nullptr);
  void zoomBy(double factor);
  // Shows `rect` (scene units) whole if that keeps a scale of at least
  // `minScale`, else centred at `minScale`: what a search or an expanded
  // block shows, big enough to read.
  void showReadable(const QRectF& rect, double minScale = 1.0);
  // Scales the whole scene rect into the viewport, and keeps it fitted
  // through resizes until the user zooms.
  void fitWhole();
  bool fitted() const { return autoFit_; }

 signals:
  void nodeClicked(int node);
  void nodeDoubleClicked(int node);
  void nodeMenuRequested(int node, const QPoint& globalPos);  // a right click on a node

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;

 private:
  int nodeAt(const QPoint& pos) const;
  bool autoFit_ = false;
};

class GraphPane : public QWidget {
  Q_OBJECT
 public:
  enum Mode { OpGraph, KernelGraph, OnnxGraph };
  // What a box's colour says (the ONNX graph colours by op instead).
  enum Metric { ByTime, ByFlops, ByBytes, NoColour };
  explicit GraphPane(QWidget* parent = nullptr);

  void setRun(const RunPtr& run);
  // The graph of an opened .onnx file (null: none); shown in OnnxGraph mode.
  void setOnnx(const OnnxPtr& onnx);
  OnnxPtr onnx() const { return onnx_; }
  // Selects the box of ONNX node `index` and shows its details.
  void selectOnnxNode(int index);
  void setMode(Mode mode);
  Mode mode() const { return mode_; }
  void toggleGroup(const QString& key);
  void fit();
  void zoomIn();
  void zoomOut();
  void focusSearch();  // Ctrl+F
  void setMetric(Metric metric);
  Metric metric() const { return metric_; }
  QString legendText() const;
  // A box's value of the metric (ms, MFLOP or MB of its kernels); 0 without.
  double metricValue(int node) const;
  QLineEdit* searchEdit() const { return searchEdit_; }
  // Selects the next node whose label or scope contains the text, centres
  // it at a readable scale and says "match n of m"; false when none.
  bool search(const QString& text);
  void showDetails(int node);
  // A node's right-click menu: copy its details (shape, attributes, kernel)
  // or its label. The caller owns it.
  QMenu* makeNodeMenu(int node);
  int slowestNode() const;  // -1 when empty

  bool layoutPending() const { return pending_; }
  const DisplayGraph& displayGraph() const { return graph_; }
  QGraphicsScene* scene() const { return scene_; }
  GraphView* view() const { return view_; }
  QString detailsText() const;
  QString infoText() const;  // the bar's line: whose graph, how many nodes

  bool exportSvg(const QString& path, QString* error) const;
  // At least 1:1 (2:1 for small graphs), so the labels stay as legible as
  // on screen; a graph larger than kPngTile pixels is cut into tiles: `path`
  // holds the first, "<name>-2.png", "<name>-3.png"... the others, row by
  // row. `files` receives every file written.
  bool exportPng(const QString& path, QString* error, QStringList* files = nullptr) const;
  static constexpr int kPngTile = 6000;
  // A label's height on screen, in pixels, for a font of `fontPixels` at
  // view scale `scale`: never below kMinLabelPixels (a box then shows its
  // first line, cut to fit).
  static constexpr double kMinLabelPixels = 8.0;
  static double labelPixels(int fontPixels, double scale);
  QString modeText() const;  // the mode combo's current text

 signals:
  void layoutReady();
  void kernelSelected(int record);

 private:
  void relayout();
  void updateModeText();
  void draw(const DisplayGraph& graph, const GraphLayout& layout);
  QColor colourFor(double value, double max) const;
  void recolour();
  bool matches(int node, const QString& text) const;  // the boxes and the legend, after a new metric or graph
  void focusBlock();  // after a double-click expanded or collapsed focusKey_
  static QFont nodeFont(bool group);

  GraphView* view_;
  QGraphicsScene* scene_;
  QComboBox* modeBox_;
  QLineEdit* searchEdit_;
  QLabel* info_;
  QComboBox* metricBox_;
  QLabel* legend_;
  Metric metric_ = ByTime;
  QString focusKey_;  // the block a double-click toggled: shown once laid out
  QTextBrowser* details_;
  void showOnnxSummary();

  RunPtr run_;
  OnnxPtr onnx_;
  Mode mode_ = OpGraph;
  QSet<QString> expanded_;
  DisplayGraph graph_;
  std::map<uint64_t, const tl::GraphNode*> nodeById_;
  quint64 generation_ = 0;
  bool pending_ = false;
  int searchFrom_ = 0;
  QString lastSearch_;
  std::vector<QGraphicsItem*> nodeItems_;
};

}  // namespace tlui
