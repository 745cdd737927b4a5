// The loaders against fixtures written by scripts/make_io_fixtures.py: the
// values torch / PIL read from the same files are in tests/data/io/expected.json.
#include <QtTest/QtTest>

#include "tests/testing.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/host_tensor.h"
#ifdef TL_HAVE_IMAGES
#include "core/io/image.h"
#endif
#ifdef TL_HAVE_PTH
#include "core/io/pth.h"
#endif
#ifdef TL_HAVE_SAFETENSORS
#include "core/io/safetensors.h"
#endif

namespace {

std::string fixture(const std::string& name) { return std::string(TL_SOURCE_DIR) + "/tests/data/io/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

const QJsonObject& expected() {
  static const QJsonObject root = [] {
    const auto bytes = read_bytes(fixture("expected.json"));
    return QJsonDocument::fromJson(QByteArray(reinterpret_cast<const char*>(bytes.data()), qsizetype(bytes.size())))
        .object();
  }();
  return root;
}

// Runs f; returns the IOError's message, or "<no error>" / "<other: ...>" so
// a check on the message content fails with something readable.
QString io_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tl::IOError& e) {
    return QString::fromStdString(e.what());
  } catch (const std::exception& e) {
    return QStringLiteral("<other exception: ") + e.what() + ">";
  }
  return QStringLiteral("<no error>");
}

bool is_io_error(const QString& msg) { return !msg.startsWith('<'); }

// Compares a loaded state dict with expected.json's {key: {dtype, shape, values}}, exactly.
void compare_state_dict(const tl::StateDict& got, const QJsonObject& want) {
  QCOMPARE(got.size(), size_t(want.size()));
  for (auto it = want.begin(); it != want.end(); ++it) {
    const std::string key = it.key().toStdString();
    QVERIFY2(got.count(key), key.c_str());
    const tl::HostTensor& t = got.at(key);
    const QJsonObject w = it.value().toObject();
    QCOMPARE(QString::fromStdString(t.dtype), w["dtype"].toString());
    tl::Shape shape;
    for (const auto& d : w["shape"].toArray()) shape.push_back(d.toInteger());
    QVERIFY2(t.shape == shape, (key + " shape " + tl::host_shape_str(t.shape)).c_str());
    const QJsonArray values = w["values"].toArray();
    QCOMPARE(t.data.size(), size_t(values.size()));
    for (qsizetype i = 0; i < values.size(); ++i) {
      const float want_value = float(values[i].toDouble());
      QVERIFY2(t.data[size_t(i)] == want_value || (std::isnan(want_value) && std::isnan(t.data[size_t(i)])),
               qPrintable(QString("%1[%2]: %3 vs %4").arg(it.key()).arg(i).arg(t.data[size_t(i)]).arg(want_value)));
    }
  }
}

#ifdef TL_HAVE_IMAGES
// Pixels as expected.json lists them: 8-bit ints, HWC.
void compare_pixels(const tl::Image& img, int w, int h, const QJsonArray& pixels, float scale, float tolerance = 0) {
  QCOMPARE(img.width, w);
  QCOMPARE(img.height, h);
  QCOMPARE(img.rgb.size(), size_t(pixels.size()));
  for (qsizetype i = 0; i < pixels.size(); ++i) {
    const float want = float(pixels[i].toInt()) / scale;
    QVERIFY2(std::fabs(img.rgb[size_t(i)] - want) <= tolerance,
             qPrintable(QString("pixel value %1: %2 vs %3").arg(i).arg(img.rgb[size_t(i)]).arg(want)));
  }
}

struct Errors {
  double mean = 0, max = 0;
};
Errors compare_to_u8(const std::vector<float>& got, const std::vector<uint8_t>& golden) {
  Errors e;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - golden[i] / 255.0);
    e.mean += d;
    e.max = std::max(e.max, d);
  }
  e.mean /= double(got.size());
  return e;
}
#endif

}  // namespace

class TestIO : public QObject {
  Q_OBJECT

 private slots:
  // ---------------------------------------------------------------- checkpoints
  void pthStateDicts_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("zip") << "state_zip.pth";
    QTest::newRow("legacy") << "state_legacy.pth";
    QTest::newRow("zip, wrapped under state_dict") << "wrapped_zip.pth";
    QTest::newRow("legacy, wrapped under model") << "wrapped_legacy.pth";
  }
  void pthStateDicts() {
#ifndef TL_HAVE_PTH
    TL_REQUIRE(false, "built without libzip");
#else
    QFETCH(QString, file);
    const tl::StateDict sd = tl::load_pth(fixture(file.toStdString()));
    compare_state_dict(sd, expected()["state_dict"].toObject());
    // Spelled out once, so a wrong expected.json cannot hide a wrong gather.
    QCOMPARE(sd.at("transposed").data, (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
    QCOMPARE(sd.at("sliced").data, (std::vector<float>{3, 5, 7}));
    QCOMPARE(sd.at("steps").data, (std::vector<float>{1, -2, 3e9f, 7}));
    QCOMPARE(sd.at("shared_b").shape, (tl::Shape{2, 2}));
    QVERIFY(sd.at("scalar").shape.empty());
#endif
  }

  void pthRefusesCode_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("global");
    QTest::newRow("GLOBAL os.system, bare pickle") << "malicious.pkl" << "posix.system";
    QTest::newRow("STACK_GLOBAL builtins.eval in a zip") << "malicious_zip.pth" << "builtins.eval";
    QTest::newRow("whole pickled nn.Module") << "whole_module.pth" << "torch.nn.modules.linear.Linear";
  }
  void pthRefusesCode() {
#ifndef TL_HAVE_PTH
    TL_REQUIRE(false, "built without libzip");
#else
    QFETCH(QString, file);
    QFETCH(QString, global);
    const QString msg = io_error_of([&] { tl::load_pth(fixture(file.toStdString())); });
    QVERIFY2(msg.contains("refusing pickle global '" + global + "'"), qPrintable(msg));
    QVERIFY2(msg.contains(file), qPrintable(msg));
#endif
  }

  void pthTruncatedAndCorrupt_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("zip") << "state_zip.pth";
    QTest::newRow("legacy") << "state_legacy.pth";
  }
  void pthTruncatedAndCorrupt() {
#ifndef TL_HAVE_PTH
    TL_REQUIRE(false, "built without libzip");
#else
    QFETCH(QString, file);
    const auto bytes = read_bytes(fixture(file.toStdString()));
    QVERIFY(bytes.size() > 1000);
    // Every prefix must fail cleanly with an IOError naming the file.
    for (size_t len = 0; len < bytes.size(); ++len) {
      const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(len));
      const QString msg = io_error_of([&] { tl::load_pth_bytes(cut, "cut.pth"); });
      QVERIFY2(is_io_error(msg) && msg.contains("cut.pth"),
               qPrintable(QString("length %1: %2").arg(len).arg(msg)));
    }
    // Flipped bytes may still load (a changed weight) but must never crash or
    // throw anything but IOError.
    int refused = 0;
    for (size_t at = 0; at < bytes.size(); ++at) {
      auto damaged = bytes;
      damaged[at] ^= 0xA5;
      const QString msg = io_error_of([&] { tl::load_pth_bytes(damaged, "damaged.pth"); });
      QVERIFY2(is_io_error(msg) || msg == "<no error>", qPrintable(QString("byte %1: %2").arg(at).arg(msg)));
      refused += is_io_error(msg);
    }
    QVERIFY(refused > 0);
#endif
  }

  void pthErrorsNameTheProblem() {
#ifndef TL_HAVE_PTH
    TL_REQUIRE(false, "built without libzip");
#else
    QString msg = io_error_of([] { tl::load_pth(fixture("does_not_exist.pth")); });
    QVERIFY2(msg.contains("cannot open") && msg.contains("does_not_exist.pth"), qPrintable(msg));
    msg = io_error_of([] { tl::load_pth(fixture("rgb.png")); });
    QVERIFY2(msg.contains("not a PyTorch checkpoint"), qPrintable(msg));
    // A legacy file whose last storage is cut names that storage.
    auto bytes = read_bytes(fixture("state_legacy.pth"));
    QTemporaryDir dir;
    const std::string path = dir.filePath("short.pth").toStdString();
    write_bytes(path, std::vector<uint8_t>(bytes.begin(), bytes.end() - 4));
    msg = io_error_of([&] { tl::load_pth(path); });
    QVERIFY2(msg.contains("storage '") && msg.contains("truncated"), qPrintable(msg));
#endif
  }

  void pthRealModel() {
#ifndef TL_HAVE_PTH
    TL_REQUIRE(false, "built without libzip");
#else
    const std::string path = std::string(TL_SOURCE_DIR) + "/resources/models/efficientnet-lite0-57934424.pth";
    TL_REQUIRE(QFile::exists(QString::fromStdString(path)), "run scripts/setup to download EfficientNet-Lite0");
    const QJsonObject want = expected()["efficientnet_lite0"].toObject();
    TL_REQUIRE(!want.isEmpty(), "expected.json was written without the model; rerun scripts/make_io_fixtures.py");
    const tl::StateDict sd = tl::load_pth(path);
    QCOMPARE(qsizetype(sd.size()), qsizetype(want["keys"].toInt()));
    const QJsonObject tensors = want["tensors"].toObject();
    for (auto it = tensors.begin(); it != tensors.end(); ++it) {
      const tl::HostTensor& t = sd.at(it.key().toStdString());
      const QJsonObject w = it.value().toObject();
      QCOMPARE(QString::fromStdString(t.dtype), w["dtype"].toString());
      tl::Shape shape;
      for (const auto& d : w["shape"].toArray()) shape.push_back(d.toInteger());
      QVERIFY(t.shape == shape);
      const QJsonArray first = w["first"].toArray();
      for (qsizetype i = 0; i < first.size(); ++i) QCOMPARE(t.data[size_t(i)], float(first[i].toDouble()));
      double sum = 0;
      for (float v : t.data) sum += v;
      QVERIFY2(std::fabs(sum - w["sum"].toDouble()) < 1e-9 * (1 + std::fabs(sum)),
               qPrintable(it.key() + QString(": sum %1 vs %2").arg(sum).arg(w["sum"].toDouble())));
    }
#endif
  }

  void checkStateDict() {
    tl::StateDict got;
    got["conv.weight"] = {{8, 3, 3, 3}, "F32", std::vector<float>(216)};
    got["conv.bias"] = {{8}, "F32", std::vector<float>(8)};
    got["extra.running_mean"] = {{4}, "F32", std::vector<float>(4)};
    std::map<std::string, tl::Shape> want = {
        {"conv.weight", {8, 3, 3, 3}}, {"conv.bias", {16}}, {"fc.weight", {10, 8}}};
    const QString msg = io_error_of([&] { tl::check_state_dict(got, want); });
    QVERIFY2(msg.contains("missing") && msg.contains("fc.weight"), qPrintable(msg));
    QVERIFY2(msg.contains("unexpected") && msg.contains("extra.running_mean"), qPrintable(msg));
    QVERIFY2(msg.contains("conv.bias: file has (8,), model expects (16,)"), qPrintable(msg));
    QVERIFY2(!msg.contains("conv.weight"), qPrintable(msg));
    want["conv.bias"] = {8};
    want.erase("fc.weight");
    want["extra.running_mean"] = {4};
    tl::check_state_dict(got, want);  // matches: no throw
  }

  // ---------------------------------------------------------------- safetensors
  void safetensorsValues() {
#ifndef TL_HAVE_SAFETENSORS
    TL_REQUIRE(false, "built without nlohmann-json");
#else
    const tl::StateDict sd = tl::load_safetensors(fixture("tensors.safetensors"));
    compare_state_dict(sd, expected()["safetensors"].toObject());
    QCOMPARE(sd.at("bf").data, (std::vector<float>{1.5f, -2.5f}));
    QCOMPARE(sd.at("ids").data[2], float(int64_t(1) << 40));
#endif
  }

  void safetensorsRoundTrip() {
#ifndef TL_HAVE_SAFETENSORS
    TL_REQUIRE(false, "built without nlohmann-json");
#else
    tl::StateDict sd;
    sd["a.weight"] = {{2, 3}, "F32", {1, -2, 3.5f, 1e-30f, -0.0f, 65504}};
    sd["b"] = {{}, "F32", {42}};
    sd["empty"] = {{0, 5}, "F32", {}};
    sd["z"] = {{3}, "I64", {1, 2, 3}};  // written as F32
    QTemporaryDir dir;
    const std::string path = dir.filePath("round.safetensors").toStdString();
    tl::save_safetensors(path, sd);
    const tl::StateDict back = tl::load_safetensors(path);
    QCOMPARE(back.size(), sd.size());
    for (const auto& [k, t] : sd) {
      QCOMPARE(back.at(k).dtype, std::string("F32"));
      QVERIFY(back.at(k).shape == t.shape);
      QCOMPARE(back.at(k).data, t.data);
    }
    // The data starts 8-byte aligned.
    const auto bytes = read_bytes(path);
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | bytes[size_t(i)];
    QCOMPARE((8 + header) % 8, uint64_t(0));

    tl::StateDict bad;
    bad["w"] = {{2, 2}, "F32", {1, 2, 3}};
    const QString msg = io_error_of([&] { tl::save_safetensors(path, bad); });
    QVERIFY2(msg.contains("'w'") && msg.contains("(2, 2)"), qPrintable(msg));
#endif
  }

  void safetensorsTruncated() {
#ifndef TL_HAVE_SAFETENSORS
    TL_REQUIRE(false, "built without nlohmann-json");
#else
    const auto bytes = read_bytes(fixture("tensors.safetensors"));
    for (size_t len = 0; len < bytes.size(); ++len) {
      const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(len));
      const QString msg = io_error_of([&] { tl::load_safetensors_bytes(cut, "cut.safetensors"); });
      QVERIFY2(is_io_error(msg) && msg.contains("cut.safetensors"),
               qPrintable(QString("length %1: %2").arg(len).arg(msg)));
    }
    for (size_t at = 0; at < bytes.size(); ++at) {
      auto damaged = bytes;
      damaged[at] ^= 0x5A;
      const QString msg = io_error_of([&] { tl::load_safetensors_bytes(damaged, "damaged.safetensors"); });
      QVERIFY2(is_io_error(msg) || msg == "<no error>", qPrintable(QString("byte %1: %2").arg(at).arg(msg)));
    }
#endif
  }

  void safetensorsBadHeaders_data() {
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<int>("data_bytes");
    QTest::addColumn<QString>("needle");
    QTest::newRow("not json") << QByteArray("{\"a\": ") << 0 << "not valid JSON";
    QTest::newRow("unknown dtype") << QByteArray(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})") << 4
                                   << "tensor 'w': unsupported dtype 'Q7'";
    QTest::newRow("shape vs bytes") << QByteArray(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})")
                                    << 20 << "tensor 'w': shape (2, 3) of F32 needs 24 bytes";
    QTest::newRow("outside data") << QByteArray(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})") << 8
                                  << "tensor 'w': data_offsets [0, 16] lie outside";
    QTest::newRow("overlap") << QByteArray(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})")
                             << 8 << "overlaps";
    QTest::newRow("gap") << QByteArray(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})") << 8
                         << "gap of 4 bytes before tensor 'a'";
    QTest::newRow("negative size") << QByteArray(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})") << 4
                                   << "tensor 'a': shape [-1]";
    QTest::newRow("huge shape")
        << QByteArray(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,8],"data_offsets":[0,4]}})") << 4
        << "absurd number of elements";
    QTest::newRow("missing offsets") << QByteArray(R"({"a":{"dtype":"F32","shape":[1]}})") << 4 << "data_offsets";
  }
  void safetensorsBadHeaders() {
#ifndef TL_HAVE_SAFETENSORS
    TL_REQUIRE(false, "built without nlohmann-json");
#else
    QFETCH(QByteArray, json);
    QFETCH(int, data_bytes);
    QFETCH(QString, needle);
    std::vector<uint8_t> bytes(8);
    for (int i = 0; i < 8; ++i) bytes[size_t(i)] = uint8_t(uint64_t(json.size()) >> (8 * i));
    bytes.insert(bytes.end(), json.begin(), json.end());
    bytes.resize(bytes.size() + size_t(data_bytes));
    QTemporaryDir dir;
    const std::string path = dir.filePath("bad.safetensors").toStdString();
    write_bytes(path, bytes);
    const QString msg = io_error_of([&] { tl::load_safetensors(path); });
    QVERIFY2(msg.contains(needle) && msg.contains("bad.safetensors"), qPrintable(msg));
#endif
  }

  void safetensorsAbsurdHeaderLength() {
#ifndef TL_HAVE_SAFETENSORS
    TL_REQUIRE(false, "built without nlohmann-json");
#else
    QTemporaryDir dir;
    const std::string path = dir.filePath("huge.safetensors").toStdString();
    write_bytes(path, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'});
    const QString msg = io_error_of([&] { tl::load_safetensors(path); });
    QVERIFY2(msg.contains("header length") && msg.contains("not plausible"), qPrintable(msg));
#endif
  }

  // --------------------------------------------------------------------- images
  void imagesLossless_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("pixels");  // key in expected.json "images"
    QTest::newRow("png") << "rgb.png" << "rgb";
    QTest::newRow("bmp") << "rgb.bmp" << "rgb";
    QTest::newRow("tga") << "rgb.tga" << "rgb";
    QTest::newRow("tga rle") << "rgb_rle.tga" << "rgb";
    QTest::newRow("ppm") << "rgb.ppm" << "rgb";
    QTest::newRow("rgba png, alpha dropped") << "rgba.png" << "rgb";
    QTest::newRow("grey png") << "grey.png" << "grey";
    QTest::newRow("grey+alpha png") << "grey_alpha.png" << "grey_alpha";
    QTest::newRow("gif, first frame") << "anim.gif" << "gif_first_frame";
  }
  void imagesLossless() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    QFETCH(QString, file);
    QFETCH(QString, pixels);
    const QJsonObject images = expected()["images"].toObject();
    const QJsonValue p = images[pixels];
    const QJsonArray values = p.isObject() ? p.toObject()["pixels"].toArray() : p.toArray();
    compare_pixels(tl::load_image(fixture(file.toStdString())), 5, 4, values, 255.0f);
#endif
  }

  void images16Bit() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    const tl::Image img = tl::load_image(fixture("rgb16.png"));
    compare_pixels(img, 5, 4, expected()["images"].toObject()["rgb16"].toArray(), 65535.0f);
    QCOMPARE(img.rgb[0], 1 / 65535.0f);  // below 8-bit resolution: really decoded as 16 bits
    QCOMPARE(img.rgb[1], 1234 / 65535.0f);
#endif
  }

  void imagesJpeg() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    // Solid 8x8 blocks at quality 100: stb and libjpeg (PIL) may differ only
    // by the rounding of their colour conversion.
    const QJsonObject want = expected()["images"].toObject()["jpeg_blocks_pil"].toObject();
    compare_pixels(tl::load_image(fixture("blocks.jpg")), 16, 16, want["pixels"].toArray(), 255.0f, 1.0f / 255 + 1e-6f);
#endif
  }

  void imageErrors_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("needle");
    QTest::newRow("missing") << "no_such_image.png" << "cannot open image";
    QTest::newRow("empty") << "empty.png" << "the file is empty";
    QTest::newRow("text named .png") << "not_an_image.png" << "unknown image type";
    QTest::newRow("truncated jpeg") << "truncated.jpg" << "corrupt or truncated";
  }
  void imageErrors() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    QFETCH(QString, file);
    QFETCH(QString, needle);
    const QString msg = io_error_of([&] { tl::load_image(fixture(file.toStdString())); });
    QVERIFY2(msg.contains(needle) && msg.contains(file), qPrintable(msg));
#endif
  }

  void imagesTruncatedEverywhere_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("complete_from");  // prefixes this long may decode (only trailing chunks missing)
    QTest::newRow("png") << "rgb.png" << 80;  // IDAT ends at byte 80, IEND follows
    QTest::newRow("bmp") << "rgb.bmp" << 118;
    QTest::newRow("tga") << "rgb.tga" << 78;  // then the optional footer
    QTest::newRow("tga rle") << "rgb_rle.tga" << 82;
    QTest::newRow("ppm") << "rgb.ppm" << 71;
    QTest::newRow("jpeg") << "blocks.jpg" << -1;
  }
  void imagesTruncatedEverywhere() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    QFETCH(QString, file);
    QFETCH(int, complete_from);
    const auto bytes = read_bytes(fixture(file.toStdString()));
    const tl::Image full = tl::decode_image(bytes, "full");
    for (size_t len = 0; len < bytes.size(); ++len) {
      const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(len));
      tl::Image img;
      const QString msg = io_error_of([&] { img = tl::decode_image(cut, "cut-image"); });
      if (msg == "<no error>") {
        // Never garbage: a prefix may only decode when all pixel data is in it.
        QVERIFY2(complete_from >= 0 && int(len) >= complete_from,
                 qPrintable(QString("length %1 decoded").arg(len)));
        QCOMPARE(img.rgb, full.rgb);
      } else {
        QVERIFY2(is_io_error(msg) && msg.contains("cut-image"), qPrintable(QString("length %1: %2").arg(len).arg(msg)));
      }
    }
#endif
  }

  void jpegHuffmanOverflowRefused() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    // Debian's stb would write past its Huffman tables for > 256 symbols.
    auto bytes = read_bytes(fixture("blocks.jpg"));
    size_t dht = 0;
    for (size_t i = 2; i + 1 < bytes.size() && !dht; ++i)
      if (bytes[i] == 0xff && bytes[i + 1] == 0xc4) dht = i;
    QVERIFY(dht > 0);
    for (size_t i = 0; i < 16; ++i) bytes[dht + 5 + i] = 0xff;  // 16 x 255 symbols
    const QString msg = io_error_of([&] { tl::decode_image(bytes, "evil.jpg"); });
    QVERIFY2(msg.contains("Huffman table with 4080 symbols") && msg.contains("evil.jpg"), qPrintable(msg));
#endif
  }

  void hugeImageGuard_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("size");
    auto png = [](uint32_t w, uint32_t h) {
      QByteArray b("\x89PNG\r\n\x1a\n", 8);
      const char ihdr[] = {0, 0, 0, 13, 'I', 'H', 'D', 'R'};
      b.append(ihdr, 8);
      for (uint32_t v : {w, h})
        for (int s = 24; s >= 0; s -= 8) b.append(char(v >> s));
      b.append("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB
      b.append("\x00\x00\x00\x00", 4);      // CRC (stb does not check it)
      return b;
    };
    auto bmp = [](int32_t w, int32_t h) {
      QByteArray b(54, '\0');
      auto put = [&](int at, uint32_t v, int n) {
        for (int i = 0; i < n; ++i) b[at + i] = char(v >> (8 * i));
      };
      b[0] = 'B';
      b[1] = 'M';
      put(2, 54, 4);
      put(10, 54, 4);
      put(14, 40, 4);
      put(18, uint32_t(w), 4);
      put(22, uint32_t(h), 4);
      put(26, 1, 2);
      put(28, 24, 2);
      return b;
    };
    QTest::newRow("png 30000x30000") << png(30000, 30000) << "30000x30000";
    QTest::newRow("bmp 30000x30000") << bmp(30000, 30000) << "30000x30000";
    QTest::newRow("png 12000x12000 (144 MP)") << png(12000, 12000) << "12000x12000";
    QTest::newRow("bmp 20000x10") << bmp(20000, 10) << "20000x10";
  }
  void hugeImageGuard() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    QFETCH(QByteArray, bytes);
    QFETCH(QString, size);
    QVERIFY(bytes.size() < 64);
    const std::vector<uint8_t> data(bytes.begin(), bytes.end());
    const QString msg = io_error_of([&] { tl::decode_image(data, "forged.img"); });
    QVERIFY2(msg.contains("too large") && msg.contains(size) && msg.contains("forged.img"), qPrintable(msg));
#endif
  }

  // --------------------------------------------------------------------- resize
  void resizeShrinkMatchesPil() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    const tl::Image src = tl::load_image(fixture("orange.jpg"));
    QCOMPARE(src.width, 512);
    const tl::Image small = tl::resize(src, 100, 75);
    const auto golden = read_bytes(fixture("orange_pil_bilinear_100x75.u8"));
    QCOMPARE(small.rgb.size(), golden.size());
    const Errors e = compare_to_u8(small.rgb, golden);
    qInfo("orange 512x512 -> 100x75 vs PIL BILINEAR: mean |err| %.3f/255, max %.1f/255", e.mean * 255, e.max * 255);
    // PIL decodes with libjpeg, we with stb; both round differently too.
    // Measured: mean 0.27/255, max 1.1/255.
    QVERIFY2(e.mean <= 1.0 / 255, qPrintable(QString::number(e.mean * 255)));
    QVERIFY2(e.max <= 4.0 / 255, qPrintable(QString::number(e.max * 255)));
    // Without antialiasing (plain bilinear on a 5x shrink) the error is far larger:
    // make sure the comparison would notice.
    tl::Image naive;
    naive.width = 100;
    naive.height = 75;
    for (int y = 0; y < 75; ++y)
      for (int x = 0; x < 100; ++x)
        for (int c = 0; c < 3; ++c)
          naive.rgb.push_back(src.rgb[(size_t(int((y + 0.5) * 512 / 75)) * 512 + size_t(int((x + 0.5) * 512 / 100))) * 3 + c]);
    QVERIFY(compare_to_u8(naive.rgb, golden).mean > 2 * e.mean);
#endif
  }

  void resizeEnlargeMatchesPil() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    const tl::Image big = tl::resize(tl::load_image(fixture("rgb.png")), 11, 7);
    const auto golden = read_bytes(fixture("rgb_pil_bilinear_11x7.u8"));
    QCOMPARE(big.rgb.size(), golden.size());
    const Errors e = compare_to_u8(big.rgb, golden);
    qInfo("rgb 5x4 -> 11x7 vs PIL BILINEAR: mean |err| %.3f/255, max %.3f/255", e.mean * 255, e.max * 255);
    QVERIFY(e.max <= 1.0 / 255);  // lossless source: only PIL's 8-bit rounding differs
#endif
  }

  void preprocessMatchesTorchvisionPipeline() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    const tl::Image src = tl::load_image(fixture("pattern_96x64.png"));
    const std::vector<float> chw = tl::preprocess_imagenet(src, 40, 32, mean, std);
    QCOMPARE(chw.size(), size_t(3 * 32 * 32));
    const auto golden = read_bytes(fixture("pattern_preprocess_32x32.u8"));  // HWC, before Normalize
    double sum = 0, worst = 0;
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 32 * 32; ++i) {
        const double want = (golden[size_t(i) * 3 + size_t(c)] / 255.0 - mean[c]) / std[c];
        const double d = std::fabs(chw[size_t(c) * 1024 + size_t(i)] - want) * std[c];  // back in [0,1] units
        sum += d;
        worst = std::max(worst, d);
      }
    qInfo("preprocess 96x64 -> 60x40 -> crop 32: mean |err| %.3f/255, max %.3f/255", sum / 3072 * 255, worst * 255);
    QVERIFY(sum / 3072 <= 1.0 / 255);
    QVERIFY(worst <= 1.5 / 255);
#endif
  }

  void cropAndChwExact() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    tl::Image img;
    img.width = 5;
    img.height = 4;
    for (int i = 0; i < 5 * 4 * 3; ++i) img.rgb.push_back(float(i) / 64);
    const tl::Image crop = tl::center_crop(img, 3, 2);  // left 1, top 1
    QCOMPARE(crop.width, 3);
    QCOMPARE(crop.height, 2);
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x)
        for (int c = 0; c < 3; ++c)
          QCOMPARE(crop.rgb[size_t((y * 3 + x) * 3 + c)], img.rgb[size_t(((y + 1) * 5 + x + 1) * 3 + c)]);
    const float mean[3] = {0.5f, 0.25f, 0}, std[3] = {2, 4, 0.5f};
    const auto chw = tl::to_chw(crop, mean, std);
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 6; ++i)
        QCOMPARE(chw[size_t(c * 6 + i)], (crop.rgb[size_t(i * 3 + c)] - mean[c]) * (1.0f / std[c]));
    // An identity resize changes nothing.
    QCOMPARE(tl::resize(img, 5, 4).rgb, img.rgb);
    // Bad sizes are argument errors, not crashes.
    QVERIFY_THROWS_EXCEPTION(tl::ShapeError, tl::center_crop(img, 6, 2));
    QVERIFY_THROWS_EXCEPTION(tl::ShapeError, tl::resize(img, 0, 4));
    QVERIFY_THROWS_EXCEPTION(tl::ShapeError, tl::resize(img, 100000, 4));
    QVERIFY_THROWS_EXCEPTION(tl::ShapeError, tl::resize(tl::Image{}, 4, 4));
#endif
  }
  // Issue 47's images: what is not a regular file, OS/2 and top-down BMPs,
  // panoramas.
  void imagesOddFilesAndBmps() {
#ifndef TL_HAVE_IMAGES
    TL_REQUIRE(false, "built without stb_image");
#else
    QTemporaryDir dir;
    const std::string root = dir.path().toStdString();
    // A FIFO named .jpg blocked the read forever; a folder reported 2^63 bytes.
    const std::string fifo = root + "/pipe.jpg", folder = root + "/folder.png";
    QVERIFY(::mkfifo(fifo.c_str(), 0600) == 0);
    QVERIFY(std::filesystem::create_directory(folder));
    QString msg = io_error_of([&] { tl::load_image(fifo); });
    QVERIFY2(msg.contains("not a regular file") && msg.contains("pipe.jpg"), qPrintable(msg));
    msg = io_error_of([&] { tl::load_image(folder); });
    QVERIFY2(msg.contains("not a regular file (a folder)"), qPrintable(msg));

    // A 34-byte OS/2 BMP (12-byte header: 16-bit sizes, bit count at 24)
    // claiming 16384x6103 pixels was read at the Windows offsets and decoded
    // to 1.6 GB of zeros.
    auto le = [](std::vector<uint8_t>& b, uint32_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) b.push_back(uint8_t(v >> (8 * i)));
    };
    std::vector<uint8_t> os2 = {'B', 'M'};
    le(os2, 34, 4), le(os2, 0, 4), le(os2, 26, 4);            // file size, reserved, pixel offset
    le(os2, 12, 4), le(os2, 16384, 2), le(os2, 6103, 2);      // header size, width, height
    le(os2, 1, 2), le(os2, 24, 2);                            // planes, bits
    os2.resize(34, 0);
    write_bytes(root + "/os2.bmp", os2);
    msg = io_error_of([&] { tl::load_image(root + "/os2.bmp"); });
    QVERIFY2(msg.contains("truncated") && msg.contains("16384x6103"), qPrintable(msg));

    // A valid top-down BMP (negative height), 3x2, 24 bits: its first row is
    // the image's top row.
    const int w = 3, h = 2, row = (w * 3 + 3) / 4 * 4;
    std::vector<uint8_t> bmp = {'B', 'M'};
    le(bmp, uint32_t(54 + row * h), 4), le(bmp, 0, 4), le(bmp, 54, 4);
    le(bmp, 40, 4), le(bmp, w, 4), le(bmp, uint32_t(-h), 4);
    le(bmp, 1, 2), le(bmp, 24, 2), le(bmp, 0, 4), le(bmp, uint32_t(row * h), 4);
    le(bmp, 2835, 4), le(bmp, 2835, 4), le(bmp, 0, 4), le(bmp, 0, 4);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) bmp.insert(bmp.end(), {uint8_t(10 * x), uint8_t(100 * y), 255});  // B, G, R
      bmp.resize(bmp.size() + size_t(row - w * 3), 0);
    }
    write_bytes(root + "/topdown.bmp", bmp);
    const tl::Image img = tl::load_image(root + "/topdown.bmp");
    QCOMPARE(img.width, 3);
    QCOMPARE(img.height, 2);
    QCOMPARE(img.rgb[1], 0.0f);                 // top row: green 0
    QCOMPARE(img.rgb[(3 + 2) * 3 + 2], 20 / 255.0f);  // bottom row, third pixel: blue 20
    QCOMPARE(img.rgb[(3 + 2) * 3 + 1], 100 / 255.0f);

    // A panorama of 80:1 failed its resize ("size 25600x256 is outside
    // 1..16384"); its middle is classified as any image's is.
    tl::Image wide;
    wide.width = 2560;
    wide.height = 32;
    wide.rgb.resize(size_t(wide.width) * wide.height * 3);
    for (size_t i = 0; i < wide.rgb.size(); ++i) wide.rgb[i] = 0.25f * float(1 + i % 3);
    const float mean[3] = {0.5f, 0.5f, 0.5f}, stdev[3] = {0.25f, 0.25f, 0.25f};
    const std::vector<float> chw = tl::preprocess_imagenet(wide, 256, 224, mean, stdev);
    QCOMPARE(chw.size(), size_t(3 * 224 * 224));
    for (int c = 0; c < 3; ++c)
      for (size_t i = 0; i < 224 * 224; i += 997)
        QVERIFY(std::abs(chw[size_t(c) * 224 * 224 + i] - (0.25f * float(c + 1) - 0.5f) / 0.25f) < 1e-5f);
#endif
  }
};

QTEST_GUILESS_MAIN(TestIO)
#include "test_io.moc"
