// Opening a model file the way the window does, without running it: the
// graph of an ONNX file (whether or not it can classify), and the classifier
// when there is one. The window's Session and `tinylens-cli inspect` both call
// inspect_model_file, so a hostile file can be tried without a display.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "core/io/onnx.h"
#include "core/models/classifier.h"

namespace tl {

struct ModelInspection {
  std::string path;    // as given: a file or the built-in name
  std::string format;  // "onnx", "pth", "safetensors", "builtin"
  // ONNX files: the graph as the window draws it, how many nodes tinylens
  // cannot run, and whether the shapes of the values were inferred.
  std::optional<OnnxGraphInfo> graph;
  int unsupported = 0;
  bool shapes_inferred = false;
  std::string shapes_error;  // why not, when the graph could not be built
  // The classifier, or why the (readable) file cannot classify images:
  // an unsupported node, a graph not shaped like a classifier.
  std::unique_ptr<ImageClassifier> classifier;
  // The ONNX model the classifier runs (null for other formats): the window
  // runs it once more to record the shape of every value (OnnxModel::run).
  std::shared_ptr<const OnnxModel> onnx;
  ModelSummary summary;  // of the classifier
  std::string classifier_error;
  // FLOPs per run of the ONNX graph (Conv, ConvTranspose, MatMul, Gemm) from
  // the inferred shapes; 0 when unknown.
  double onnx_flops = 0;
  // A run at the declared input shapes, estimated without running it: all its
  // FLOPs (every op, not only the layers) and the bytes of values held at once.
  OnnxRunCost run_cost;
};

// Throws IOError (or ShapeError) naming the problem when the file cannot be
// read as a model at all: missing, not a model, hostile sizes or external
// data; an ONNX graph that reads fine but cannot classify is not an error.
ModelInspection inspect_model_file(const std::string& name_or_path);

// "a run: 1.20 GFLOPs, at most 45.0 MB of values at once (estimated before
// running)": the window's model pane shows it before the first run.
std::string run_cost_text(const OnnxRunCost& c);

// The text `tinylens-cli inspect` prints: format, inputs and outputs with
// their shapes, op counts, parameters, FLOPs when known, unsupported nodes.
std::string format_inspection(const ModelInspection& m);

}  // namespace tl
