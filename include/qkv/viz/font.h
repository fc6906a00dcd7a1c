// qkv/viz/font.h - anti-aliased text for PNG figures through FreeType, with DejaVu Sans
// (Debian fonts-dejavu-core: Latin incl. umlauts, Greek, Cyrillic and many symbols).
#pragma once
#include <memory>
#include <string>

#include "qkv/viz/image.h"

namespace qkv::viz {

enum class Anchor { Start, Middle, End };  // where the given point sits along the text

// $QKV_FONT if set, else /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf (and -Bold.ttf).
std::string default_font_path(bool bold = false);

class Font {
 public:
  // Loads the regular and bold faces; qkv::Error names a missing/unreadable font file.
  Font(const std::string& regular_path = default_font_path(false),
       const std::string& bold_path = default_font_path(true));
  ~Font();
  Font(const Font&) = delete;
  Font& operator=(const Font&) = delete;

  double text_width(const std::string& utf8, double px, bool bold = false) const;
  double ascent(double px) const;  // above the baseline, pixels
  // Draws UTF-8 text with its baseline at y. vertical: rotated 90 degrees counter-clockwise
  // (reads bottom to top), the anchor then measured upwards from (x, y) and x is the baseline.
  void draw(Image& img, double x, double y, const std::string& utf8, double px, Rgb color,
            Anchor anchor = Anchor::Start, bool vertical = false, bool bold = false) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qkv::viz
