// RGB raster drawing and PNG encode/decode through libpng.
#include "qkv/viz/image.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace qkv::viz {

Rgb rgb_hex(uint32_t hex) {
  return {uint8_t(hex >> 16), uint8_t((hex >> 8) & 0xFF), uint8_t(hex & 0xFF)};
}

std::string to_hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

Image::Image(int width, int height, Rgb bg) : w_(width), h_(height) {
  QKV_CHECK(width > 0 && height > 0 && int64_t(width) * height <= (int64_t(1) << 28), "Image",
            "expected a size in (0, 2^28] pixels, got ", width, "x", height);
  px_.resize(size_t(width) * height * 3);
  for (size_t i = 0; i < px_.size(); i += 3) px_[i] = bg.r, px_[i + 1] = bg.g, px_[i + 2] = bg.b;
}

Rgb Image::at(int x, int y) const {
  QKV_CHECK(x >= 0 && y >= 0 && x < w_ && y < h_, "Image::at", "pixel (", x, ", ", y,
            ") outside ", w_, "x", h_);
  const uint8_t* p = &px_[(size_t(y) * w_ + x) * 3];
  return {p[0], p[1], p[2]};
}

void Image::set(int x, int y, Rgb c) { blend(x, y, c, 1.0); }

void Image::blend(int x, int y, Rgb c, double a) {
  if (x < 0 || y < 0 || x >= w_ || y >= h_ || a <= 0) return;
  a = std::min(a, 1.0);
  uint8_t* p = &px_[(size_t(y) * w_ + x) * 3];
  auto mix = [a](uint8_t dst, uint8_t src) { return uint8_t(std::lround(dst + (src - dst) * a)); };
  p[0] = mix(p[0], c.r), p[1] = mix(p[1], c.g), p[2] = mix(p[2], c.b);
}

void Image::fill_rect(double x, double y, double w, double h, Rgb c) {
  const int x0 = std::max(0, int(std::floor(x))), x1 = std::min(w_, int(std::ceil(x + w)));
  const int y0 = std::max(0, int(std::floor(y))), y1 = std::min(h_, int(std::ceil(y + h)));
  for (int py = y0; py < y1; ++py) {
    const double cy = std::min<double>(py + 1, y + h) - std::max<double>(py, y);  // coverage
    for (int px = x0; px < x1; ++px) {
      const double cx = std::min<double>(px + 1, x + w) - std::max<double>(px, x);
      blend(px, py, c, cx * cy);
    }
  }
}

void Image::line(double x0, double y0, double x1, double y1, Rgb c, double width) {
  const double r = width / 2;
  const int bx0 = int(std::floor(std::min(x0, x1) - r - 1)), bx1 = int(std::ceil(std::max(x0, x1) + r + 1));
  const int by0 = int(std::floor(std::min(y0, y1) - r - 1)), by1 = int(std::ceil(std::max(y0, y1) + r + 1));
  const double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
  for (int py = std::max(0, by0); py <= std::min(h_ - 1, by1); ++py) {
    for (int px = std::max(0, bx0); px <= std::min(w_ - 1, bx1); ++px) {
      const double cx = px + 0.5, cy = py + 0.5;  // distance from pixel centre to the segment
      double t = len2 > 0 ? ((cx - x0) * dx + (cy - y0) * dy) / len2 : 0.0;
      t = std::clamp(t, 0.0, 1.0);
      const double d = std::hypot(cx - (x0 + t * dx), cy - (y0 + t * dy));
      const double cover = std::clamp(r + 0.5 - d, 0.0, 1.0);
      if (cover > 0) blend(px, py, c, cover);
    }
  }
}

namespace {
void png_append(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  out->append(reinterpret_cast<const char*>(data), n);
}
void png_no_flush(png_structp) {}
[[noreturn]] void png_fail(png_structp png, png_const_charp msg) {
  auto* where = static_cast<std::string*>(png_get_error_ptr(png));
  throw Error(*where + ": libpng: " + msg);
}
void png_warn(png_structp, png_const_charp) {}
}  // namespace

void write_png(const std::string& path, const Image& img) {
  QKV_CHECK(img.width() > 0, "write_png", path, ": empty image");
  std::string where = "write_png " + path, bytes;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &where, png_fail, png_warn);
  QKV_CHECK(png, "write_png", path, ": png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  try {
    QKV_CHECK(info, "write_png", path, ": png_create_info_struct failed");
    png_set_write_fn(png, &bytes, png_append, png_no_flush);
    png_set_IHDR(png, info, img.width(), img.height(), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < img.height(); ++y)
      png_write_row(png, const_cast<png_bytep>(&img.pixels()[size_t(y) * img.width() * 3]));
    png_write_end(png, nullptr);
  } catch (...) {
    png_destroy_write_struct(&png, &info);
    throw;
  }
  png_destroy_write_struct(&png, &info);
  write_file_atomic(path, bytes);
}

Image read_png(const std::string& path) {
  const std::string data = read_file(path);
  png_image im;
  std::memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  QKV_CHECK(png_image_begin_read_from_memory(&im, data.data(), data.size()), "read_png", path,
            ": not a PNG file (", im.message, ")");
  im.format = PNG_FORMAT_RGB;
  Image img(int(im.width), int(im.height));
  std::vector<uint8_t> buf(PNG_IMAGE_SIZE(im));
  png_color white{255, 255, 255};
  const bool ok = png_image_finish_read(&im, &white, buf.data(), 0, nullptr);
  const std::string msg = im.message;
  png_image_free(&im);
  QKV_CHECK(ok, "read_png", path, ": ", msg);
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const uint8_t* p = &buf[(size_t(y) * img.width() + x) * 3];
      img.set(x, y, {p[0], p[1], p[2]});
    }
  return img;
}

}  // namespace qkv::viz
