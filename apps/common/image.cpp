#include "image.h"

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE without including it
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace apps {
namespace {

[[noreturn]] void image_error(const std::string& path, const std::string& what) {
  throw std::runtime_error("image '" + path + "': " + what);
}

// libjpeg reports fatal errors through error_exit, which must not return: jump back to the
// reader with the message saved. (Throwing through libjpeg's C frames is not safe.)
struct JpegErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Plain-C style on purpose: no object with a destructor lives between setjmp and longjmp.
// Returns a malloc'ed RGB buffer (caller frees) or nullptr with `message` set.
unsigned char* decode_jpeg(FILE* file, int* width, int* height, char* message) {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  unsigned char* volatile pixels = nullptr;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = jpeg_error_exit;
  if (setjmp(err.jump)) {
    std::strcpy(message, err.message);
    jpeg_destroy_decompress(&cinfo);
    std::free(pixels);
    return nullptr;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_stdio_src(&cinfo, file);
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;  // converts greyscale and YCbCr
  jpeg_start_decompress(&cinfo);
  const size_t stride = size_t(cinfo.output_width) * 3;
  pixels = static_cast<unsigned char*>(std::malloc(stride * cinfo.output_height));
  if (pixels == nullptr) {
    std::strcpy(message, "out of memory");
    jpeg_destroy_decompress(&cinfo);
    return nullptr;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels + size_t(cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  *width = int(cinfo.output_width);
  *height = int(cinfo.output_height);
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return pixels;
}

Image load_jpeg(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) image_error(path, std::strerror(errno));
  int width = 0, height = 0;
  char message[JMSG_LENGTH_MAX] = {};
  unsigned char* pixels = decode_jpeg(file, &width, &height, message);
  std::fclose(file);
  if (pixels == nullptr) image_error(path, std::string("cannot decode JPEG: ") + message);
  Image image;
  image.width = width;
  image.height = height;
  image.pixels.assign(pixels, pixels + size_t(width) * size_t(height) * 3);
  std::free(pixels);
  return image;
}

// libpng's simplified API handles every PNG colour type and bit depth and reports errors through
// the struct, so no setjmp is needed here.
Image load_png(const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&png, path.c_str())) image_error(path, png.message);
  png.format = PNG_FORMAT_RGB;
  Image image;
  image.width = int(png.width);
  image.height = int(png.height);
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  png_color white{255, 255, 255};  // transparent areas become white
  if (!png_image_finish_read(&png, &white, image.pixels.data(), 0, nullptr)) {
    std::string message = png.message;
    png_image_free(&png);
    image_error(path, message);
  }
  return image;
}

}  // namespace

Image load_image(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) image_error(path, std::strerror(errno));
  unsigned char magic[8] = {};
  const size_t n = std::fread(magic, 1, sizeof magic, file);
  std::fclose(file);
  if (n == 8 && png_sig_cmp(magic, 0, 8) == 0) return load_png(path);
  if (n >= 3 && magic[0] == 0xFF && magic[1] == 0xD8 && magic[2] == 0xFF) return load_jpeg(path);
  image_error(path, "not a PNG or JPEG file");
}

void save_png(const Image& image, const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = png_uint_32(image.width);
  png.height = png_uint_32(image.height);
  png.format = PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&png, path.c_str(), 0, image.pixels.data(), 0, nullptr)) {
    image_error(path, std::string("cannot write PNG: ") + png.message);
  }
}

std::vector<float> letterbox_to_float(const Image& image, int size, float scale, float pad_x, float pad_y) {
  std::vector<float> out(size_t(size) * size_t(size) * 3, -1.0f);  // padding is black
  for (int oy = 0; oy < size; ++oy) {
    // Pixel centers: input pixel (ox + 0.5) maps to image coordinate (ox + 0.5 - pad) / scale.
    const float sy = (float(oy) + 0.5f - pad_y) / scale - 0.5f;
    if (sy < -0.5f || sy > float(image.height) - 0.5f) continue;
    const float cy = std::clamp(sy, 0.0f, float(image.height - 1));
    const int y0 = int(cy);
    const int y1 = std::min(y0 + 1, image.height - 1);
    const float fy = cy - float(y0);
    for (int ox = 0; ox < size; ++ox) {
      const float sx = (float(ox) + 0.5f - pad_x) / scale - 0.5f;
      if (sx < -0.5f || sx > float(image.width) - 0.5f) continue;
      const float cx = std::clamp(sx, 0.0f, float(image.width - 1));
      const int x0 = int(cx);
      const int x1 = std::min(x0 + 1, image.width - 1);
      const float fx = cx - float(x0);
      float* dst = out.data() + (size_t(oy) * size_t(size) + size_t(ox)) * 3;
      for (int c = 0; c < 3; ++c) {
        const float top = float(image.at(x0, y0)[c]) * (1 - fx) + float(image.at(x1, y0)[c]) * fx;
        const float bottom = float(image.at(x0, y1)[c]) * (1 - fx) + float(image.at(x1, y1)[c]) * fx;
        dst[c] = (top * (1 - fy) + bottom * fy) / 127.5f - 1.0f;
      }
    }
  }
  return out;
}

void put_pixel(Image& image, int x, int y, Rgb color) {
  if (x < 0 || y < 0 || x >= image.width || y >= image.height) return;
  uint8_t* p = image.at(x, y);
  p[0] = color.r;
  p[1] = color.g;
  p[2] = color.b;
}

namespace {

}  // namespace

void draw_rect(Image& image, float x0, float y0, float x1, float y1, Rgb color, int thickness) {
  const int left = int(std::lround(std::min(x0, x1))), right = int(std::lround(std::max(x0, x1)));
  const int top = int(std::lround(std::min(y0, y1))), bottom = int(std::lround(std::max(y0, y1)));
  for (int t = 0; t < thickness; ++t) {
    for (int x = left - t; x <= right + t; ++x) {
      put_pixel(image, x, top - t, color);
      put_pixel(image, x, bottom + t, color);
    }
    for (int y = top - t; y <= bottom + t; ++y) {
      put_pixel(image, left - t, y, color);
      put_pixel(image, right + t, y, color);
    }
  }
}

void draw_disc(Image& image, float cx, float cy, float radius, Rgb color) {
  const int r = int(std::ceil(radius));
  const int x0 = int(std::lround(cx)), y0 = int(std::lround(cy));
  for (int dy = -r; dy <= r; ++dy) {
    for (int dx = -r; dx <= r; ++dx) {
      if (float(dx * dx + dy * dy) <= radius * radius) put_pixel(image, x0 + dx, y0 + dy, color);
    }
  }
}

namespace {

// The classic 5x7 font, printable ASCII from ' ': five column bytes per glyph, bit 0 at the top.
const unsigned char kFont[95][5] = {
    {0x00, 0x00, 0x00, 0x00, 0x00}, {0x00, 0x00, 0x5F, 0x00, 0x00}, {0x00, 0x07, 0x00, 0x07, 0x00},
    {0x14, 0x7F, 0x14, 0x7F, 0x14}, {0x24, 0x2A, 0x7F, 0x2A, 0x12}, {0x23, 0x13, 0x08, 0x64, 0x62},
    {0x36, 0x49, 0x55, 0x22, 0x50}, {0x00, 0x05, 0x03, 0x00, 0x00}, {0x00, 0x1C, 0x22, 0x41, 0x00},
    {0x00, 0x41, 0x22, 0x1C, 0x00}, {0x08, 0x2A, 0x1C, 0x2A, 0x08}, {0x08, 0x08, 0x3E, 0x08, 0x08},
    {0x00, 0x50, 0x30, 0x00, 0x00}, {0x08, 0x08, 0x08, 0x08, 0x08}, {0x00, 0x60, 0x60, 0x00, 0x00},
    {0x20, 0x10, 0x08, 0x04, 0x02}, {0x3E, 0x51, 0x49, 0x45, 0x3E}, {0x00, 0x42, 0x7F, 0x40, 0x00},
    {0x42, 0x61, 0x51, 0x49, 0x46}, {0x21, 0x41, 0x45, 0x4B, 0x31}, {0x18, 0x14, 0x12, 0x7F, 0x10},
    {0x27, 0x45, 0x45, 0x45, 0x39}, {0x3C, 0x4A, 0x49, 0x49, 0x30}, {0x01, 0x71, 0x09, 0x05, 0x03},
    {0x36, 0x49, 0x49, 0x49, 0x36}, {0x06, 0x49, 0x49, 0x29, 0x1E}, {0x00, 0x36, 0x36, 0x00, 0x00},
    {0x00, 0x56, 0x36, 0x00, 0x00}, {0x00, 0x08, 0x14, 0x22, 0x41}, {0x14, 0x14, 0x14, 0x14, 0x14},
    {0x41, 0x22, 0x14, 0x08, 0x00}, {0x02, 0x01, 0x51, 0x09, 0x06}, {0x32, 0x49, 0x79, 0x41, 0x3E},
    {0x7E, 0x11, 0x11, 0x11, 0x7E}, {0x7F, 0x49, 0x49, 0x49, 0x36}, {0x3E, 0x41, 0x41, 0x41, 0x22},
    {0x7F, 0x41, 0x41, 0x22, 0x1C}, {0x7F, 0x49, 0x49, 0x49, 0x41}, {0x7F, 0x09, 0x09, 0x01, 0x01},
    {0x3E, 0x41, 0x41, 0x51, 0x32}, {0x7F, 0x08, 0x08, 0x08, 0x7F}, {0x00, 0x41, 0x7F, 0x41, 0x00},
    {0x20, 0x40, 0x41, 0x3F, 0x01}, {0x7F, 0x08, 0x14, 0x22, 0x41}, {0x7F, 0x40, 0x40, 0x40, 0x40},
    {0x7F, 0x02, 0x04, 0x02, 0x7F}, {0x7F, 0x04, 0x08, 0x10, 0x7F}, {0x3E, 0x41, 0x41, 0x41, 0x3E},
    {0x7F, 0x09, 0x09, 0x09, 0x06}, {0x3E, 0x41, 0x51, 0x21, 0x5E}, {0x7F, 0x09, 0x19, 0x29, 0x46},
    {0x46, 0x49, 0x49, 0x49, 0x31}, {0x01, 0x01, 0x7F, 0x01, 0x01}, {0x3F, 0x40, 0x40, 0x40, 0x3F},
    {0x1F, 0x20, 0x40, 0x20, 0x1F}, {0x7F, 0x20, 0x18, 0x20, 0x7F}, {0x63, 0x14, 0x08, 0x14, 0x63},
    {0x03, 0x04, 0x78, 0x04, 0x03}, {0x61, 0x51, 0x49, 0x45, 0x43}, {0x00, 0x00, 0x7F, 0x41, 0x41},
    {0x02, 0x04, 0x08, 0x10, 0x20}, {0x41, 0x41, 0x7F, 0x00, 0x00}, {0x04, 0x02, 0x01, 0x02, 0x04},
    {0x40, 0x40, 0x40, 0x40, 0x40}, {0x00, 0x01, 0x02, 0x04, 0x00}, {0x20, 0x54, 0x54, 0x54, 0x78},
    {0x7F, 0x48, 0x44, 0x44, 0x38}, {0x38, 0x44, 0x44, 0x44, 0x20}, {0x38, 0x44, 0x44, 0x48, 0x7F},
    {0x38, 0x54, 0x54, 0x54, 0x18}, {0x08, 0x7E, 0x09, 0x01, 0x02}, {0x08, 0x14, 0x54, 0x54, 0x3C},
    {0x7F, 0x08, 0x04, 0x04, 0x78}, {0x00, 0x44, 0x7D, 0x40, 0x00}, {0x20, 0x40, 0x44, 0x3D, 0x00},
    {0x00, 0x7F, 0x10, 0x28, 0x44}, {0x00, 0x41, 0x7F, 0x40, 0x00}, {0x7C, 0x04, 0x18, 0x04, 0x78},
    {0x7C, 0x08, 0x04, 0x04, 0x78}, {0x38, 0x44, 0x44, 0x44, 0x38}, {0x7C, 0x14, 0x14, 0x14, 0x08},
    {0x08, 0x14, 0x14, 0x18, 0x7C}, {0x7C, 0x08, 0x04, 0x04, 0x08}, {0x48, 0x54, 0x54, 0x54, 0x20},
    {0x04, 0x3F, 0x44, 0x40, 0x20}, {0x3C, 0x40, 0x40, 0x20, 0x7C}, {0x1C, 0x20, 0x40, 0x20, 0x1C},
    {0x3C, 0x40, 0x30, 0x40, 0x3C}, {0x44, 0x28, 0x10, 0x28, 0x44}, {0x0C, 0x50, 0x50, 0x50, 0x3C},
    {0x44, 0x64, 0x54, 0x4C, 0x44}, {0x00, 0x08, 0x36, 0x41, 0x00}, {0x00, 0x00, 0x7F, 0x00, 0x00},
    {0x00, 0x41, 0x36, 0x08, 0x00}, {0x08, 0x08, 0x2A, 0x1C, 0x08}};

}  // namespace

void draw_text(Image& image, int x, int y, const std::string& text, Rgb color, int scale) {
  for (char ch : text) {
    if ((static_cast<unsigned char>(ch) & 0xC0) == 0x80) continue;  // UTF-8 continuation: one '?' per code point
    const int g = (ch < 32 || ch > 126) ? '?' - 32 : ch - 32;
    for (int col = 0; col < 5; ++col) {
      for (int row = 0; row < 7; ++row) {
        if (!(kFont[g][col] >> row & 1)) continue;
        for (int dy = 0; dy < scale; ++dy)
          for (int dx = 0; dx < scale; ++dx) put_pixel(image, x + col * scale + dx, y + row * scale + dy, color);
      }
    }
    x += 6 * scale;
  }
}

int text_width(const std::string& text, int scale) {
  const auto glyphs = std::count_if(text.begin(), text.end(),
                                    [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
  return int(glyphs) * 6 * scale;
}

void fill_rect(Image& image, int x0, int y0, int x1, int y1, Rgb color, float opacity) {
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, image.width);
  y1 = std::min(y1, image.height);
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      uint8_t* p = image.at(x, y);
      p[0] = uint8_t(std::lround(p[0] + (color.r - p[0]) * opacity));
      p[1] = uint8_t(std::lround(p[1] + (color.g - p[1]) * opacity));
      p[2] = uint8_t(std::lround(p[2] + (color.b - p[2]) * opacity));
    }
  }
}

void draw_line(Image& image, float x0, float y0, float x1, float y1, Rgb color, int thickness) {
  const int steps = int(std::max(std::abs(x1 - x0), std::abs(y1 - y0))) + 1;
  for (int i = 0; i <= steps; ++i) {
    const float t = float(i) / float(steps);
    const int x = int(std::lround(x0 + (x1 - x0) * t)), y = int(std::lround(y0 + (y1 - y0) * t));
    for (int dy = -thickness / 2; dy <= thickness / 2; ++dy)
      for (int dx = -thickness / 2; dx <= thickness / 2; ++dx) put_pixel(image, x + dx, y + dy, color);
  }
}

}  // namespace apps
