// 8-bit RGB images for the apps: PNG/JPEG loading, PNG saving, resizing into the model
// input, and drawing the results.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace apps {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // row-major RGB, 3 bytes per pixel

  uint8_t* at(int x, int y) { return pixels.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
  const uint8_t* at(int x, int y) const { return pixels.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
};

// Loads a PNG or JPEG (chosen by the file's signature, not its name) as RGB; grey, palette and
// alpha images are converted. Throws std::runtime_error naming the file on failure.
Image load_image(const std::string& path);
void save_png(const Image& image, const std::string& path);

// Fits `image` into a size x size square keeping its aspect ratio (bilinear), centered, with the
// rest filled by `pad`; returns NHWC float pixels mapped from [0,255] to [-1,1].
// `scale`, `pad_x`, `pad_y` describe the placement (input pixel = image pixel * scale + pad).
std::vector<float> letterbox_to_float(const Image& image, int size, float scale, float pad_x, float pad_y);

// Drawing, clipped to the image.
void put_pixel(Image& image, int x, int y, Rgb color);
void draw_rect(Image& image, float x0, float y0, float x1, float y1, Rgb color, int thickness);
void draw_disc(Image& image, float cx, float cy, float radius, Rgb color);
void draw_line(Image& image, float x0, float y0, float x1, float y1, Rgb color, int thickness);
// Blends `color` over [x0, x1) x [y0, y1) with the given opacity (1: paint over).
void fill_rect(Image& image, int x0, int y0, int x1, int y1, Rgb color, float opacity = 1.0f);
// Printable ASCII in a 5x7 bitmap font, each font pixel a scale x scale square, top-left at (x, y);
// other characters (UTF-8 code points) are drawn as '?'.
void draw_text(Image& image, int x, int y, const std::string& text, Rgb color, int scale = 2);
int text_width(const std::string& text, int scale = 2);

}  // namespace apps
