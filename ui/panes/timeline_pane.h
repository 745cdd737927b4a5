// The trace drawn (core/trace.h): one row per host phase and one per
// device, time running right. The wheel zooms around the pointer, a drag
// pans, a double-click fits; a click on a kernel selects it everywhere.
// A comparison's runs are stacked, one block of rows per device's run.
#pragma once
#include <QWidget>
#include <vector>

#include "ui/run_data.h"

class QLabel;

namespace tlui {

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  struct Span {
    double start = 0, seconds = 0;  // from its run's origin
    QString name;
    int kernel = -1;  // index into the run's TraceDocument::kernels, or -1 for a host span
  };
  struct Row {
    QString label;
    int run = 0;  // which of the shown runs
    bool device = false;
    std::vector<Span> spans;
  };

  explicit TimelineView(QWidget* parent = nullptr);
  void setRuns(const std::vector<RunPtr>& runs);
  const std::vector<Row>& rows() const { return rows_; }
  const std::vector<RunPtr>& runs() const { return runs_; }
  // The visible time range, in seconds from the runs' origins.
  double viewStart() const { return t0_; }
  double viewEnd() const { return t1_; }
  void setView(double start, double end);
  void zoom(double factor, double around);  // factor > 1 zooms in
  void fit();
  // Where a span is drawn now (for tests and tooltips); empty when off view.
  QRectF spanRect(int row, int span) const;
  QSize sizeHint() const override { return {640, 200}; }
  QSize minimumSizeHint() const override { return {160, 80}; }

  static constexpr int kLabelWidth = 140, kRowHeight = 18, kTop = 18;

 signals:
  void kernelClicked(int run, int traceKernel);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  bool event(QEvent* event) override;

 private:
  double timeAt(double x) const;
  double xAt(double t) const;
  std::pair<int, int> spanAt(QPointF pos) const;  // (row, span) or (-1, -1)
  std::vector<RunPtr> runs_;
  std::vector<Row> rows_;
  double t0_ = 0, t1_ = 1, total_ = 1;
  bool dragging_ = false, dragged_ = false;
  double dragX_ = 0, dragT0_ = 0;
};

class TimelinePane : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePane(QWidget* parent = nullptr);
  void setRun(const RunPtr& run);                 // a classification's whole job
  void setCompare(const ComparePtr& compare);     // each device's run, stacked
  TimelineView* view() const { return view_; }
  QString infoText() const;

 signals:
  void kernelSelected(int record);  // a record of the run the window shows

 private:
  QLabel* info_;
  TimelineView* view_;
  RunPtr shown_;  // the run whose kernel table the window shows
};

}  // namespace tlui
