#include "core/io/image.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "core/io/limits.h"

// Only the formats we document: fewer decoders, less attack surface.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_TGA
#define STBI_ONLY_PNM
// No STBI_MAX_DIMENSIONS here: stb would then refuse big PNGs in info() as
// "unknown image type", hiding the size; our own limit below names it, and
// stb's default (2^24 per side) still guards its arithmetic.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace tl {

namespace {

std::string size_str(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

IOError too_large(const std::string& name, int64_t w, int64_t h) {
  return IOError("image '" + name + "' is too large: " + size_str(w, h) + " pixels (limit " +
                 std::to_string(kMaxImageSide) + " per side and " + std::to_string(kMaxImagePixels / 1'000'000) +
                 " megapixels)");
}

IOError decode_error(const std::string& name) {
  // stb's reasons are terse ("outofdata", "bad huffman code") and for
  // truncated PNG chunks even a cut-off chunk name, so say what they mean.
  return IOError("cannot decode image '" + name + "': corrupt or truncated image data (stb_image: " +
                 stbi_failure_reason() + ")");
}

void check_size(int w, int h, const char* what) {
  if (w < 1 || h < 1 || w > kMaxImageSide || h > kMaxImageSide || int64_t(w) * h > kMaxImagePixels)
    throw ShapeError(std::string(what) + ": size " + size_str(w, h) + " is outside 1.." +
                     std::to_string(kMaxImageSide) + " per side / " + std::to_string(kMaxImagePixels) + " pixels");
}

uint32_t le16(const std::vector<uint8_t>& b, size_t at) { return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8; }
uint32_t le32(const std::vector<uint8_t>& b, size_t at) { return le16(b, at) | le16(b, at + 2) << 16; }

// Where a JPEG's data starts after its SOI marker, or 0 when stb would not
// take the bytes for a JPEG. stb skips any number of 0xFF fill bytes before a
// marker, so "FF FF FF D8" is a JPEG to it too, and must be one to our checks.
size_t jpeg_start(const std::vector<uint8_t>& b) {
  if (b.empty() || b[0] != 0xff) return 0;
  size_t pos = 1;
  while (pos < b.size() && b[pos] == 0xff) ++pos;
  return pos < b.size() && b[pos] == 0xd8 ? pos + 1 : 0;
}

// stb reads the numbers of a PNM header into an int digit by digit, and
// overflows (undefined behaviour) on a long one; refuse any number that does
// not fit, reading the header the way stb does (whitespace, # comments).
void check_pnm_header(const std::vector<uint8_t>& b, const std::string& name) {
  if (b.size() < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6')) return;
  size_t pos = 2;
  for (int field = 0; field < 3; ++field) {
    while (pos < b.size() && (std::isspace(b[pos]) || b[pos] == '#')) {
      if (b[pos] == '#')
        while (pos < b.size() && b[pos] != '\n' && b[pos] != '\r') ++pos;
      else
        ++pos;
    }
    const size_t start = pos;
    uint64_t value = 0;
    while (pos < b.size() && std::isdigit(b[pos])) {
      value = value * 10 + uint64_t(b[pos++] - '0');
      if (value > uint64_t(std::numeric_limits<int>::max()))
        throw IOError("cannot decode image '" + name + "': corrupt PNM header (number " +
                      io::clip(std::string(b.begin() + std::ptrdiff_t(start), b.begin() + std::ptrdiff_t(pos)), 20) +
                      " is too large)");
    }
  }
}

// stb_image reads past the end of a BMP, TGA or PNM as zeros (or, for PNM,
// leaves the rest uninitialised) instead of failing, so for these formats we
// check that the pixel data is all there before decoding. PNG, JPEG and GIF
// detect truncation themselves.
void check_complete(const std::vector<uint8_t>& b, int w, int h, const std::string& name) {
  auto truncated = [&](uint64_t need) {
    throw IOError("cannot decode image '" + name + "': file is truncated (needs at least " + std::to_string(need) +
                  " bytes for " + size_str(w, h) + " pixels, has " + std::to_string(b.size()) + ")");
  };
  const uint64_t pixels = uint64_t(w) * uint64_t(h);
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') {
    if (b.size() < 26) truncated(26);
    // OS/2's 12-byte header keeps the bit count at 24 and has no compression;
    // the later Windows headers keep both at 28 and 30.
    const bool os2 = le32(b, 14) == 12;
    if (!os2 && b.size() < 34) truncated(34);
    const uint32_t bpp = os2 ? le16(b, 24) : le16(b, 28), compression = os2 ? 0 : le32(b, 30), offset = le32(b, 10);
    if (bpp == 0 || bpp > 32)
      throw IOError("cannot decode image '" + name + "': corrupt BMP header (" + std::to_string(bpp) + " bits a pixel)");
    if (compression == 0 || compression == 3 || compression == 6) {  // uncompressed rows
      const uint64_t row = (uint64_t(w) * bpp + 31) / 32 * 4;
      if (uint64_t(offset) + row * uint64_t(h) > b.size()) truncated(uint64_t(offset) + row * uint64_t(h));
    }
    return;
  }
  if (b.size() >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) {
    size_t pos = 2;
    uint64_t fields[3] = {0, 0, 0};
    for (uint64_t& field : fields) {
      while (pos < b.size() && (std::isspace(b[pos]) || b[pos] == '#')) {
        if (b[pos] == '#')
          while (pos < b.size() && b[pos] != '\n') ++pos;
        else
          ++pos;
      }
      while (pos < b.size() && std::isdigit(b[pos]) && field < (uint64_t(1) << 32))
        field = field * 10 + uint64_t(b[pos++] - '0');
    }
    ++pos;  // the single whitespace byte before the samples
    const uint64_t need = pos + pixels * (b[1] == '6' ? 3 : 1) * (fields[2] > 255 ? 2 : 1);
    if (need > b.size()) truncated(need);
    return;
  }
  const bool known_magic = (b.size() >= 8 && b[0] == 0x89 && b[1] == 'P') ||
                           jpeg_start(b) != 0 ||
                           (b.size() >= 4 && b[0] == 'G' && b[1] == 'I' && b[2] == 'F');
  if (known_magic) return;
  if (b.size() < 18) truncated(18);
  // TGA has no magic; stb tried it last, so this is one.
  const uint32_t id_len = b[0], colormap_type = b[1], type = b[2];
  const uint32_t colormap_len = le16(b, 5), colormap_bits = b[7], bits = b[16];
  const uint64_t pixel_bytes = (bits + 7) / 8;
  uint64_t pos = 18 + id_len + (colormap_type ? uint64_t(colormap_len) * ((colormap_bits + 7) / 8) : 0);
  if (type == 1 || type == 2 || type == 3) {
    if (pos + pixels * pixel_bytes > b.size()) truncated(pos + pixels * pixel_bytes);
  } else if (type == 9 || type == 10 || type == 11) {
    // Walk the run-length packets: a header byte, then one pixel repeated or
    // `count` literal pixels.
    uint64_t done = 0;
    while (done < pixels) {
      if (pos >= b.size()) truncated(pos + 1);
      const uint8_t packet = b[pos++];
      const uint64_t count = (packet & 0x7f) + 1u;
      pos += (packet & 0x80) ? pixel_bytes : count * pixel_bytes;
      done += count;
    }
    if (pos > b.size()) truncated(pos);
  }
}

// Debian 12's stb_image (2022-09 snapshot) trusts the symbol counts of a
// JPEG Huffman table: more than 256 symbols write past its fixed tables (a
// heap overflow, fixed upstream later). Walk the markers the way stb reads
// them and refuse such tables before stb sees them. stb reads a DHT segment's
// tables until their sizes add up to the segment length, whatever the bytes
// left in the file (zeros past the end), so the walk does the same; a marker
// segment running past the end of the file is refused as truncated.
// Progressive JPEGs define tables between scans, so the walk continues
// through the entropy-coded data.
//
// stb also decodes a scan with whatever Huffman table its header names,
// defined or not (an undefined one is uninitialised memory, and decoding
// with it indexes out of bounds), so every table a scan uses must have been
// defined before it: baseline scans use their DC and AC tables, progressive
// DC-first scans the DC table, progressive AC scans the AC table.
void check_jpeg_tables(const std::vector<uint8_t>& b, const std::string& name) {
  auto at = [&](size_t i) -> uint32_t { return i < b.size() ? b[i] : 0; };
  auto corrupt = [&](const std::string& why) {
    return IOError("cannot decode image '" + name + "': corrupt or truncated JPEG (" + why + ")");
  };
  bool defined[2][4] = {};  // [DC, AC][table id]
  bool progressive = false;
  size_t pos = jpeg_start(b);
  while (pos + 1 < b.size()) {
    if (b[pos] != 0xff) {  // entropy-coded data
      ++pos;
      continue;
    }
    const uint8_t marker = b[pos + 1];
    if (marker == 0xff) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {  // stuffing, TEM, RSTn, SOI
      pos += 2;
      continue;
    }
    if (marker == 0xd9) return;  // EOI
    const size_t length = size_t(at(pos + 2)) << 8 | at(pos + 3);
    const size_t end = pos + 2 + length;
    char where[64];
    std::snprintf(where, sizeof where, "segment 0xFF%02X at byte %zu", marker, pos);
    if (length < 2) throw corrupt(std::string(where) + " has length " + std::to_string(length));
    if (end > b.size())
      throw corrupt(std::string(where) + " needs " + std::to_string(length) + " bytes but the file ends after " +
                    std::to_string(b.size() - pos - 2));
    if (marker == 0xc4) {
      size_t p = pos + 4;
      int64_t left = int64_t(length) - 2;
      while (left > 0) {
        size_t symbols = 0;
        for (size_t i = 1; i <= 16; ++i) symbols += at(p + i);
        if (symbols > 256)
          throw IOError("cannot decode image '" + name + "': corrupt JPEG (Huffman table with " +
                        std::to_string(symbols) + " symbols, at most 256 are possible)");
        const uint32_t table_class = at(p) >> 4, id = at(p) & 15;
        if (table_class > 1 || id > 3) throw corrupt(std::string(where) + ": bad Huffman table class or id");
        defined[table_class][id] = true;
        p += 17 + symbols;
        left -= int64_t(17 + symbols);
      }
      if (left != 0) throw corrupt(std::string(where) + ": its Huffman tables do not fill its length");
    } else if (marker == 0xc0 || marker == 0xc1 || marker == 0xc2) {  // SOF: the ones stb decodes
      progressive = marker == 0xc2;
    } else if (marker == 0xda) {  // SOS
      const size_t components = at(pos + 4);
      const uint32_t spectral_start = at(pos + 5 + 2 * components), approx_high = at(pos + 7 + 2 * components) >> 4;
      const bool uses_dc = !progressive || (spectral_start == 0 && approx_high == 0);
      const bool uses_ac = !progressive || spectral_start > 0;
      for (size_t i = 0; i < components; ++i) {
        const uint32_t tables = at(pos + 6 + 2 * i), dc = tables >> 4, ac = tables & 15;
        if (dc > 3 || ac > 3) continue;  // stb refuses these itself
        if ((uses_dc && !defined[0][dc]) || (uses_ac && !defined[1][ac]))
          throw corrupt("scan at byte " + std::to_string(pos) + " uses Huffman " +
                        (uses_dc && !defined[0][dc] ? "DC table " + std::to_string(dc)
                                                    : "AC table " + std::to_string(ac)) +
                        ", which is not defined before it");
      }
    }
    pos = end;
  }
}

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) << 24 | uint32_t(b[at + 1]) << 16 | uint32_t(b[at + 2]) << 8 | b[at + 3];
}

bool is_png(const std::vector<uint8_t>& b) {
  static const uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return b.size() >= 8 && std::equal(std::begin(kPng), std::end(kPng), b.begin());
}

// What the PNG's chunks say before stb reads them: the compressed bytes in
// its IDAT chunks, and whether one of them is empty (stb copies an empty
// first IDAT with memcpy(NULL, ..., 0), undefined behaviour).
struct PngChunks {
  uint64_t idat_bytes = 0;
  bool empty_idat = false;
};

PngChunks scan_png(const std::vector<uint8_t>& b) {
  PngChunks out;
  size_t pos = 8;
  while (pos + 8 <= b.size()) {
    const uint64_t length = be32(b, pos);
    const bool idat = std::equal(b.begin() + std::ptrdiff_t(pos + 4), b.begin() + std::ptrdiff_t(pos + 8), "IDAT");
    const uint64_t present = std::min<uint64_t>(length, b.size() - pos - 8);
    if (idat) {
      out.idat_bytes += present;
      out.empty_idat |= length == 0;
    }
    if (length > b.size() - pos - 8) break;
    pos += 12 + size_t(length);
  }
  return out;
}

// stb grows its buffer of compressed data to an IDAT chunk's declared length
// before reading it, so a chunk that claims a gigabyte in a 200-byte file
// costs a gigabyte; refuse any chunk whose data runs past the end of the file.
void check_png_chunks(const std::vector<uint8_t>& b, const std::string& name) {
  size_t pos = 8;
  while (pos + 8 <= b.size()) {
    const uint64_t length = be32(b, pos);
    if (length > b.size() - pos - 8) {
      std::string type;
      for (size_t i = pos + 4; i < pos + 8; ++i) type += std::isalpha(b[i]) ? char(b[i]) : '?';
      throw IOError("cannot decode image '" + name + "': corrupt or truncated PNG (chunk '" + type + "' at byte " +
                    std::to_string(pos) + " declares " + std::to_string(length) + " bytes, the file has " +
                    std::to_string(b.size() - pos - 8) + " left)");
    }
    pos += 12 + size_t(length);
  }
}

// The same PNG without its empty IDAT chunks (which hold nothing), also one
// cut short after its 8-byte header.
std::vector<uint8_t> without_empty_idats(const std::vector<uint8_t>& b) {
  std::vector<uint8_t> out(b.begin(), b.begin() + 8);
  size_t pos = 8;
  while (pos + 8 <= b.size()) {
    const uint64_t length = be32(b, pos);
    if (length == 0 && std::equal(b.begin() + std::ptrdiff_t(pos + 4), b.begin() + std::ptrdiff_t(pos + 8), "IDAT")) {
      pos = std::min(pos + 12, b.size());
      continue;
    }
    if (pos + 12 > b.size() || length > b.size() - pos - 12) break;
    out.insert(out.end(), b.begin() + std::ptrdiff_t(pos), b.begin() + std::ptrdiff_t(pos + 12 + length));
    pos += 12 + size_t(length);
  }
  out.insert(out.end(), b.begin() + std::ptrdiff_t(pos), b.end());
  return out;
}

// stb pads a JPEG whose scan data runs out, and allocates a PNG's whole
// pixel buffer before inflating, so a few hundred bytes declaring 16384x6103
// would cost gigabytes. Refuse an image that declares more pixels than its
// file can encode:
//  - JPEG: every 8x8 block of every scan costs at least one bit (a Huffman
//    code has at least one), so at most 512 pixels per byte;
//  - PNG: deflate expands at most about 1032:1, and each row carries a
//    filter byte;
//  - GIF: each LZW code has at least 3 bits and stands for at most 4096
//    pixels (and at most as many as codes were read before it).
void check_encodable(const std::vector<uint8_t>& b, int w, int h, const std::string& name) {
  const uint64_t pixels = uint64_t(w) * uint64_t(h), size = b.size();
  auto truncated = [&](const std::string& what, uint64_t need, uint64_t have) {
    throw IOError("cannot decode image '" + name + "': corrupt or truncated image data (a " + size_str(w, h) + " " +
                  what + " needs at least " + std::to_string(need) + " bytes, the file has " + std::to_string(have) +
                  ")");
  };
  if (jpeg_start(b)) {
    if (pixels > size * 512) truncated("JPEG", (pixels + 511) / 512, size);
  } else if (is_png(b) && b.size() >= 29) {
    static const int kChannels[7] = {1, 0, 3, 1, 2, 0, 4};
    const uint32_t depth = b[24], color = b[25];
    const uint64_t channels = color < 7 && kChannels[color] ? uint64_t(kChannels[color]) : 4;
    const uint64_t raw = uint64_t(h) * (1 + (uint64_t(w) * channels * std::max<uint32_t>(depth, 1) + 7) / 8);
    const uint64_t idat = scan_png(b).idat_bytes;
    if (raw > idat * 1032 + 1032) truncated("PNG", raw / 1032, idat);
  } else if (b.size() >= 3 && b[0] == 'G' && b[1] == 'I' && b[2] == 'F') {
    const uint64_t codes = size * 8 / 3;
    if (pixels > codes * std::min<uint64_t>(codes + 2, 4096)) truncated("GIF", pixels / 4096 * 3 / 8, size);
  }
}

}  // namespace

Image decode_image(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.empty()) throw IOError("cannot decode image '" + name + "': the file is empty");
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    throw IOError("cannot decode image '" + name + "': file of " + std::to_string(bytes.size()) +
                  " bytes is too large");
  if (jpeg_start(bytes)) check_jpeg_tables(bytes, name);
  check_pnm_header(bytes, name);
  if (is_png(bytes)) check_png_chunks(bytes, name);
  if (is_png(bytes) && scan_png(bytes).empty_idat) {
    const std::vector<uint8_t> cleaned = without_empty_idats(bytes);
    if (scan_png(cleaned).empty_idat)  // cannot happen: every empty IDAT header was dropped
      throw IOError("cannot decode image '" + name + "': corrupt PNG (empty IDAT chunk)");
    return decode_image(cleaned, name);
  }
  const int len = int(bytes.size());
  int w = 0, h = 0, channels = 0;
  if (!stbi_info_from_memory(bytes.data(), len, &w, &h, &channels)) {
    // stb refuses PNGs above 2^30 bytes of pixels already in info() and then
    // reports the last format it tried; read the size from IHDR ourselves so
    // the message says what is wrong.
    static const uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    if (bytes.size() >= 24 && std::equal(std::begin(kPng), std::end(kPng), bytes.begin())) {
      const uint32_t pw = be32(bytes, 16), ph = be32(bytes, 20);
      if (pw > uint32_t(kMaxImageSide) || ph > uint32_t(kMaxImageSide) || uint64_t(pw) * ph > uint64_t(kMaxImagePixels))
        throw too_large(name, pw, ph);
    }
    throw IOError("cannot decode image '" + name + "': " + stbi_failure_reason() +
                  " (supported: JPEG, PNG, BMP, GIF, TGA, PNM)");
  }
  // A BMP stored top down says so by a negative height; its pixels have the
  // height's size.
  if (h < 0 && bytes[0] == 'B' && bytes[1] == 'M' && h != std::numeric_limits<int>::min()) h = -h;
  if (w < 1 || h < 1 || w > kMaxImageSide || h > kMaxImageSide || int64_t(w) * h > kMaxImagePixels)
    throw too_large(name, w, h);

  check_complete(bytes, w, h, name);
  check_encodable(bytes, w, h, name);
  // What decoding takes: our floats, and stb's pixels (twice, for its
  // intermediate buffers), against the absolute cap of a load.
  const uint64_t sample_bytes = stbi_is_16_bit_from_memory(bytes.data(), len) ? 2 : 1;
  const uint64_t decode_bytes = uint64_t(w) * uint64_t(h) * (3 * sizeof(float) + 2 * 4 * sample_bytes);
  if (decode_bytes > io::load_limits().max_total_bytes)
    throw IOError("image '" + name + "' is too large: decoding " + size_str(w, h) + " pixels would take " +
                  std::to_string(decode_bytes) + " bytes, more than the " +
                  std::to_string(io::load_limits().max_total_bytes) + " a load may take (TINYLENS_MAX_LOAD_BYTES)");

  Image img;
  int dw = 0, dh = 0, dc = 0;
  // stb returns the file's own channels (1 grey, 2 grey + alpha, 3 RGB, 4
  // RGBA); we replicate grey and drop alpha ourselves. Asking stb for 3
  // channels instead runs its converters, and the one for 16-bit PNM
  // returns 8-bit samples (a buffer half the size it says).
  auto take = [&](auto* px, float scale) {
    if (!px) throw decode_error(name);
    if (dw != w || dh != h || dc < 1 || dc > 4) {
      stbi_image_free(px);
      throw IOError("cannot decode image '" + name + "': header says " + size_str(w, h) + ", pixels are " +
                    size_str(dw, dh) + " with " + std::to_string(dc) + " channels");
    }
    const size_t pixels = size_t(w) * size_t(h), channels = size_t(dc);
    img.rgb.resize(pixels * 3);
    for (size_t i = 0; i < pixels; ++i) {
      const auto* p = px + i * channels;
      for (size_t c = 0; c < 3; ++c) img.rgb[i * 3 + c] = p[channels >= 3 ? c : 0] / scale;
    }
    stbi_image_free(px);
  };
  if (stbi_is_16_bit_from_memory(bytes.data(), len))
    take(stbi_load_16_from_memory(bytes.data(), len, &dw, &dh, &dc, 0), 65535.0f);
  else
    take(stbi_load_from_memory(bytes.data(), len, &dw, &dh, &dc, 0), 255.0f);
  img.width = w;
  img.height = h;
  return img;
}

Image load_image(const std::string& path) {
  // Even a maximal uncompressed image is far below 1 GiB; anything bigger is
  // not something we should pull into memory.
  const uint64_t max_file = std::min<uint64_t>(uint64_t(1) << 30, io::load_limits().max_total_bytes);
  return decode_image(io::read_whole_file_bytes(path, "image", max_file), path);
}

namespace {

// One output sample: the first input index and its weights.
struct Taps {
  int first = 0;
  std::vector<float> weights;
};

// Weights for resampling a line of `in` samples to `out` samples with a
// triangle filter. Pixel i covers [i, i+1), so output pixel x is centred at
// (x + 0.5) * scale in input coordinates. Shrinking stretches the triangle by
// the scale so it averages over the whole footprint.
std::vector<Taps> triangle_taps(int in, int out) {
  const double scale = double(in) / out;
  const double stretch = std::max(scale, 1.0);
  const double support = stretch;  // triangle radius 1, stretched
  std::vector<Taps> taps(out);
  for (int x = 0; x < out; ++x) {
    const double center = (x + 0.5) * scale;
    int lo = std::max(int(std::floor(center - support + 0.5)), 0);
    int hi = std::min(int(std::floor(center + support + 0.5)), in);
    Taps& t = taps[x];
    t.first = lo;
    double total = 0;
    std::vector<double> w(size_t(std::max(hi - lo, 0)));
    for (int i = lo; i < hi; ++i) {
      double d = std::fabs((i + 0.5 - center) / stretch);
      w[i - lo] = d < 1 ? 1 - d : 0;
      total += w[i - lo];
    }
    if (total <= 0) {  // cannot happen for in >= 1, but never divide by zero
      t.weights = {1.0f};
      t.first = std::clamp(int(center), 0, in - 1);
      continue;
    }
    t.weights.resize(w.size());
    for (size_t k = 0; k < w.size(); ++k) t.weights[k] = float(w[k] / total);
  }
  return taps;
}

}  // namespace

Image resize(const Image& image, int width, int height) {
  check_size(image.width, image.height, "resize: source image");
  check_size(width, height, "resize: target");
  if (image.rgb.size() != size_t(image.width) * image.height * 3)
    throw ShapeError("resize: image claims " + size_str(image.width, image.height) + " but holds " +
                     std::to_string(image.rgb.size()) + " floats");

  // Horizontal pass first, into width x source height.
  const auto htaps = triangle_taps(image.width, width);
  std::vector<float> mid(size_t(width) * image.height * 3);
  for (int y = 0; y < image.height; ++y) {
    const float* src = &image.rgb[size_t(y) * image.width * 3];
    float* dst = &mid[size_t(y) * width * 3];
    for (int x = 0; x < width; ++x) {
      const Taps& t = htaps[x];
      float r = 0, g = 0, b = 0;
      for (size_t k = 0; k < t.weights.size(); ++k) {
        const float* p = src + size_t(t.first + k) * 3;
        r += t.weights[k] * p[0];
        g += t.weights[k] * p[1];
        b += t.weights[k] * p[2];
      }
      dst[x * 3 + 0] = r;
      dst[x * 3 + 1] = g;
      dst[x * 3 + 2] = b;
    }
  }

  const auto vtaps = triangle_taps(image.height, height);
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.assign(size_t(width) * height * 3, 0.0f);
  const size_t row = size_t(width) * 3;
  for (int y = 0; y < height; ++y) {
    const Taps& t = vtaps[y];
    float* dst = &out.rgb[y * row];
    for (size_t k = 0; k < t.weights.size(); ++k) {
      const float* src = &mid[(t.first + k) * row];
      const float w = t.weights[k];
      for (size_t i = 0; i < row; ++i) dst[i] += w * src[i];
    }
    // Weights sum to one, but rounding may step a hair outside [0, 1].
    for (size_t i = 0; i < row; ++i) dst[i] = std::clamp(dst[i], 0.0f, 1.0f);
  }
  return out;
}

Image center_crop(const Image& image, int width, int height) {
  if (width < 1 || height < 1 || width > image.width || height > image.height)
    throw ShapeError("center_crop: cannot cut " + size_str(width, height) + " out of a " +
                     size_str(image.width, image.height) + " image");
  // torchvision: int(round((H - h) / 2.0)), Python's round-half-to-even.
  auto offset = [](int total, int keep) { return int(std::nearbyint((total - keep) / 2.0)); };
  const int top = offset(image.height, height), left = offset(image.width, width);
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(size_t(width) * height * 3);
  for (int y = 0; y < height; ++y)
    std::copy_n(&image.rgb[(size_t(top + y) * image.width + left) * 3], size_t(width) * 3,
                &out.rgb[size_t(y) * width * 3]);
  return out;
}

std::vector<float> to_chw(const Image& image, const float mean[3], const float std[3]) {
  const size_t plane = size_t(image.width) * image.height;
  if (image.rgb.size() != plane * 3)
    throw ShapeError("to_chw: image claims " + size_str(image.width, image.height) + " but holds " +
                     std::to_string(image.rgb.size()) + " floats");
  for (int c = 0; c < 3; ++c)
    if (!(std[c] != 0.0f)) throw ShapeError("to_chw: std[" + std::to_string(c) + "] must be non-zero");
  std::vector<float> out(plane * 3);
  for (int c = 0; c < 3; ++c) {
    const float inv = 1.0f / std[c];
    for (size_t i = 0; i < plane; ++i) out[c * plane + i] = (image.rgb[i * 3 + c] - mean[c]) * inv;
  }
  return out;
}

std::vector<float> preprocess_imagenet(const Image& image, int resize_short_side, int crop, const float mean[3],
                                       const float std[3]) {
  check_size(image.width, image.height, "preprocess_imagenet: image");
  if (resize_short_side < 1 || crop < 1 || crop > resize_short_side)
    throw ShapeError("preprocess_imagenet: need 1 <= crop (" + std::to_string(crop) + ") <= resize_short_side (" +
                     std::to_string(resize_short_side) + ")");
  // The crop is taken from the middle: of a panorama (wider than 16:1) only
  // its middle 16:1 is resized, so the long side stays within the limits of
  // an image (a 25600x256 resize would not) and the crop is the same.
  const Image* source = &image;
  Image middle;
  const int64_t short_side = std::min(image.width, image.height), long_most = short_side * 16;
  if (std::max(image.width, image.height) > long_most) {
    middle = center_crop(image, int(std::min<int64_t>(image.width, long_most)),
                         int(std::min<int64_t>(image.height, long_most)));
    source = &middle;
  }
  int w, h;
  if (source->width <= source->height) {
    w = resize_short_side;
    h = int(int64_t(resize_short_side) * source->height / source->width);
  } else {
    h = resize_short_side;
    w = int(int64_t(resize_short_side) * source->width / source->height);
  }
  return to_chw(center_crop(resize(*source, w, h), crop, crop), mean, std);
}

}  // namespace tl
