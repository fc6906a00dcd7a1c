// qkv/viz/image.h - an 8-bit RGB raster with anti-aliased drawing, and PNG I/O (libpng).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::viz {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};
Rgb rgb_hex(uint32_t hex);            // 0xRRGGBB
std::string to_hex(Rgb c);            // "#rrggbb"

class Image {
 public:
  Image() = default;
  Image(int width, int height, Rgb background = {255, 255, 255});
  int width() const { return w_; }
  int height() const { return h_; }
  Rgb at(int x, int y) const;                       // throws outside the image
  void set(int x, int y, Rgb c);                    // ignores pixels outside
  void blend(int x, int y, Rgb c, double alpha);    // alpha in [0,1]; ignores outside
  // Axis-aligned rectangle [x, x+w) x [y, y+h) with fractional edges anti-aliased.
  void fill_rect(double x, double y, double w, double h, Rgb c);
  // Anti-aliased segment of the given stroke width (round caps).
  void line(double x0, double y0, double x1, double y1, Rgb c, double width);
  const std::vector<uint8_t>& pixels() const { return px_; }  // row-major RGB

 private:
  int w_ = 0, h_ = 0;
  std::vector<uint8_t> px_;
};

// Writes an 8-bit RGB PNG atomically (temporary file, fsync, rename); qkv::Error names the path.
void write_png(const std::string& path, const Image& img);
// Reads any PNG libpng understands, converted to 8-bit RGB (alpha composited on white).
Image read_png(const std::string& path);

}  // namespace qkv::viz
