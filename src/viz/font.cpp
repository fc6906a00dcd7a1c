// FreeType text rendering: glyphs rasterised to 8-bit coverage, blended into the image.
#include "qkv/viz/font.h"

#include <ft2build.h>
#include FT_FREETYPE_H

#include <cmath>
#include <cstdlib>
#include <vector>

#include "qkv/util/error.h"

namespace qkv::viz {
namespace {

std::u32string decode(const std::string& s) {  // lenient UTF-8: bad bytes become U+FFFD
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char b = s[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out.push_back(0xFFFD), ++i;
      continue;
    }
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      ok &= (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      c = (c << 6) | (s[i + k] & 0x3F);
    }
    out.push_back(ok ? c : 0xFFFD);
    i += ok ? len : 1;
  }
  return out;
}

}  // namespace

std::string default_font_path(bool bold) {
  if (const char* env = std::getenv(bold ? "QKV_FONT_BOLD" : "QKV_FONT")) return env;
  return bold ? "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
              : "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
}

struct Font::Impl {
  FT_Library lib = nullptr;
  FT_Face face[2] = {nullptr, nullptr};
  ~Impl() {
    for (FT_Face f : face)
      if (f) FT_Done_Face(f);
    if (lib) FT_Done_FreeType(lib);
  }

  FT_Face sized(bool bold, double px) const {
    FT_Face f = face[bold ? 1 : 0];
    FT_Set_Char_Size(f, 0, FT_F26Dot6(std::lround(px * 64)), 72, 72);
    return f;
  }
  // Renders the run into a coverage mask; returns width, fills mask rows [0, h) with the
  // baseline at row `asc`.
  int render(const std::u32string& text, double px, bool bold, std::vector<uint8_t>& mask,
             int& w, int& h, int& asc) const {
    FT_Face f = sized(bold, px);
    asc = int(std::ceil(f->size->metrics.ascender / 64.0));
    h = asc + int(std::ceil(-f->size->metrics.descender / 64.0)) + 1;
    double pen = 0;
    w = int(std::ceil(advance(text, px, bold))) + 2;
    mask.assign(size_t(w) * h, 0);
    FT_UInt prev = 0;
    for (char32_t c : text) {
      FT_UInt gi = FT_Get_Char_Index(f, c);
      if (prev && gi && FT_HAS_KERNING(f)) {
        FT_Vector k;
        FT_Get_Kerning(f, prev, gi, FT_KERNING_DEFAULT, &k);
        pen += k.x / 64.0;
      }
      if (FT_Load_Glyph(f, gi, FT_LOAD_RENDER) != 0) continue;
      const FT_Bitmap& bm = f->glyph->bitmap;
      const int ox = int(std::lround(pen)) + f->glyph->bitmap_left, oy = asc - f->glyph->bitmap_top;
      for (unsigned r = 0; r < bm.rows; ++r)
        for (unsigned col = 0; col < bm.width; ++col) {
          const int x = ox + int(col), y = oy + int(r);
          if (x < 0 || y < 0 || x >= w || y >= h) continue;
          uint8_t& m = mask[size_t(y) * w + x];
          m = std::max<uint8_t>(m, bm.buffer[r * bm.pitch + col]);
        }
      pen += f->glyph->advance.x / 64.0;
      prev = gi;
    }
    return w;
  }
  double advance(const std::u32string& text, double px, bool bold) const {
    FT_Face f = sized(bold, px);
    double pen = 0;
    FT_UInt prev = 0;
    for (char32_t c : text) {
      FT_UInt gi = FT_Get_Char_Index(f, c);
      if (prev && gi && FT_HAS_KERNING(f)) {
        FT_Vector k;
        FT_Get_Kerning(f, prev, gi, FT_KERNING_DEFAULT, &k);
        pen += k.x / 64.0;
      }
      if (FT_Load_Glyph(f, gi, FT_LOAD_DEFAULT) == 0) pen += f->glyph->advance.x / 64.0;
      prev = gi;
    }
    return pen;
  }
};

Font::Font(const std::string& regular, const std::string& bold) : impl_(new Impl) {
  QKV_CHECK(FT_Init_FreeType(&impl_->lib) == 0, "Font", "FreeType initialisation failed");
  const std::string paths[2] = {regular, bold};
  for (int i = 0; i < 2; ++i)
    QKV_CHECK(FT_New_Face(impl_->lib, paths[i].c_str(), 0, &impl_->face[i]) == 0, "Font",
              "cannot load font file ", paths[i],
              " (install Debian's fonts-dejavu-core, or set QKV_FONT / QKV_FONT_BOLD)");
}

Font::~Font() = default;

double Font::text_width(const std::string& utf8, double px, bool bold) const {
  return impl_->advance(decode(utf8), px, bold);
}

double Font::ascent(double px) const {
  return impl_->sized(false, px)->size->metrics.ascender / 64.0;
}

void Font::draw(Image& img, double x, double y, const std::string& utf8, double px, Rgb color,
                Anchor anchor, bool vertical, bool bold) const {
  std::vector<uint8_t> mask;
  int w = 0, h = 0, asc = 0;
  const std::u32string text = decode(utf8);
  impl_->render(text, px, bold, mask, w, h, asc);
  const double adv = impl_->advance(text, px, bold);
  const double shift = anchor == Anchor::Start ? 0 : anchor == Anchor::Middle ? adv / 2 : adv;
  const int ix = int(std::lround(x)), iy = int(std::lround(y)), s = int(std::lround(shift));
  for (int r = 0; r < h; ++r)
    for (int c = 0; c < w; ++c) {
      const uint8_t m = mask[size_t(r) * w + c];
      if (!m) continue;
      if (!vertical) {
        img.blend(ix - s + c, iy - asc + r, color, m / 255.0);
      } else {  // rotate 90 degrees counter-clockwise about (x, y): text x -> -y, text y -> x
        img.blend(ix - asc + r, iy + s - c, color, m / 255.0);
      }
    }
}

}  // namespace qkv::viz
