// src/viz/canvas.h - the drawing surface the figures are laid out on, once, and rendered to
// either a PNG (raster + FreeType) or an SVG (vector, text as <text>). Coordinates in pixels,
// y down; text y is the baseline.
#pragma once
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "qkv/viz/font.h"
#include "qkv/viz/image.h"

namespace qkv::viz::detail {

class Canvas {
 public:
  virtual ~Canvas() = default;
  // `cls` tags SVG elements (class="..."), so tests can find e.g. the matrix cells.
  virtual void rect(double x, double y, double w, double h, Rgb fill, const char* cls = nullptr) = 0;
  virtual void frame(double x, double y, double w, double h, Rgb stroke, double width) = 0;
  virtual void polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double width) = 0;
  virtual void dot(double x, double y, double r, Rgb c) = 0;
  virtual void text(double x, double y, const std::string& s, double px, Rgb c,
                    Anchor a = Anchor::Start, bool vertical = false, bool bold = false) = 0;
  double text_width(const std::string& s, double px, bool bold = false) const {
    return font_.text_width(s, px, bold);
  }

 protected:
  explicit Canvas(const Font& f) : font_(f) {}
  const Font& font_;
};

class PngCanvas : public Canvas {
 public:
  PngCanvas(const Font& f, int w, int h) : Canvas(f), img_(w, h) {}
  void rect(double x, double y, double w, double h, Rgb fill, const char*) override {
    img_.fill_rect(x, y, w, h, fill);
  }
  void frame(double x, double y, double w, double h, Rgb c, double lw) override;
  void polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double w) override;
  void dot(double x, double y, double r, Rgb c) override { img_.line(x, y, x, y, c, 2 * r); }
  void text(double x, double y, const std::string& s, double px, Rgb c, Anchor a, bool vertical,
            bool bold) override {
    font_.draw(img_, x, y, s, px, c, a, vertical, bold);
  }
  const Image& image() const { return img_; }

 private:
  Image img_;
};

class SvgCanvas : public Canvas {
 public:
  SvgCanvas(const Font& f, int w, int h);
  void rect(double x, double y, double w, double h, Rgb fill, const char* cls) override;
  void frame(double x, double y, double w, double h, Rgb c, double lw) override;
  void polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double w) override;
  void dot(double x, double y, double r, Rgb c) override;
  void text(double x, double y, const std::string& s, double px, Rgb c, Anchor a, bool vertical,
            bool bold) override;
  std::string finish();  // the complete document

 private:
  std::ostringstream os_;
};

std::string xml_escape(const std::string& s);
// "…"-shortened so that its width at px stays within max_w.
std::string ellipsize(const Canvas& c, const std::string& s, double px, double max_w);

}  // namespace qkv::viz::detail
