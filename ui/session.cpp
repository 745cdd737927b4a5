#include "ui/session.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <QCoreApplication>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "core/io/onnx.h"
#include "core/io/onnx_flops.h"
#include "core/models/inspect.h"
#include "core/progress.h"
#include "core/realize.h"
#include "core/error.h"
#include "core/runtime/device.h"
#include "core/runtime/registry.h"
#include "core/settings.h"
#include "core/tensor.h"
#include "core/trace.h"
#include "core/tune.h"
#include "ui/graph_data.h"
#include "ui/train_worker.h"

namespace tlui {

struct Session::WorkerState {
  std::unique_ptr<tl::ImageClassifier> model;
  QString modelName;
  // The decoded image of imagePath, kept for re-runs only when small: an
  // 8000x8000 photo is 768 MB of floats, read again when a run needs it.
  std::shared_ptr<const tl::Image> image;
  QString imagePath;

  // The image at `path`: the kept one, or read (and kept when small).
  std::shared_ptr<const tl::Image> imageAt(const QString& path) {
    if (path == imagePath && image) return image;
    auto read = std::make_shared<const tl::Image>(tl::load_image(path.toStdString()));
    imagePath = path;
    image = read->rgb.size() <= kKeptImageValues ? read : nullptr;
    return read;
  }
  static constexpr size_t kKeptImageValues = size_t(2048) * 2048 * 3;
  // The newest first (not replayed) run's kernel records per model and
  // device: they name every buffer each kernel read, which a later cold run
  // that replays (a re-run) does not (kernelReadsFrom).
  std::map<std::pair<QString, QString>, std::vector<tl::ProfileRecord>> firstRuns;
  // The ONNX model the classifier runs (null for the others): a run records
  // the shape of every value with it (RunData::valueShapes).
  std::shared_ptr<const tl::OnnxModel> onnx;
  // Set by the first re-tune (session_tune.cpp): classifications then run
  // with TINYLENS_TUNE=1, reading the tuner's stored choices.
  bool tuned = false;
};

namespace {

// The median replayed run's kernel times on the kernels of the run that
// built the graph, which name the nodes the window draws: the Jit replays
// the same kernels in the same order. When the two lists differ (a replay
// that was not captured ran the function again), the built run's own
// records are shown, whose times are as real; `mapped` says which.
std::vector<tl::ProfileRecord> mapOntoGraph(const std::vector<tl::ProfileRecord>& timed,
                                            const std::vector<tl::ProfileRecord>& built, bool& mapped) {
  mapped = false;
  if (timed.size() != built.size()) return built;
  for (size_t i = 0; i < timed.size(); ++i)
    if (timed[i].kernel->name != built[i].kernel->name) return built;
  std::vector<tl::ProfileRecord> out = timed;
  for (size_t i = 0; i < out.size(); ++i) out[i].kernel = built[i].kernel;
  mapped = true;
  return out;
}

// The picture the window shows of `img`: each pixel the mean of a step x
// step block, the step the least that fits `maxSide` (the pane draws it
// smaller still; a full-size copy of a large photo was 192 MB kept).
QImage to_qimage(const tl::Image& img, int maxSide = 2048) {
  const int step = std::max(1, (std::max(img.width, img.height) + maxSide - 1) / maxSide);
  QImage out(img.width / step, img.height / step, QImage::Format_RGB888);
  const float scale = 255.0f / float(step * step);
  for (int y = 0; y < out.height(); ++y) {
    uchar* line = out.scanLine(y);
    for (int x = 0; x < out.width(); ++x)
      for (int c = 0; c < 3; ++c) {
        float sum = 0;
        for (int dy = 0; dy < step; ++dy)
          for (int dx = 0; dx < step; ++dx)
            sum += std::clamp(img.rgb[(size_t(y * step + dy) * size_t(img.width) + size_t(x * step + dx)) * 3 + size_t(c)],
                              0.0f, 1.0f);
        line[x * 3 + c] = uchar(sum * scale + 0.5f);
      }
  }
  return out;
}

// The cancel flag is per thread in the core; this keeps it set for exactly
// one job, whatever way the job leaves.
struct CancelScope {
  explicit CancelScope(const std::atomic<bool>* flag) { tl::set_cancel_flag(flag); }
  ~CancelScope() { tl::set_cancel_flag(nullptr); }
};

// `runs` warm runs of `model` on `input`, replayed by its Jit after one
// untimed run (which captures the Jit on this device): the median wall time,
// and the first run's kernels with each one's median device time over the
// runs whose kernels match it (the Jit replays the same kernels in the same
// order), with every sample kept.
struct TimedKernels {
  double medianSeconds = 0;
  std::vector<tl::ProfileRecord> records;
  std::vector<std::vector<double>> samples;
};
TimedKernels timeKernels(tl::ImageClassifier& model, const tl::Tensor& input, int runs) {
  tl::NoGrad noGrad;
  (void)model.infer(input).to_vector();
  std::vector<double> walls;
  std::vector<std::vector<tl::ProfileRecord>> all;
  for (int r = 0; r < runs; ++r) {
    tl::ProfileCapture capture;
    auto t0 = std::chrono::steady_clock::now();
    (void)model.infer(input).to_vector();
    walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    all.push_back(capture.records());
  }
  TimedKernels out;
  std::sort(walls.begin(), walls.end());
  out.medianSeconds = walls[walls.size() / 2];
  out.records = all[0];
  out.samples.resize(out.records.size());
  for (const auto& run : all) {
    bool same = run.size() == out.records.size();
    for (size_t i = 0; same && i < run.size(); ++i) same = run[i].kernel->name == out.records[i].kernel->name;
    if (!same) continue;
    for (size_t i = 0; i < run.size(); ++i) out.samples[i].push_back(run[i].seconds);
  }
  for (size_t i = 0; i < out.records.size(); ++i) {
    std::vector<double> sorted = out.samples[i];
    std::sort(sorted.begin(), sorted.end());
    out.records[i].seconds = sorted[sorted.size() / 2];
  }
  return out;
}

const char* kBuiltinModel = "efficientnet-lite0";
// Odd, so that the median is one run whose kernels the table can show.
constexpr int kWarmRuns = 3;
// A comparison's per-kernel speed-ups are ratios of medians over this many
// runs: one run's kernel times move by tens of percent on a shared machine.
constexpr int kCompareRuns = 7;

// What a classification and each device of a comparison report alike: the
// job, where it ran, on what, and the cold run's answer.
std::shared_ptr<RunData> newRun(quint64 job, const QString& device, const QString& imagePath, const QString& model,
                                const tl::ClassifyResult& result) {
  auto run = std::make_shared<RunData>();
  run->job = job;
  run->device = device;
  run->imagePath = imagePath;
  run->model = model;
  run->top = result.top;
  run->logits = result.logits;
  run->coldSeconds = result.cold_seconds;
  return run;
}

}  // namespace

Session::Session(QObject* parent)
    : QObject(parent), state_(std::make_unique<WorkerState>()), trainer_(std::make_unique<TrainWorker>()) {
  qRegisterMetaType<tlui::RunPtr>();
  qRegisterMetaType<tlui::TrainSetupPtr>();
  qRegisterMetaType<tlui::TrainStepPtr>();
  qRegisterMetaType<tlui::TrainEval>();
  qRegisterMetaType<tlui::HistogramsPtr>();
  qRegisterMetaType<tlui::ComparePtr>();
  qRegisterMetaType<tlui::ModelPtr>();
  qRegisterMetaType<tlui::OnnxPtr>();
  qRegisterMetaType<tlui::DeviceList>();
  workerContext_ = new QObject;
  workerContext_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, workerContext_, &QObject::deleteLater);
  thread_.setObjectName("tinylens-core");
  thread_.start();
  // Compiler processes and the core's thread pool inherit the nice value of
  // the thread that starts them: keeping the core below the UI thread is
  // what keeps the window fluid on a two-core machine during a cold run.
  post([] { setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 5); });
}

Session::~Session() {
  if (runFlag_) runFlag_->store(true);
  if (trainStop_) trainStop_->store(true);
  closing_.store(true);
  if (trainCancel_) trainCancel_->store(true);  // after closing_: the step then ends quietly
  thread_.quit();
  thread_.wait();
  // The worker state holds tensors; it goes after the thread that used it.
  state_.reset();
  trainer_.reset();
}

void Session::post(std::function<void()> work) {
  QMetaObject::invokeMethod(workerContext_, std::move(work), Qt::QueuedConnection);
}

// Called on the worker when a run ends, however it ends: the UI thread marks
// the session idle if no newer run took over meanwhile.
void Session::finishRun(quint64 job) {
  QMetaObject::invokeMethod(
      this,
      [this, job] {
        if (busyJob_ == job) {
          busyJob_ = 0;
          emit idle();
        }
      },
      Qt::QueuedConnection);
}

void Session::deliverRun(quint64 job, std::function<void()> emitter) {
  QMetaObject::invokeMethod(
      this,
      [this, job, emitter = std::move(emitter)] {
        if (job != runJob_) return;  // superseded while it ran
        emitter();
      },
      Qt::QueuedConnection);
}

Session::Flag Session::startRunJob(quint64 job) {
  if (runFlag_) runFlag_->store(true);  // the older run stops at its next kernel
  runFlag_ = std::make_shared<std::atomic<bool>>(false);
  runJob_ = job;
  busyJob_ = job;
  return runFlag_;
}

void Session::cancel() {
  if (runFlag_) runFlag_->store(true);
}

void Session::closeImage() {
  cancel();
  post([this] {
    state_->image.reset();
    state_->imagePath.clear();
    malloc_trim(0);  // the pages of a large photo go back to the system now
  });
}

void Session::closeModel() {
  cancel();
  post([this] {
    WorkerState& st = *state_;
    st.model.reset();
    st.modelName.clear();
    st.onnx.reset();
    st.firstRuns.clear();
    for (auto& d : tl::Registry::instance().devices()) d->release_pooled();
    malloc_trim(0);
  });
}

quint64 Session::enumerateDevices() {
  quint64 job = nextJob_++;
  post([this, job] {
    DeviceList list;
    try {
      for (auto& d : tl::Registry::instance().devices()) list.push_back(d->info());
    } catch (const std::exception& e) {
      QString msg = QString("Could not enumerate devices: %1").arg(e.what());
      QMetaObject::invokeMethod(this, [this, job, msg] { emit failed(job, FailureSource::Devices, msg); }, Qt::QueuedConnection);
      return;
    }
    QMetaObject::invokeMethod(this, [this, list] { emit devicesReady(list); }, Qt::QueuedConnection);
  });
  return job;
}

quint64 Session::loadModel(const QString& nameOrPath) {
  quint64 job = nextJob_++;
  modelJob_ = job;
  post([this, job, nameOrPath] {
    WorkerState& st = *state_;
    QMetaObject::invokeMethod(
        this, [this, job] { emit progress(job, tr("Loading model"), 0); }, Qt::QueuedConnection);
    // The same core call as `tinylens-cli inspect`: a hostile file fails here
    // with one message, exactly as it does on the command line.
    const bool isOnnx = nameOrPath.endsWith(".onnx", Qt::CaseInsensitive);
    tl::ModelInspection opened;
    try {
      opened = tl::inspect_model_file(nameOrPath.toStdString());
    } catch (const std::exception& e) {
      QString msg = QString(isOnnx ? "Could not open the ONNX file %1: %2" : "Could not load the model %1: %2")
                        .arg(nameOrPath, e.what());
      QMetaObject::invokeMethod(
          this, [this, job, msg] { if (job == modelJob_) emit failed(job, FailureSource::Model, msg); }, Qt::QueuedConnection);
      return;
    }
    std::optional<tl::OnnxCompute> onnxCompute;  // the file's own layers and FLOPs
    if (opened.graph) {
#ifdef TL_HAVE_ONNX
      onnxCompute = tl::onnx_compute(*opened.graph);
#endif
      auto graph = std::make_shared<OnnxData>();
      graph->job = job;
      graph->path = nameOrPath;
      graph->info = std::move(*opened.graph);
      graph->unsupported = opened.unsupported;
      graph->shapesInferred = opened.shapes_inferred;
      OnnxPtr out = graph;
      QMetaObject::invokeMethod(
          this, [this, job, out] { if (job == modelJob_) emit onnxInspected(out); }, Qt::QueuedConnection);
    }
    if (!opened.classifier) {
      // A graph that cannot classify still shows; the previous classifier stays.
      QString msg = QString("The graph of %1 is shown, but it cannot classify images: %2%3")
                        .arg(nameOrPath, QString::fromStdString(opened.classifier_error),
                             st.modelName.isEmpty() ? QString()
                                                    : QString("\nImages are still classified with %1.").arg(st.modelName));
      QMetaObject::invokeMethod(
          this, [this, job, msg] { if (job == modelJob_) emit failed(job, FailureSource::Model, msg); }, Qt::QueuedConnection);
      return;
    }
    auto data = std::make_shared<ModelData>();
    data->job = job;
    data->nameOrPath = nameOrPath;
    data->summary = opened.summary;
    if (opened.run_cost.flops > 0) data->summary.notes.push_back(tl::run_cost_text(opened.run_cost));
    if (onnxCompute) {
      data->summary.layers = onnxCompute->layers;
      data->summary.flops = onnxCompute->flops;
      if (onnxCompute->unknown_shapes > 0)
        data->summary.notes.push_back("FLOPs leave out " + std::to_string(onnxCompute->unknown_shapes) +
                                      " layers whose shapes are unknown");
    }
    st.model = std::move(opened.classifier);
    st.modelName = nameOrPath;
    st.onnx = opened.onnx;
    ModelPtr out = data;
    // Models load in request order, so the newest one ends up loaded; only
    // its announcement matters.
    QMetaObject::invokeMethod(
        this, [this, job, out] { if (job == modelJob_) emit modelLoaded(out); }, Qt::QueuedConnection);
  });
  return job;
}

quint64 Session::classify(const QString& imagePath, const QString& device) {
  quint64 job = nextJob_++;
  Flag flag = startRunJob(job);
  post([this, job, flag, imagePath, device] { classifyOnWorker(job, flag, imagePath, device); });
  return job;
}

quint64 Session::retune(const QString& imagePath, const QString& device, const QString& kernel,
                        const QString& outputShape) {
  quint64 job = nextJob_++;
  Flag flag = startRunJob(job);
  post([this, job, flag, imagePath, device, kernel, outputShape] {
    WorkerState& st = *state_;
    int searched = 0;
    try {
      CancelScope cancelScope(flag.get());
      if (flag->load()) throw tl::Cancelled();
      if (!st.model) throw std::runtime_error("no model is loaded: classify an image first");
      const std::shared_ptr<const tl::Image> image = st.imageAt(imagePath);
      const std::string dev = device.toStdString(), name = kernel.toStdString(), shape = outputShape.toStdString();
      tl::TuneSearch::Selector selects;  // none: every kernel
      if (!name.empty())
        selects = [name, shape](const std::string& k, const tl::Shape& s) {
          return k == name && (shape.empty() || tl::shape_str(s) == shape);
        };
      tl::TuneSearch search(selects, [this, job](size_t done, size_t total) {
        deliverRun(job, [this, job, done, total] { emit tuneProgress(job, int(done), int(total)); });
      });
      tl::CompileProgress watch([this, job, device](size_t ready, size_t total) {
        deliverRun(job, [this, job, device, ready, total] { emit compileProgress(job, device, int(ready), int(total)); });
      });
      // One run of the model: nothing replays inside the search, so each
      // of its kernels is planned and passes through the tuner.
      tl::NoGrad noGrad;
      tl::Tensor input = st.model->preprocess(*image, dev);
      input.realize();
      (void)st.model->infer(input).to_vector();
      searched = int(search.searched());
      search.commit();
      st.tuned = true;
    } catch (const tl::Cancelled&) {
      deliverRun(job, [this, job] { emit cancelled(job); });
      finishRun(job);
      return;
    } catch (const std::exception& e) {
      QString msg = QString("Re-tuning on %1 failed: %2").arg(device, e.what());
      deliverRun(job, [this, job, msg] { emit failed(job, FailureSource::Run, msg); });
      finishRun(job);
      return;
    }
    deliverRun(job, [this, job, searched] { emit retuned(job, searched); });
    classifyOnWorker(job, flag, imagePath, device);  // the results with the new choices
  });
  return job;
}

// A classification on the worker: read the image, the cold run, the warm runs.
void Session::classifyOnWorker(quint64 job, const Flag& flag, const QString& imagePath, const QString& device) {
  WorkerState& st = *state_;
  auto report = [this, job](const QString& stage, int pct) {
    deliverRun(job, [this, job, stage, pct] { emit progress(job, stage, pct); });
  };
  auto finish = [this, job] { finishRun(job); };
  if (flag->load()) {  // cancelled, or superseded, before it started
    deliverRun(job, [this, job] { emit cancelled(job); });
    finish();
    return;
  }
  CancelScope cancelScope(flag.get());
  // Once tuned from the window, runs read the tuner's choices (core/tune.h).
  std::optional<tl::SettingOverride> tuned;
  if (st.tuned && !tl::tune_enabled()) tuned.emplace(tl::SettingName("TINYLENS_TUNE"), "1");
  const std::string dev = device.toStdString();
  tl::TraceCapture trace;  // File > Export Trace: this whole job
  try {
    report(tr("Reading %1").arg(imagePath), 2);
    std::shared_ptr<const tl::Image> read;
    try {
      read = st.imageAt(imagePath);
    } catch (const std::exception& e) {
      QString msg = QString::fromUtf8(e.what());
      deliverRun(job, [this, job, msg] { emit failed(job, FailureSource::Image, msg); });
      finish();
      return;
    }
    const tl::Image& image = *read;
    QImage shown = to_qimage(image);
    const QSize size(image.width, image.height);
    deliverRun(job, [this, job, imagePath, shown, size] { emit imageDecoded(job, imagePath, shown, size); });

    if (!st.model) {
      report(tr("Loading the built-in model"), 5);
      st.model = tl::load_classifier(kBuiltinModel);
      st.modelName = kBuiltinModel;
      st.onnx.reset();
      auto data = std::make_shared<ModelData>();
      data->nameOrPath = kBuiltinModel;
      data->summary = st.model->summary();
      ModelPtr out = data;
      QMetaObject::invokeMethod(this, [this, out] { emit modelLoaded(out); }, Qt::QueuedConnection);
    }
    report(tr("Cold run on %1: compiling its kernels").arg(device), 10);
    tl::ClassifyResult result;
    int newKernels = 0;  // kernels the cold run had to compile or read from the disk cache
    {
      // Told on this thread after each kernel; the UI hears it queued.
      // The counts run over the whole cold run (every realize of it), and
      // a kernel is counted when it can run, which on PoCL is after its
      // first launch (core/realize.h).
      tl::CompileProgress watch([this, job, device, &newKernels](size_t ready, size_t total) {
        newKernels = int(total);
        deliverRun(job, [this, job, device, ready, total] {
          emit compileProgress(job, device, int(ready), int(total));
        });
      });
      // The cold run only: the warm runs below are timed here, so that the
      // latency shown and the kernel table come from one and the same run.
      result = tl::classify(*st.model, image, dev, 5, 0);
    }

    auto data = newRun(job, device, imagePath, st.modelName, result);
    data->coldNewKernels = newKernels;
    timeWarmRuns(job, image, *data);
    data->trace = std::make_shared<const tl::TraceDocument>(tl::trace_document(trace));
    data->memory = std::make_shared<const tl::MemoryProfile>(tl::memory_profile(data->records));
    // result.records are the cold run's (warm_runs = 0).
    auto& first = st.firstRuns[{st.modelName, device}];
    if (std::any_of(result.records.begin(), result.records.end(), [](auto& r) { return !r.replayed; }))
      first = result.records;
    data->kernelReads = kernelReadsFrom(data->records, first);
    RunPtr out = data;
    deliverRun(job, [this, out] { emit classified(out); });
  } catch (const tl::Cancelled&) {
    // deliverRun drops it when a newer job superseded this one: only an
    // explicit cancel is announced.
    deliverRun(job, [this, job] { emit cancelled(job); });
  } catch (const std::exception& e) {
    QString msg = QString("Classification on %1 failed: %2").arg(device, e.what());
    deliverRun(job, [this, job, msg] { emit failed(job, FailureSource::Run, msg); });
  }
  finish();
}

// The run's graph, then kWarmRuns timed warm runs on the worker: the median
// one's wall time and kernels go into `data`.
void Session::timeWarmRuns(quint64 job, const tl::Image& image, RunData& data) {
  WorkerState& st = *state_;
  const QString device = data.device;
  const std::string dev = device.toStdString();
  tl::NoGrad noGrad;
  tl::Tensor input = st.model->preprocess(image, dev);
  input.realize();
  // One run that builds the graph, untimed: its snapshot is the graph
  // the window draws, and its kernels' node_ids point into it.
  // Captured from before forward(): an ONNX model's executor realizes
  // values while it builds the graph (every kMaxLazyDepth-th, and those
  // a shape is read from), so most of its kernels run in forward, and
  // a capture opened after it saw none (the kernel table stayed empty).
  std::vector<tl::ProfileRecord> built;
  {
    tl::ProfileCapture capture;
    tl::TraceScope span("graph run");
    tl::Tensor logits = st.model->forward(input);
    data.graph = tl::snapshot_graph({logits.node()});
    (void)logits.to_vector();
    built = capture.records();
  }
  // The timed runs replay through the classifier's Jit, as the CLI's
  // do: no graph is built and no plan looked up, so the latency is the
  // device's and the launches' (building Lite0's graph alone takes
  // about 0.45 ms on this project's 2-core test machine).
  struct WarmRun {
    double seconds = 0;
    std::vector<tl::ProfileRecord> records;
  };
  std::vector<WarmRun> runs;
  // The cold run uploaded the weights, so the Jit captured nothing then;
  // this untimed call captures, and every run below replays.
  if (!st.model->jit_captured()) {
    tl::TraceScope span("jit capture");
    (void)st.model->infer(input).to_vector();
  }
  const bool byJit = st.model->jit_captured();
  for (int r = 0; r < kWarmRuns; ++r) {
    deliverRun(job, [this, job, device, r] { emit runProgress(job, device, r + 1, kWarmRuns); });
    WarmRun run;
    tl::ProfileCapture capture;
    tl::TraceScope span("warm run " + std::to_string(r + 1));
    auto t0 = std::chrono::steady_clock::now();
    (void)st.model->infer(input).to_vector();
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.records = capture.records();
    runs.push_back(std::move(run));
  }
  std::sort(runs.begin(), runs.end(), [](const WarmRun& a, const WarmRun& b) { return a.seconds < b.seconds; });
  WarmRun& median = runs[runs.size() / 2];
  data.warmRuns = kWarmRuns;
  data.warmSeconds = median.seconds;
  bool mapped = false;
  data.records = mapOntoGraph(median.records, built, mapped);
  data.jitReplayed = mapped && byJit;
  for (const auto& rec : data.records) data.kernelSeconds += rec.seconds;
#ifdef TL_HAVE_ONNX
  if (st.onnx) {
    // The shape of every value in this run (a dynamic batch as it was): one
    // more walk of the graph, untimed, its output left unrealized.
    tl::TraceScope span("shapes run");
    (void)st.onnx->run({input}, &data.valueShapes);
  }
#endif
  checkInputMatters(image, data);
}

// A model whose weights are placeholders (the onnx wheel's light models make
// them with ConstantOfShape) answers the same whatever it is shown. Asked
// of the outputs, not the file: a changed copy of the image (each value
// shifted by 0.37, wrapped, so even a flat grey image changes) runs through
// the same replay, and the logits are compared.
void Session::checkInputMatters(const tl::Image& image, RunData& data) {
  WorkerState& st = *state_;
  tl::TraceScope span("input check");
  // A copy of at most 512 pixels a side is enough to change the input (the
  // model resizes it anyway); a copy of the whole photo was 768 MB.
  const int step = std::max(1, (std::max(image.width, image.height) + 511) / 512);
  tl::Image changed;
  changed.width = image.width / step;
  changed.height = image.height / step;
  changed.rgb.resize(size_t(changed.width) * size_t(changed.height) * 3);
  for (int y = 0; y < changed.height; ++y)
    for (int x = 0; x < changed.width * 3; ++x)
      changed.rgb[size_t(y) * size_t(changed.width) * 3 + size_t(x)] = std::fmod(
          image.rgb[size_t(y * step) * size_t(image.width) * 3 + size_t(x / 3 * step) * 3 + size_t(x % 3)] + 0.37f, 1.0f);
  tl::NoGrad noGrad;
  tl::Tensor other = st.model->preprocess(changed, data.device.toStdString());
  other.realize();
  const std::vector<float> probe = st.model->infer(other).to_vector();
  const std::vector<float>& logits = data.logits;
  if (probe.size() != logits.size() || logits.empty()) return;
  double scale = 1, lo = logits[0], hi = logits[0], diff = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    scale = std::max(scale, double(std::fabs(logits[i])));
    lo = std::min(lo, double(logits[i]));
    hi = std::max(hi, double(logits[i]));
    diff = std::max(diff, double(std::fabs(probe[i] - logits[i])));
  }
  data.outputIgnoresImage = diff <= 1e-6 * scale;
  data.uniformLogits = hi - lo <= 1e-6 * scale;
}

quint64 Session::compare(const QString& imagePath, const QStringList& devices) {
  quint64 job = nextJob_++;
  Flag flag = startRunJob(job);
  post([this, job, flag, imagePath, devices] {
    WorkerState& st = *state_;
    auto finish = [this, job] { finishRun(job); };
    if (flag->load()) {
      deliverRun(job, [this, job] { emit cancelled(job); });
      finish();
      return;
    }
    CancelScope cancelScope(flag.get());
    std::optional<tl::SettingOverride> tuned;  // as classifications run, once tuned from the window
    if (st.tuned && !tl::tune_enabled()) tuned.emplace(tl::SettingName("TINYLENS_TUNE"), "1");
    try {
      const std::shared_ptr<const tl::Image> read = st.imageAt(imagePath);
      const tl::Image& image = *read;
      if (!st.model) {
        st.model = tl::load_classifier(kBuiltinModel);
        st.modelName = kBuiltinModel;
        st.onnx.reset();
      }
      auto data = std::make_shared<CompareData>();
      data->job = job;
      for (int i = 0; i < devices.size(); ++i) {
        const QString device = devices[i];
        int pct = 100 * i / int(devices.size());
        deliverRun(job, [this, job, device, pct] { emit progress(job, tr("Comparing: running on %1").arg(device), pct); });
        tl::TraceCapture trace;
        tl::ClassifyResult r = tl::classify(*st.model, image, device.toStdString(), 5, 0);
        tl::Tensor input = st.model->preprocess(image, device.toStdString());
        input.realize();
        TimedKernels timed = timeKernels(*st.model, input, kCompareRuns);
        auto run = newRun(job, device, imagePath, st.modelName, r);
        run->warmSeconds = timed.medianSeconds;
        run->warmRuns = kCompareRuns;
        run->records = std::move(timed.records);
        run->kernelSamples = std::move(timed.samples);
        run->trace = std::make_shared<const tl::TraceDocument>(tl::trace_document(trace));
        for (const auto& rec : run->records) run->kernelSeconds += rec.seconds;
        data->runs.push_back(run);
      }
      for (size_t a = 0; a < data->runs.size(); ++a)
        for (size_t b = a + 1; b < data->runs.size(); ++b) {
          const auto& la = data->runs[a]->logits;
          const auto& lb = data->runs[b]->logits;
          for (size_t k = 0; k < std::min(la.size(), lb.size()); ++k) {
            double d = std::fabs(double(la[k]) - double(lb[k]));
            if (d > data->maxLogitDiff || data->maxDiffPair.isEmpty()) {
              data->maxLogitDiff = std::max(d, data->maxLogitDiff);
              data->maxDiffPair = data->runs[a]->device + " vs " + data->runs[b]->device;
            }
          }
        }
      ComparePtr out = data;
      deliverRun(job, [this, out] { emit compared(out); });
    } catch (const tl::Cancelled&) {
      deliverRun(job, [this, job] { emit cancelled(job); });
    } catch (const std::exception& e) {
      QString msg = QString("Comparison failed: %1").arg(e.what());
      deliverRun(job, [this, job, msg] { emit failed(job, FailureSource::Compare, msg); });
    }
    finish();
  });
  return job;
}

quint64 Session::buildWarningKernel(const QString& device) {
  quint64 job = nextJob_++;
  post([this, job, device] {
    const QString name = "tl_known_warning";
    QString source;
    try {
      tl::Device& dev = tl::Registry::instance().get_available(device.toStdString());
      const tl::DeviceInfo& info = dev.info();
      // Written in the device's language (its dialect), never by its name.
      const std::string& language = dev.dialect().name;
      if (language == "opencl") {
        // "double precision constant requires cl_khr_fp64" where the device
        // has no fp64; clang also flags the literal losing its fraction.
        source = QString("__kernel void %1(__global float* out) {\n"
                         "  int i = get_global_id(0);\n"
                         "  int steps = 2.5;\n"
                         "  out[i] = out[i] * 0.5 + steps;\n"
                         "}\n").arg(name);
      } else if (language == "c") {
        // -Wall: "suggest parentheses around assignment used as truth value".
        source = QString("#include <stddef.h>\n"
                         "void %1(int begin, int end, void** args) {\n"
                         "  float* out = (float*)args[0];\n"
                         "  for (int i = begin; i < end; ++i) {\n"
                         "    int odd;\n"
                         "    if (odd = i % 2) out[i] = 0.0f;\n"
                         "  }\n"
                         "}\n").arg(name);
      } else if (language == "cuda") {
        // NVRTC: "variable "unused" was declared but never referenced".
        source = QString("extern \"C\" __global__ void %1(float* out) {\n"
                         "  int unused;\n"
                         "  out[threadIdx.x] = 0.5f;\n"
                         "}\n").arg(name);
      } else {
        throw std::runtime_error("no known-warning kernel in " + language + " for " + info.name + " (" + info.kind + ")");
      }
      std::shared_ptr<tl::Program> program = dev.compile(name.toStdString(), source.toStdString());
      QString log = QString::fromStdString(program->build_log);
      QMetaObject::invokeMethod(
          this, [this, device, name, source, log] { emit warningKernelBuilt(device, name, source, log); },
          Qt::QueuedConnection);
    } catch (const tl::CompileError& e) {
      // Still worth showing: the log is what this is for.
      QString log = QString::fromStdString(e.log.empty() ? std::string(e.what()) : e.log);
      QMetaObject::invokeMethod(
          this, [this, device, name, source, log] { emit warningKernelBuilt(device, name, source, log); },
          Qt::QueuedConnection);
    } catch (const std::exception& e) {
      QString msg = QString("Could not build the known-warning kernel on %1: %2").arg(device, e.what());
      QMetaObject::invokeMethod(this, [this, job, msg] { emit failed(job, FailureSource::WarningKernel, msg); }, Qt::QueuedConnection);
    }
  });
  return job;
}

}  // namespace tlui
