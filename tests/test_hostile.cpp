// Hostile files against the loaders (issue 17): each test builds its file
// here, with the structure a real one has (a torch zip with archive/data.pkl
// and archive/data/<key>, a legacy pickle stream, a safetensors header, a
// JPEG's markers, a PNG's chunks), and checks that the load fails at once
// with an IOError that names the problem, instead of overflowing the stack,
// hanging or taking gigabytes. The limits they hit live in core/io/limits.h.
#include <QtTest/QtTest>

#include <QTemporaryDir>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/host_tensor.h"
#include "core/io/limits.h"
#ifdef TL_HAVE_IMAGES
#include "core/io/image.h"
#endif
#ifdef TL_HAVE_PTH
#include <zip.h>

#include "core/io/pickle.h"
#include "core/io/pth.h"
#endif
#ifdef TL_HAVE_SAFETENSORS
#include "core/io/safetensors.h"
#endif

namespace {

using Bytes = std::vector<uint8_t>;

void put_le(Bytes& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
void put_be(Bytes& b, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) b.push_back(uint8_t(v >> (8 * i)));
}
void append(Bytes& b, const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// The IOError's message, or "<no error>" / "<other: ...>".
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

// One line, short enough to read: what "one clear line" means here.
bool one_clear_line(const QString& msg) { return !msg.startsWith('<') && !msg.contains('\n') && msg.size() < 600; }

#define EXPECT_ERROR(msg, needle)                                                                      \
  do {                                                                                                 \
    QVERIFY2((msg).contains(needle), qPrintable(QString("wanted '%1' in: %2").arg(needle, msg)));      \
    QVERIFY2(one_clear_line(msg), qPrintable("not one clear line: " + (msg).left(2000)));              \
  } while (0)

#ifdef TL_HAVE_PTH
// ---- pickles, opcode by opcode (protocol 2, as torch.save writes them) ----
struct Pickle {
  Bytes b;
  Pickle() { op(0x80).op(2); }  // PROTO 2 (GCC 12 warns of an initializer list here, wrongly)
  Pickle& op(uint8_t code) {
    b.push_back(code);
    return *this;
  }
  Pickle& str(const std::string& s) {
    b.push_back(0x58);  // BINUNICODE
    put_le(b, s.size(), 4);
    append(b, s);
    return *this;
  }
  Pickle& integer(int64_t v) {
    if (v >= 0 && v < (int64_t(1) << 31)) {
      b.push_back(0x4a);  // BININT
      put_le(b, uint64_t(v), 4);
    } else {
      b.push_back(0x8a);  // LONG1, 8 bytes
      b.push_back(8);
      put_le(b, uint64_t(v), 8);
    }
    return *this;
  }
  Pickle& global(const std::string& module, const std::string& name) {
    b.push_back('c');
    append(b, module + "\n" + name + "\n");
    return *this;
  }
  Pickle& tuple(const std::vector<int64_t>& values) {
    op('(');
    for (int64_t v : values) integer(v);
    return op('t');
  }
  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())
  Pickle& tensor(const std::string& storage_key, int64_t storage_numel, const std::vector<int64_t>& size,
                 const std::vector<int64_t>& stride, int64_t offset = 0) {
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(').str("storage").global("torch", "FloatStorage").str(storage_key).str("cpu").integer(storage_numel).op('t');
    op('Q');  // BINPERSID
    integer(offset).tuple(size).tuple(stride);
    op(0x89);  // NEWFALSE
    global("collections", "OrderedDict").op(')').op('R');
    op('t');
    return op('R');
  }
  Bytes done() {
    Bytes out = b;
    out.push_back('.');  // STOP
    return out;
  }
};

// A state dict {key: tensor} for each (key, tensor builder).
Bytes state_dict_pickle(const std::vector<std::pair<std::string, std::function<void(Pickle&)>>>& items) {
  Pickle p;
  p.op('}').op('(');
  for (const auto& [key, build] : items) {
    p.str(key);
    build(p);
  }
  return p.op('u').done();
}

// ---- zip archives, written by hand so the directory can lie ----
uint32_t crc32(const Bytes& data) {
  uint32_t crc = 0xffffffffu;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

struct ZipEntry {
  std::string name;
  Bytes data;
  // What the central directory claims, when it lies; otherwise the truth.
  uint64_t forged_size = 0, forged_comp_size = 0;
  // Point the directory entry at an earlier entry's record instead of a new one.
  int alias_of = -1;
};

// A stored (uncompressed) zip, as torch writes it.
Bytes make_zip(const std::vector<ZipEntry>& entries) {
  Bytes out;
  std::vector<uint32_t> offsets, crcs;
  for (const ZipEntry& e : entries) {
    if (e.alias_of >= 0) {
      offsets.push_back(offsets[size_t(e.alias_of)]);
      crcs.push_back(crcs[size_t(e.alias_of)]);
      continue;
    }
    crcs.push_back(crc32(e.data));
    offsets.push_back(uint32_t(out.size()));
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);  // version needed
    put_le(out, 0, 2);   // flags
    put_le(out, 0, 2);   // stored
    put_le(out, 0, 4);   // time, date
    put_le(out, crcs.back(), 4);
    put_le(out, e.data.size(), 4);
    put_le(out, e.data.size(), 4);
    put_le(out, e.name.size(), 2);
    put_le(out, 0, 2);
    append(out, e.name);
    out.insert(out.end(), e.data.begin(), e.data.end());
  }
  const uint32_t directory = uint32_t(out.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const ZipEntry& e = entries[i];
    const ZipEntry& real = e.alias_of >= 0 ? entries[size_t(e.alias_of)] : e;
    put_le(out, 0x02014b50, 4);
    put_le(out, 20, 2);
    put_le(out, 20, 2);
    put_le(out, 0, 2);
    put_le(out, 0, 2);
    put_le(out, 0, 4);
    put_le(out, crcs[i], 4);
    put_le(out, e.forged_comp_size ? e.forged_comp_size : real.data.size(), 4);
    put_le(out, e.forged_size ? e.forged_size : real.data.size(), 4);
    put_le(out, e.name.size(), 2);
    put_le(out, 0, 2);  // extra
    put_le(out, 0, 2);  // comment
    put_le(out, 0, 2);  // disk
    put_le(out, 0, 2);  // internal attributes
    put_le(out, 0, 4);  // external attributes
    put_le(out, offsets[i], 4);
    append(out, e.name);
  }
  const uint32_t directory_size = uint32_t(out.size()) - directory;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, entries.size(), 2);
  put_le(out, entries.size(), 2);
  put_le(out, directory_size, 4);
  put_le(out, directory, 4);
  put_le(out, 0, 2);
  return out;
}

// A zip written by libzip with deflated records (for the compression bombs).
void write_deflated_zip(const std::string& path, const std::vector<std::pair<std::string, const Bytes*>>& records) {
  int error = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  QVERIFY(z);
  for (const auto& [name, data] : records) {
    zip_source_t* src = zip_source_buffer(z, data->data(), data->size(), 0);
    QVERIFY(src);
    const zip_int64_t index = zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE);
    QVERIFY(index >= 0);
    QCOMPARE(zip_set_file_compression(z, zip_uint64_t(index), ZIP_CM_DEFLATE, 9), 0);
  }
  QCOMPARE(zip_close(z), 0);
}

Bytes floats(size_t count) { return Bytes(count * 4, 0); }

// The legacy layout: magic, protocol, sys_info, the object, the storage keys, the raw storages.
Bytes legacy_file(const Bytes& object, const std::vector<std::pair<std::string, Bytes>>& storages) {
  Bytes out;
  Pickle magic;
  magic.op(0x8a).op(10);
  for (uint8_t byte : {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}) magic.op(byte);
  for (const Bytes& part : {magic.done(), Pickle().integer(1001).done(), Pickle().op('}').done()})
    out.insert(out.end(), part.begin(), part.end());
  out.insert(out.end(), object.begin(), object.end());
  Pickle keys;
  keys.op(']').op('(');
  for (const auto& [key, data] : storages) keys.str(key);
  const Bytes key_list = keys.op('e').done();
  out.insert(out.end(), key_list.begin(), key_list.end());
  for (const auto& [key, data] : storages) {
    put_le(out, data.size() / 4, 8);
    out.insert(out.end(), data.begin(), data.end());
  }
  return out;
}
#endif

#ifdef TL_HAVE_SAFETENSORS
Bytes safetensors_file(const std::string& header, size_t data_bytes) {
  Bytes out;
  put_le(out, header.size(), 8);
  append(out, header);
  out.resize(out.size() + data_bytes);
  return out;
}
#endif

}  // namespace

class TestHostile : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::string path(const char* name) { return dir_.filePath(name).toStdString(); }

 private slots:
  // ------------------------------------------------------------- safetensors

  void safetensorsDeepShapeIsRefusedNotDumped() {
#ifndef TL_HAVE_SAFETENSORS
    QSKIP("built without nlohmann-json");
#else
    // A 10 KB file whose shape nests 5,000 deep: dumping it in the error
    // path used to recurse 5,000 frames per level of nlohmann's dump().
    const std::string deep = std::string(5000, '[') + std::string(5000, ']');
    const std::string p = path("deep.safetensors");
    write_bytes(p, safetensors_file(R"({"w":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,4]}})", 4));
    const QString msg = io_error_of([&] { tl::load_safetensors(p); });
    EXPECT_ERROR(msg, "deeper than 200 levels");
    QVERIFY(msg.contains("deep.safetensors"));
#endif
  }

  void safetensorsWrongShapePrintsASummary() {
#ifndef TL_HAVE_SAFETENSORS
    QSKIP("built without nlohmann-json");
#else
    // A shape of 100,000 entries with one bad one: the message shows a few.
    std::string shape = "[";
    for (int i = 0; i < 100000; ++i) shape += (i ? ",1" : "[[1]]");
    shape += "]";
    const QString msg = io_error_of([&] {
      tl::load_safetensors_bytes(safetensors_file(R"({"w":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,4]}})", 4),
                                 "long.safetensors");
    });
    EXPECT_ERROR(msg, "more than the 64 dimensions");
    QVERIFY2(msg.contains("[[...], 1, 1, 1, 1, 1, 1, 1, ... (100000 items)]"), qPrintable(msg));
    // Inside the rank limit, a non-integer entry is shown the same way.
    const QString nested = io_error_of([&] {
      tl::load_safetensors_bytes(safetensors_file(R"({"w":{"dtype":"F32","shape":[1,[[[2]]]],"data_offsets":[0,4]}})", 4),
                                 "nested.safetensors");
    });
    EXPECT_ERROR(nested, "shape [1, [...]] has a non-integer or negative size");
    // A megabyte-long key and dtype are cut in the message.
    const std::string key(1 << 20, 'k'), dtype(1 << 20, 'D');
    const QString long_names = io_error_of([&] {
      tl::load_safetensors_bytes(
          safetensors_file("{\"" + key + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
          "names.safetensors");
    });
    EXPECT_ERROR(long_names, "unsupported dtype 'DDDD");
    QVERIFY2(long_names.contains("kkk...': "), qPrintable(long_names.left(300)));
#endif
  }

  void safetensorsMetadataBomb() {
#ifndef TL_HAVE_SAFETENSORS
    QSKIP("built without nlohmann-json");
#else
    // __metadata__ full of empty objects (the issue's was 90 MB: 6.5 s, 3 GB).
    std::string meta = R"({"__metadata__":{)";
    for (int i = 0; i < 200000; ++i) meta += "\"k" + std::to_string(i) + "\":{},";
    meta += R"("end":""},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
    QString msg = io_error_of([&] { tl::load_safetensors_bytes(safetensors_file(meta, 4), "meta.safetensors"); });
    EXPECT_ERROR(msg, "__metadata__ must map strings to strings; it holds a nested object");
    msg = io_error_of([&] {
      tl::load_safetensors_bytes(safetensors_file(R"({"__metadata__":{"n":1},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
                                 "meta.safetensors");
    });
    EXPECT_ERROR(msg, "non-string value");
    // The format's own metadata still loads.
    const tl::StateDict sd = tl::load_safetensors_bytes(
        safetensors_file(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
        "ok.safetensors");
    QCOMPARE(sd.size(), size_t(1));
#endif
  }

  void loadBudgetArithmetic() {
    {
    tl::io::LoadBudget budget(1000);
    QVERIFY(budget.try_take(budget.budget()));
    QVERIFY(!budget.try_take(1));
    const QString msg = io_error_of([&] { budget.take(10, "test allocation"); });
    EXPECT_ERROR(msg, "test allocation would need 10 bytes, more than the 0 left of the");
    budget.give(100);
    QVERIFY(budget.try_take(100));
    }
    // The error says how to load a file the user trusts; trusting lifts the
    // per-file budget to the absolute cap, and only that.
    tl::io::LoadLimits limits;
    QCOMPARE(tl::io::load_budget(1000, limits), 4000 + (uint64_t(64) << 20));
    QCOMPARE(tl::io::load_budget(uint64_t(4) << 30, limits), limits.max_total_bytes);
    limits.trust_files = true;
    QCOMPARE(tl::io::load_budget(1000, limits), limits.max_total_bytes);
    limits.max_total_bytes = 12345;
    QCOMPARE(tl::io::load_budget(1000, limits), uint64_t(12345));
    const QString remedy = io_error_of([] { tl::io::check_load_budget(uint64_t(1) << 30, 10, "a test load"); });
    EXPECT_ERROR(remedy, "a test load would need 1073741824 bytes, more than the");
    EXPECT_ERROR(remedy, "for a file you trust, TINYLENS_TRUST_FILES=1 allows up to the absolute cap");
  }

  // --------------------------------------------------------------- .pth

  void pthMemoCycleIsWalkedOnce() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    // A list appended to itself 16 times through the memo, inside the state
    // dict: a walk that follows every reference takes 16^depth steps.
    Pickle p;
    p.op('}').op('(').str("loop").op(']').op('q').op(0);  // EMPTY_LIST, BINPUT 0
    for (int i = 0; i < 16; ++i) p.op('h').op(0).op('a');  // BINGET 0, APPEND
    p.str("w").tensor("0", 1, {1}, {1});
    const Bytes pkl = p.op('u').done();
    // Legacy layout: every reachable storage is looked up, so the walk runs.
    const Bytes legacy = legacy_file(pkl, {{"0", floats(1)}});
    const tl::StateDict sd = tl::load_pth_bytes(legacy, "cycle.pth");
    QCOMPARE(sd.size(), size_t(1));
    // Zip layout, same object.
    const Bytes zip = make_zip({{"archive/data.pkl", pkl}, {"archive/data/0", floats(1)}});
    QCOMPARE(tl::load_pth_bytes(zip, "cycle_zip.pth").size(), size_t(1));
#endif
  }

  void pthDeepNestingIsRefused() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    // 100,000 lists each inside the one before (built without MARKs).
    Pickle p;
    p.op('}').op('(').str("deep");
    for (int i = 0; i < 100000; ++i) p.op(']');
    for (int i = 0; i < 99999; ++i) p.op('a');
    const Bytes legacy = legacy_file(p.op('u').done(), {});
    const QString msg = io_error_of([&] { tl::load_pth_bytes(legacy, "deep.pth"); });
    EXPECT_ERROR(msg, "nested deeper than 200");
    // MARKs nested as deep: refused by the pickle reader itself.
    Pickle marks;
    for (int i = 0; i < 100000; ++i) marks.op('(');
    const QString mark_msg = io_error_of([&] { tl::load_pth_bytes(legacy_file(marks.done(), {}), "marks.pth"); });
    EXPECT_ERROR(mark_msg, "MARKs nested deeper than 200");
#endif
  }

  void pthStrideZeroPastTheBudget_data() {
    QTest::addColumn<qint64>("elements");
    QTest::newRow("2^28 elements (1 GiB)") << (qint64(1) << 28);
    QTest::newRow("2^34 elements (64 GiB)") << (qint64(1) << 34);
  }
  void pthStrideZeroPastTheBudget() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    QFETCH(qint64, elements);
    // One float viewed 'elements' times with stride 0: legal, and the bytes
    // to materialise are far more than the file holds.
    const Bytes pkl = state_dict_pickle({{"w", [&](Pickle& p) { p.tensor("0", 1, {elements}, {0}); }}});
    const Bytes zip = make_zip({{"archive/data.pkl", pkl}, {"archive/data/0", floats(1)}});
    QVERIFY(zip.size() < 1000);
    const QString msg = io_error_of([&] { tl::load_pth_bytes(zip, "stride0.pth"); });
    EXPECT_ERROR(msg, "tensor 'w' (size (" + QString::number(elements) + ",), stride (0,)) would need " +
                          QString::number(elements * 4) + " bytes, more than the");
    // A small stride-0 tensor is fine: materialised within the budget.
    const Bytes small = make_zip({{"archive/data.pkl", state_dict_pickle({{"w", [](Pickle& p) {
                                                                             p.tensor("0", 1, {3, 4}, {0, 0});
                                                                           }}})},
                                  {"archive/data/0", floats(1)}});
    QCOMPARE(tl::load_pth_bytes(small, "small.pth").at("w").data.size(), size_t(12));
#endif
  }

  void pthOneStorageUnderManyKeys() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    // 2,000 keys share one deflated 4 MiB storage: a 30 KB file asking for 8 GB.
    const size_t numel = size_t(1) << 20;
    std::vector<std::pair<std::string, std::function<void(Pickle&)>>> items;
    for (int i = 0; i < 2000; ++i)
      items.emplace_back("layer" + std::to_string(i) + ".weight",
                         [&](Pickle& p) { p.tensor("0", int64_t(numel), {int64_t(numel)}, {1}); });
    const Bytes pkl = state_dict_pickle(items), storage = floats(numel);
    const std::string p = path("shared.pth");
    write_deflated_zip(p, {{"archive/data.pkl", &pkl}, {"archive/data/0", &storage}});
    QVERIFY(read_bytes(p).size() < 100000);
    const QString msg = io_error_of([&] { tl::load_pth(p); });
    EXPECT_ERROR(msg, "would need");
    QVERIFY2(msg.contains("tensor 'layer") && msg.contains("more than the"), qPrintable(msg));
#endif
  }

  void pthZipEntriesAliasingOneRecord() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    // 64 directory entries pointing at one 16 MiB record.
    std::vector<std::pair<std::string, std::function<void(Pickle&)>>> items;
    const int64_t numel = int64_t(1) << 22;
    for (int i = 0; i < 64; ++i)
      items.emplace_back("w" + std::to_string(i), [&, i](Pickle& p) { p.tensor(std::to_string(i), numel, {numel}, {1}); });
    std::vector<ZipEntry> entries = {{"archive/data.pkl", state_dict_pickle(items)}, {"archive/data/0", floats(size_t(numel))}};
    for (int i = 1; i < 64; ++i) {
      ZipEntry alias;
      alias.name = "archive/data/" + std::to_string(i);
      alias.alias_of = 1;
      entries.push_back(alias);
    }
    const Bytes zip = make_zip(entries);
    const QString msg = io_error_of([&] { tl::load_pth_bytes(zip, "alias.pth"); });
    EXPECT_ERROR(msg, "would need");
    QVERIFY2(msg.contains("more than the") && msg.contains("alias.pth"), qPrintable(msg));
#endif
  }

  // Two records or header keys of one name: a reader's lookup found one of
  // them (the last, for JSON), silently. Now the file is refused, naming it.
  void duplicateNamesAreRefused() {
    const QString st = io_error_of([&] {
      tl::load_safetensors_bytes(
          safetensors_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
          "twice.safetensors");
    });
    EXPECT_ERROR(st, "tensor 'w' appears twice in the header");
    EXPECT_ERROR(st, "twice.safetensors");
#ifdef TL_HAVE_PTH
    const Bytes pkl = state_dict_pickle({{"w", [](Pickle& p) { p.tensor("0", 1, {1}, {1}); }}});
    Bytes one = floats(1), other = floats(1);
    other[3] = 0x3f;
    const QString pth = io_error_of([&] {
      tl::load_pth_bytes(make_zip({{"archive/data.pkl", pkl}, {"archive/data/0", one}, {"archive/data/0", other}}),
                         "twice.pth");
    });
    EXPECT_ERROR(pth, "checkpoint 'twice.pth': the zip archive holds two records named 'archive/data/0'");
#endif
  }

  void pthForgedZipSizes() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    const Bytes pkl = state_dict_pickle({{"w", [](Pickle& p) { p.tensor("0", 4, {4}, {1}); }}});
    // The directory claims 4 GiB for a 16-byte stored record (0xffffffff
    // would mean "see the zip64 field", which libzip checks itself).
    ZipEntry storage{"archive/data/0", floats(4)};
    storage.forged_size = storage.forged_comp_size = 0xfffffff0u;
    QString msg = io_error_of([&] { tl::load_pth_bytes(make_zip({{"archive/data.pkl", pkl}, storage}), "forged.pth"); });
    EXPECT_ERROR(msg, "record 'archive/data/0' claims 4294967280 compressed bytes, more than the whole");
    // Only the uncompressed size forged: a stored record cannot grow.
    storage.forged_comp_size = 0;
    msg = io_error_of([&] { tl::load_pth_bytes(make_zip({{"archive/data.pkl", pkl}, storage}), "forged.pth"); });
    EXPECT_ERROR(msg, "is stored uncompressed but claims 4294967280 bytes in 16");
    // The pickle's own record, deflated, claiming 4 GiB: patch libzip's
    // directory entry of a real deflated archive.
    const std::string p = path("forged_deflate.pth");
    const Bytes data = floats(4);
    write_deflated_zip(p, {{"archive/data.pkl", &pkl}, {"archive/data/0", &data}});
    Bytes zip = read_bytes(p);
    size_t patched = 0;
    for (size_t i = 0; i + 46 < zip.size(); ++i)
      if (zip[i] == 0x50 && zip[i + 1] == 0x4b && zip[i + 2] == 1 && zip[i + 3] == 2) {
        for (int k = 0; k < 4; ++k) zip[i + 24 + size_t(k)] = k ? 0xff : 0xf0;  // uncompressed size
        ++patched;
      }
    QCOMPARE(patched, size_t(2));
    msg = io_error_of([&] { tl::load_pth_bytes(zip, "forged_deflate.pth"); });
    EXPECT_ERROR(msg, "claims 4294967280 bytes");
#endif
  }

  void pthEmptyListBomb() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    // 32 MiB of EMPTY_LIST opcodes deflate to ~32 KB; built, they were > 5 GB.
    Pickle p;
    p.b.resize(p.b.size() + (size_t(32) << 20), ']');
    const Bytes pkl = p.done();
    const std::string file = path("lists.pth");
    write_deflated_zip(file, {{"archive/data.pkl", &pkl}});
    QVERIFY(read_bytes(file).size() < 200000);
    const QString msg = io_error_of([&] { tl::load_pth(file); });
    EXPECT_ERROR(msg, "its objects would need more than the");
    QVERIFY2(msg.contains("lists.pth"), qPrintable(msg));
#endif
  }

  void pickleOpcodeAndRankLimits() {
#ifndef TL_HAVE_PTH
    QSKIP("built without libzip");
#else
    // A tensor of 65 dimensions.
    const Bytes pkl = state_dict_pickle({{"w", [](Pickle& p) {
                                           p.tensor("0", 1, std::vector<int64_t>(65, 1), std::vector<int64_t>(65, 1));
                                         }}});
    const QString msg = io_error_of([&] { tl::pickle::load(pkl.data(), pkl.size(), "rank.pkl"); });
    EXPECT_ERROR(msg, "tensor size has 65 dimensions, more than the 64");
#endif
  }

  // ------------------------------------------------------------------ images

  void jpegHuffmanCountsPastTheEnd() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // SOI, then a DHT whose 16 counts run past the end of a 9-byte file: the
    // two that are there already add up to 510 symbols (stb reads zeros for
    // the rest and used to index its 257-entry table at 257).
    const Bytes jpeg = {0xff, 0xd8, 0xff, 0xc4, 0x00, 0x03, 0x00, 0xff, 0xff};
    QString msg = io_error_of([&] { tl::decode_image(jpeg, "nine.jpg"); });
    EXPECT_ERROR(msg, "Huffman table with 510 symbols");
    // stb skips 0xFF fill bytes before SOI, so this is a JPEG too (found by fuzz_image).
    const Bytes filled = {0xff, 0xff, 0xff, 0xd8, 0xff, 0xc4, 0x00, 0x03, 0x00, 0xff, 0xff};
    msg = io_error_of([&] { tl::decode_image(filled, "filled.jpg"); });
    EXPECT_ERROR(msg, "Huffman table with 510 symbols");
    // A DHT segment longer than the file, with sane counts: truncated.
    const Bytes cut = {0xff, 0xd8, 0xff, 0xc4, 0x00, 0x20, 0x00, 0x01, 0x00};
    msg = io_error_of([&] { tl::decode_image(cut, "cut.jpg"); });
    EXPECT_ERROR(msg, "corrupt or truncated JPEG (segment 0xFFC4 at byte 2 needs 32 bytes");
#endif
  }

  void pnmHeaderNumberOverflow() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // stb reads the width digit by digit into an int (found by fuzz_image).
    Bytes pnm;
    append(pnm, "P6\n# comment\n" + std::string(30, '8') + " 1\n255\n");
    const QString msg = io_error_of([&] { tl::decode_image(pnm, "long.ppm"); });
    EXPECT_ERROR(msg, "corrupt PNM header (number 8888888888 is too large)");
#endif
  }

  void pnm16BitGreyDecodes() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // A 16-bit grey PGM: stb's 3-channel conversion of it returned 8-bit
    // samples, and reading them as 16-bit overran the buffer (found by fuzz_image).
    Bytes pgm;
    append(pgm, "P5\n2 4\n2422\n");
    for (int i = 0; i < 8; ++i) put_be(pgm, uint64_t(i) * 300, 2);
    const tl::Image img = tl::decode_image(pgm, "deep.pgm");
    QCOMPARE(img.width, 2);
    QCOMPARE(img.height, 4);
    QCOMPARE(img.rgb.size(), size_t(24));
    for (size_t i = 0; i < 8; ++i) {
      QCOMPARE(img.rgb[i * 3], img.rgb[i * 3 + 1]);
      QCOMPARE(img.rgb[i * 3], img.rgb[i * 3 + 2]);
    }
    QVERIFY(img.rgb[21] > img.rgb[3]);
#endif
  }

  void pngEmptyFirstIdatDecodes() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // A legal 2x1 grey PNG whose first IDAT is empty (stb passed NULL to memcpy).
    auto chunk = [](Bytes& png, const char* type, const Bytes& data) {
      put_be(png, data.size(), 4);
      Bytes typed(type, type + 4);
      typed.insert(typed.end(), data.begin(), data.end());
      png.insert(png.end(), typed.begin(), typed.end());
      put_be(png, crc32(typed), 4);
    };
    Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    Bytes ihdr;
    put_be(ihdr, 2, 4);
    put_be(ihdr, 1, 4);
    for (uint8_t v : {8, 0, 0, 0, 0}) ihdr.push_back(v);  // 8-bit grey, no interlace
    chunk(png, "IHDR", ihdr);
    chunk(png, "IDAT", {});
    // zlib stream with one stored block holding the row: filter 0, pixels 0 and 255.
    const Bytes row = {0, 0, 255};
    Bytes z = {0x78, 0x01, 0x01};
    put_le(z, row.size(), 2);
    put_le(z, uint16_t(~row.size()), 2);
    z.insert(z.end(), row.begin(), row.end());
    uint32_t a = 1, b = 0;
    for (uint8_t v : row) {
      a = (a + v) % 65521;
      b = (b + a) % 65521;
    }
    put_be(z, b << 16 | a, 4);
    chunk(png, "IDAT", z);
    chunk(png, "IDAT", {});
    chunk(png, "IEND", {});
    const tl::Image img = tl::decode_image(png, "empty_idat.png");
    QCOMPARE(img.width, 2);
    QCOMPARE(img.height, 1);
    QCOMPARE(img.rgb, (std::vector<float>{0, 0, 0, 1, 1, 1}));
    // Cut right after an empty IDAT's header: an error, not UB.
    Bytes cut(png.begin(), png.begin() + 8 + 25 + 8);
    const QString msg = io_error_of([&] { tl::decode_image(cut, "cut.png"); });
    QVERIFY2(msg.contains("cut.png") && one_clear_line(msg), qPrintable(msg));
#endif
  }

  void jpegScanWithUndefinedHuffmanTable() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // A real JPEG whose scan names DC table 3, never defined: stb decoded
    // with uninitialised tables (found by fuzz_image, out-of-bounds index).
    Bytes jpeg = read_bytes(std::string(TL_SOURCE_DIR) + "/tests/data/io/blocks.jpg");
    size_t sos = 0;
    for (size_t i = 2; i + 6 < jpeg.size() && !sos; ++i)
      if (jpeg[i] == 0xff && jpeg[i + 1] == 0xda) sos = i;
    QVERIFY(sos > 0);
    QVERIFY(tl::decode_image(jpeg, "fine.jpg").width == 16);
    jpeg[sos + 6] = 0x30;  // first component: DC table 3, AC table 0
    const QString msg = io_error_of([&] { tl::decode_image(jpeg, "undefined.jpg"); });
    EXPECT_ERROR(msg, "uses Huffman DC table 3, which is not defined before it");
#endif
  }

  void jpegDeclaringMoreThanTheFileHolds() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // A real 16x16 JPEG of 657 bytes whose SOF0 now declares 16384x6103:
    // stb would pad the missing scan data and return 1.5 GB of floats.
    Bytes jpeg = read_bytes(std::string(TL_SOURCE_DIR) + "/tests/data/io/blocks.jpg");
    QVERIFY(jpeg.size() > 200);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < jpeg.size() && !sof; ++i)
      if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) sof = i;
    QVERIFY(sof > 0);
    jpeg[sof + 5] = 6103 >> 8;
    jpeg[sof + 6] = 6103 & 0xff;
    jpeg[sof + 7] = 16384 >> 8;
    jpeg[sof + 8] = 16384 & 0xff;
    const QString msg = io_error_of([&] { tl::decode_image(jpeg, "huge.jpg"); });
    EXPECT_ERROR(msg, "corrupt or truncated image data (a 16384x6103 JPEG needs at least 195296 bytes, the file has");
#endif
  }

  void pngAndGifDeclaringMoreThanTheFileHolds() {
#ifndef TL_HAVE_IMAGES
    QSKIP("built without stb_image");
#else
    // 10000x10000 RGB from 6 bytes of IDAT.
    Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    put_be(png, 10000, 4);
    put_be(png, 10000, 4);
    for (uint8_t v : {8, 2, 0, 0, 0, 0, 0, 0, 0}) png.push_back(v);
    put_be(png, 6, 4);
    append(png, "IDAT");
    for (uint8_t v : {0x78, 0x01, 0x03, 0x00, 0, 0, 0, 0, 0, 0}) png.push_back(v);
    QString msg = io_error_of([&] { tl::decode_image(png, "huge.png"); });
    EXPECT_ERROR(msg, "a 10000x10000 PNG needs at least");
    // GIF89a, 10000x10000, then almost nothing.
    Bytes gif;
    append(gif, "GIF89a");
    put_le(gif, 10000, 2);
    put_le(gif, 10000, 2);
    for (uint8_t v : {0x00, 0, 0, 0x2c, 0, 0, 0, 0}) gif.push_back(v);
    put_le(gif, 10000, 2);
    put_le(gif, 10000, 2);
    for (uint8_t v : {0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b}) gif.push_back(v);
    // An IDAT chunk claiming 1 GB in a tiny file: stb grew its buffer to that
    // before reading (found by fuzz_image as a 2 GB allocation).
    Bytes forged(png.begin(), png.begin() + 33);
    put_be(forged, 0x40400000, 4);
    append(forged, "IDAT");
    for (uint8_t v : {0x78, 0x01, 0x03, 0x00, 0, 0, 0, 0}) forged.push_back(v);
    msg = io_error_of([&] { tl::decode_image(forged, "forged.png"); });
    EXPECT_ERROR(msg, "corrupt or truncated PNG (chunk 'IDAT' at byte 33 declares 1077936128 bytes");
    msg = io_error_of([&] { tl::decode_image(gif, "huge.gif"); });
    EXPECT_ERROR(msg, "a 10000x10000 GIF needs at least");
#endif
  }
};

QTEST_GUILESS_MAIN(TestHostile)
#include "test_hostile.moc"
