// Images in, float RGB out. Decoding is stb_image (JPEG, PNG, BMP, GIF's
// first frame, TGA, PNM; 8 and 16 bits per channel). Grey images are
// replicated to RGB and any alpha channel is dropped, not composited: the
// models here were trained on opaque photos, and a dropped alpha keeps the
// colour of transparent pixels as stored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tl {

struct Image {
  int width = 0, height = 0;
  std::vector<float> rgb;  // HWC, 3 channels, values in [0, 1]
};

// Images above either limit are refused before any pixel memory is
// allocated, so a 30000x30000 header in a 60-byte file costs nothing.
constexpr int kMaxImageSide = 16384;
constexpr int64_t kMaxImagePixels = 100'000'000;

// Throws tl::IOError naming the file and the reason (missing, empty, not an
// image, truncated/corrupt with stb's reason, too large with its size).
Image load_image(const std::string& path);
Image decode_image(const std::vector<uint8_t>& bytes, const std::string& name_for_errors);

// Separable triangle-filter resize. When shrinking, the filter's support
// grows with the shrink factor, so every source pixel contributes (the
// antialiasing of PIL's BILINEAR); when enlarging it is plain bilinear with
// pixel centres at +0.5. Throws tl::ShapeError for sizes < 1 or above the
// limits above.
Image resize(const Image& image, int width, int height);

// The centred width x height window; the offset rounds like torchvision's
// CenterCrop. Throws tl::ShapeError when the crop is larger than the image.
Image center_crop(const Image& image, int width, int height);

// Planar CHW floats, (x - mean[c]) / std[c].
std::vector<float> to_chw(const Image& image, const float mean[3], const float std[3]);

// torchvision's classic eval pipeline: Resize(short side) keeping the aspect
// ratio (long side truncated like torchvision), CenterCrop(crop), Normalize.
// Returns 3 x crop x crop floats, CHW.
std::vector<float> preprocess_imagenet(const Image& image, int resize_short_side, int crop, const float mean[3],
                                       const float std[3]);

}  // namespace tl
