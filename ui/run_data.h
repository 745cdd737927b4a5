// What the worker hands back to the window: plain copies of core results,
// shared read-only so queued signals do not copy thousands of graph nodes.
#pragma once
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/io/onnx.h"
#include "core/models/classifier.h"
#include "core/memory.h"
#include "core/profile.h"
#include "core/trace.h"
#include "core/runtime/device.h"

namespace tlui {

struct RunData {
  quint64 job = 0;
  QString device;
  QString imagePath;
  QString model;
  std::vector<tl::Prediction> top;
  std::vector<float> logits;
  // coldSeconds: wall time of the first run on the device, kernel compiles
  // included. warmSeconds: wall time of the median of `warmRuns` runs after it.
  double coldSeconds = 0, warmSeconds = 0;
  int warmRuns = 0;
  // Kernels new to this process in the cold run, each compiled or read from
  // the disk cache; 0 when every kernel was loaded already; -1 unknown.
  int coldNewKernels = -1;
  // Kernels of that same median warm run (its kernel times sum to
  // kernelSeconds, which is less than the wall time: launches, waits and
  // copies are not kernels); node_ids refer to `graph`, the graph of one
  // run that built it (the Jit's replays build none).
  double kernelSeconds = 0;
  std::vector<tl::ProfileRecord> records;
  // The warm runs were replayed by the classifier's Jit (core/jit.h): no
  // graph was built in them, as in the CLI's classify and bench model.
  bool jitReplayed = false;
  std::vector<tl::GraphNode> graph;
  // Which of `records` reads which one's output, (writer, reader), found by
  // buffer in the cold run's records (kernelReadsFrom in ui/graph_data.h):
  // the kernel graph's edges where neither the replayed records nor `graph`
  // say them (an ONNX model's Jit replays build no graph).
  std::vector<std::pair<int, int>> kernelReads;
  // A comparison's runs: each kernel's device time in every one of the
  // `warmRuns` timed runs ([kernel][run]); `records` then hold the medians
  // and warmSeconds the median wall time. Empty for a classification.
  std::vector<std::vector<double>> kernelSamples;
  // A changed copy of the image gave the same logits (to 1e-6 of the
  // largest): the outputs do not depend on the image, as with placeholder
  // weights. uniformLogits: every class got the same logit.
  bool outputIgnoresImage = false;
  bool uniformLogits = false;
  // Everything the job did on the worker, as File > Export Trace writes it
  // (core/trace.h): the cold run with its compiles, the run that built the
  // graph, the warm runs (the table's is one of them) and the input check.
  std::shared_ptr<const tl::TraceDocument> trace;
  // The memory of `records`' run (core/memory.h), for the Memory pane.
  std::shared_ptr<const tl::MemoryProfile> memory;
  // An ONNX model's run: the shape each value had in it (a dynamic batch
  // resolved), which the ONNX graph shows; empty for other models.
  std::map<std::string, tl::Shape> valueShapes;
};

// What a run whose output ignores the image says, or "" for a sound run.
inline QString placeholderNote(const RunData& run) {
  if (!run.outputIgnoresImage) return {};
  return QString("The outputs do not depend on the image: a changed copy of it gives the same logits%1. "
                 "The model's weights look like placeholders (constant), so these scores mean nothing.")
      .arg(run.uniformLogits ? QString(", and every class scores the same") : QString());
}
using RunPtr = std::shared_ptr<const RunData>;

struct CompareData {
  quint64 job = 0;
  std::vector<RunPtr> runs;   // one per device, in the order asked
  double maxLogitDiff = 0;    // largest |logit_a - logit_b| over all device pairs
  QString maxDiffPair;        // "cpu vs opencl:0:0"
};
using ComparePtr = std::shared_ptr<const CompareData>;

struct ModelData {
  quint64 job = 0;
  QString nameOrPath;
  tl::ModelSummary summary;
};
using ModelPtr = std::shared_ptr<const ModelData>;

// An opened .onnx file as a graph, whether or not it can classify.
struct OnnxData {
  quint64 job = 0;
  QString path;
  tl::OnnxGraphInfo info;
  int unsupported = 0;  // nodes tinylens cannot run
  bool shapesInferred = false;  // info.values completed by tl::infer_onnx_shapes
};
using OnnxPtr = std::shared_ptr<const OnnxData>;

using DeviceList = std::vector<tl::DeviceInfo>;

inline QString qs(const std::string& s) { return QString::fromStdString(s); }

// A model as the panes name it: the built-in model's name, a file's name
// ("resnet18/model.onnx" where the file name alone says nothing).
inline QString modelShortName(const QString& nameOrPath) {
  const QFileInfo info(nameOrPath);
  if (!info.isAbsolute() && !nameOrPath.contains('/')) return nameOrPath;
  if (info.completeBaseName() == "model") return info.dir().dirName() + "/" + info.fileName();
  return info.fileName();
}

// What a pane's results belong to: "tinyA.onnx on cpu, squirrel_cls.jpg".
inline QString runSubject(const RunData& run) {
  QString text = QString("%1 on %2").arg(modelShortName(run.model), run.device);
  if (!run.imagePath.isEmpty()) text += ", " + QFileInfo(run.imagePath).fileName();
  return text;
}

}  // namespace tlui

Q_DECLARE_METATYPE(tlui::RunPtr)
Q_DECLARE_METATYPE(tlui::ComparePtr)
Q_DECLARE_METATYPE(tlui::ModelPtr)
Q_DECLARE_METATYPE(tlui::OnnxPtr)
Q_DECLARE_METATYPE(tlui::DeviceList)
