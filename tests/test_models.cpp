// EfficientNet-Lite0 against scripts/reference_efficientnet.py: the golden
// files hold the reference's preprocessed input and its logits for two real
// photos, so the network and the preprocessing are checked separately.
#include <QtTest/QtTest>

#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/models/classifier.h"
#include "core/models/efficientnet.h"
#include "tests/testing.h"
#ifdef TL_HAVE_PTH
#include "core/io/pth.h"
#endif
#ifdef TL_HAVE_SAFETENSORS
#include "core/io/safetensors.h"
#endif

namespace {

const char* kImages = "/usr/share/doc/opencv-doc/examples/data/";

std::vector<float> read_floats(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v(count);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(count * sizeof(float)));
  if (!in) throw std::runtime_error("cannot read " + std::to_string(count) + " floats from " + path);
  return v;
}

std::string golden(const std::string& name) { return tltest::source_dir() + "/tests/data/models/" + name; }

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return a.size() == b.size() ? m : INFINITY;
}

std::string weights_path() { return tl::models_directory() + "/efficientnet-lite0-57934424.pth"; }

}  // namespace

class TestModels : public QObject {
  Q_OBJECT

  std::unique_ptr<tl::ImageClassifier> model_;

  void need_model() {
    TL_REQUIRE(model_, "EfficientNet-Lite0 weights are not installed (run scripts/setup)");
  }

 private slots:
  void initTestCase() {
    if (!std::filesystem::exists(weights_path()) ||
        !std::filesystem::exists(tl::models_directory() + "/imagenet_classes.txt"))
      return;  // every model test skips with the reason
    model_ = tl::load_classifier("efficientnet-lite0");
  }

  void summary() {
    need_model();
    auto s = model_->summary();
    QCOMPARE(s.name, std::string("EfficientNet-Lite0"));
    QCOMPARE(s.parameters, int64_t(4652008));  // sum(p.numel()) of the PyTorch port
    QCOMPARE(s.layers, int64_t(50));           // stem, 15 expand + 16 depthwise + 16 project, head, fc
    QCOMPARE(s.input_shape, tl::Shape({1, 3, 224, 224}));
    QVERIFY(s.flops > 0.75e9 && s.flops < 0.85e9);  // ~0.4 G multiply-adds
    QCOMPARE(model_->labels().size(), size_t(1000));
    QCOMPARE(model_->labels()[335], std::string("fox squirrel"));
  }

  void logits_match_reference_data() {
    QTest::addColumn<QString>("device");
    QTest::addColumn<QString>("image");
    for (auto& d : tltest::available_devices())
      for (const char* image : {"squirrel", "orange"})
        QTest::newRow((d + "/" + image).c_str()) << QString::fromStdString(d) << QString(image);
  }
  void logits_match_reference() {
    need_model();
    QFETCH(QString, device);
    QFETCH(QString, image);
    const std::string dev = device.toStdString(), name = image.toStdString();
    auto input = read_floats(golden(name + "_input.bin"), 3 * 224 * 224);
    auto expected = read_floats(golden(name + "_logits.bin"), 1000);
    auto got = model_->forward(tl::Tensor::from_data(input, {1, 3, 224, 224}, dev)).to_vector();
    const double diff = max_abs_diff(got, expected);
    const double tolerance = dev == "cpu" ? 1e-3 : 1e-2;
    qInfo("%s %s: max |logit - reference| = %.3g (tolerance %.0e)", dev.c_str(), name.c_str(), diff, tolerance);
    QVERIFY2(diff <= tolerance, ("max abs diff " + std::to_string(diff)).c_str());
  }

  void batch_of_two_matches_reference() {
    need_model();
    auto a = read_floats(golden("squirrel_input.bin"), 3 * 224 * 224);
    auto b = read_floats(golden("orange_input.bin"), 3 * 224 * 224);
    a.insert(a.end(), b.begin(), b.end());
    auto got = model_->forward(tl::Tensor::from_data(a, {2, 3, 224, 224}, "cpu")).to_vector();
    auto expected = read_floats(golden("squirrel_logits.bin"), 1000);
    auto e2 = read_floats(golden("orange_logits.bin"), 1000);
    expected.insert(expected.end(), e2.begin(), e2.end());
    QVERIFY(max_abs_diff(got, expected) <= 1e-3);
  }

  void preprocessing_matches_reference_data() {
    QTest::addColumn<QString>("image");
    QTest::addColumn<QString>("file");
    QTest::newRow("squirrel") << "squirrel" << "squirrel_cls.jpg";
    QTest::newRow("orange") << "orange" << "orange.jpg";
  }
  void preprocessing_matches_reference() {
    need_model();
    QFETCH(QString, image);
    QFETCH(QString, file);
    const std::string path = std::string(kImages) + file.toStdString();
    TL_REQUIRE(std::filesystem::exists(path), "opencv-doc's sample images are not installed");
    auto got = model_->preprocess(tl::load_image(path), "cpu").to_vector();
    auto expected = read_floats(golden(image.toStdString() + "_input.bin"), 3 * 224 * 224);
    QCOMPARE(got.size(), expected.size());
    double sum = 0;
    for (size_t i = 0; i < got.size(); ++i) sum += std::fabs(double(got[i]) - double(expected[i]));
    const double max = max_abs_diff(got, expected), mean = sum / double(got.size());
    // PIL resizes 8-bit pixels in fixed point and rounds to 8 bits; we resize
    // floats. One 8-bit step is 1/128 = 0.0078 after the (x - 127) / 128
    // normalisation.
    qInfo("%s: preprocessing max |diff| %.4f, mean %.5f", qPrintable(image), max, mean);
    QVERIFY2(max <= 2.5 / 128, std::to_string(max).c_str());
    QVERIFY2(mean <= 0.4 / 128, std::to_string(mean).c_str());  // 8-bit rounding alone averages 0.25 steps
  }

  void top1_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("label");
    QTest::newRow("squirrel") << "squirrel_cls.jpg" << "fox squirrel";
    QTest::newRow("orange") << "orange.jpg" << "orange";
  }
  void top1() {
    need_model();
    QFETCH(QString, file);
    QFETCH(QString, label);
    const std::string path = std::string(kImages) + file.toStdString();
    TL_REQUIRE(std::filesystem::exists(path), "opencv-doc's sample images are not installed");
    auto r = tl::classify(*model_, tl::load_image(path), "cpu", 5, 1);
    QCOMPARE(r.top.size(), size_t(5));
    QCOMPARE(QString::fromStdString(r.top[0].label), label);
    QVERIFY(r.top[0].probability > 0.5f);
    for (size_t i = 1; i < r.top.size(); ++i) QVERIFY(r.top[i].probability <= r.top[i - 1].probability);
    QCOMPARE(r.logits.size(), size_t(1000));
    QVERIFY(r.cold_seconds > 0 && r.warm_seconds > 0);
    QVERIFY(!r.records.empty());
    QCOMPARE(r.device, std::string("cpu"));
  }

  void truncated_checkpoint_is_an_io_error() {
    need_model();
    QTemporaryDir dir;
    const std::string path = dir.filePath("truncated.pth").toStdString();
    {
      std::ifstream in(weights_path(), std::ios::binary);
      std::vector<char> half(size_t(std::filesystem::file_size(weights_path()) / 2));
      in.read(half.data(), std::streamsize(half.size()));
      std::ofstream out(path, std::ios::binary);
      out.write(half.data(), std::streamsize(half.size()));
    }
    try {
      tl::load_classifier(path);
      QFAIL("a truncated checkpoint loaded");
    } catch (const tl::IOError& e) {
      qInfo("truncated: %s", e.what());
      QVERIFY2(std::string(e.what()).find("truncated.pth") != std::string::npos, e.what());
    }
  }

  void missing_and_misshaped_keys_are_named() {
#if defined(TL_HAVE_PTH) && defined(TL_HAVE_SAFETENSORS)
    need_model();
    tl::StateDict state = tl::load_pth(weights_path());
    QVERIFY(state.erase("_blocks.7._bn1.running_var") == 1);
    state["_fc.bias"].shape = {999};
    state["_fc.bias"].data.resize(999);
    QTemporaryDir dir;
    const std::string path = dir.filePath("broken.safetensors").toStdString();
    tl::save_safetensors(path, state);
    try {
      tl::load_classifier(path);
      QFAIL("a checkpoint with a missing key loaded");
    } catch (const tl::IOError& e) {
      const std::string msg = e.what();
      qInfo("broken: %s", e.what());
      QVERIFY2(msg.find("_blocks.7._bn1.running_var") != std::string::npos, e.what());
      QVERIFY2(msg.find("_fc.bias") != std::string::npos, e.what());
      QVERIFY2(msg.find("broken.safetensors") != std::string::npos, e.what());
    }
#else
    TL_REQUIRE(false, "built without .pth or safetensors support");
#endif
  }

  void safetensors_checkpoint_gives_the_same_logits() {
#if defined(TL_HAVE_PTH) && defined(TL_HAVE_SAFETENSORS)
    need_model();
    QTemporaryDir dir;
    const std::string path = dir.filePath("lite0.safetensors").toStdString();
    tl::save_safetensors(path, tl::load_pth(weights_path()));
    auto other = tl::load_classifier(path);
    QCOMPARE(other->summary().source, path);
    auto input = read_floats(golden("orange_input.bin"), 3 * 224 * 224);
    auto got = other->forward(tl::Tensor::from_data(input, {1, 3, 224, 224}, "cpu")).to_vector();
    QVERIFY(max_abs_diff(got, read_floats(golden("orange_logits.bin"), 1000)) <= 1e-3);
#else
    TL_REQUIRE(false, "built without .pth or safetensors support");
#endif
  }

  void bad_onnx_file_is_refused_clearly() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("model.onnx").toStdString();
    std::ofstream(path) << "not really onnx";
    try {
      tl::load_classifier(path);
      QFAIL("a garbage .onnx file loaded");
    } catch (const tl::IOError& e) {
#ifdef TL_HAVE_ONNX
      QVERIFY2(std::string(e.what()).find("is not a valid ONNX model") != std::string::npos, e.what());
      QVERIFY2(std::string(e.what()).find(path) != std::string::npos, e.what());
#else
      QVERIFY2(std::string(e.what()).find("ONNX") != std::string::npos, e.what());
#endif
    }
  }

  void missing_weights_say_how_to_get_them() {
    QTemporaryDir dir;
    const QByteArray previous = qgetenv("TINYLENS_MODELS");
    qputenv("TINYLENS_MODELS", dir.path().toUtf8());
    QCOMPARE(QString::fromStdString(tl::models_directory()), QDir(dir.path()).canonicalPath());
    std::string message;
    try {
      tl::load_classifier("efficientnet-lite0");
    } catch (const tl::IOError& e) {
      message = e.what();
    }
    if (previous.isNull()) qunsetenv("TINYLENS_MODELS");
    else qputenv("TINYLENS_MODELS", previous);
    QVERIFY2(message.find("scripts/setup") != std::string::npos, message.c_str());
    QVERIFY2(message.find("efficientnet-lite0-57934424.pth") != std::string::npos, message.c_str());
  }

  void unknown_device_is_refused() {
    need_model();
    tl::Image image;
    image.width = image.height = 64;
    image.rgb.assign(64 * 64 * 3, 0.5f);
    QVERIFY_THROWS_EXCEPTION(tl::DeviceError, tl::classify(*model_, image, "no-such-device"));
  }
};

QTEST_GUILESS_MAIN(TestModels)
#include "test_models.moc"
