// PNG and SVG canvases.
#include "canvas.h"

#include <cstdio>

namespace qkv::viz::detail {

void PngCanvas::frame(double x, double y, double w, double h, Rgb c, double lw) {
  img_.fill_rect(x, y, w, lw, c);
  img_.fill_rect(x, y + h - lw, w, lw, c);
  img_.fill_rect(x, y, lw, h, c);
  img_.fill_rect(x + w - lw, y, lw, h, c);
}

void PngCanvas::polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double w) {
  for (size_t i = 1; i < pts.size(); ++i)
    img_.line(pts[i - 1].first, pts[i - 1].second, pts[i].first, pts[i].second, c, w);
}

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;  // trim trailing zeros: "12.50" -> "12.5", "3.00" -> "3"
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}
}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n') {
          out += ' ';  // control characters are not allowed in XML 1.0
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string ellipsize(const Canvas& c, const std::string& s, double px, double max_w) {
  if (c.text_width(s, px) <= max_w) return s;
  std::string t = s;
  while (!t.empty()) {
    do t.pop_back();  // drop a whole UTF-8 sequence
    while (!t.empty() && (static_cast<unsigned char>(t.back()) & 0xC0) == 0x80);
    if (!t.empty() && (static_cast<unsigned char>(t.back()) & 0xC0) == 0xC0) t.pop_back();
    if (c.text_width(t + "\u2026", px) <= max_w) return t + "\u2026";
  }
  return "\u2026";
}

SvgCanvas::SvgCanvas(const Font& f, int w, int h) : Canvas(f) {
  os_ << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
      << "\" viewBox=\"0 0 " << w << " " << h << "\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
      << "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" << w << "\" height=\"" << h
      << "\" fill=\"#ffffff\"/>\n";
}

void SvgCanvas::rect(double x, double y, double w, double h, Rgb fill, const char* cls) {
  os_ << "<rect";
  if (cls) os_ << " class=\"" << cls << "\"";
  os_ << " x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w) << "\" height=\""
      << num(h) << "\" fill=\"" << to_hex(fill) << "\"/>\n";
}

void SvgCanvas::frame(double x, double y, double w, double h, Rgb c, double lw) {
  os_ << "<rect class=\"frame\" x=\"" << num(x + lw / 2) << "\" y=\"" << num(y + lw / 2)
      << "\" width=\"" << num(w - lw) << "\" height=\"" << num(h - lw) << "\" fill=\"none\" stroke=\""
      << to_hex(c) << "\" stroke-width=\"" << num(lw) << "\"/>\n";
}

void SvgCanvas::polyline(const std::vector<std::pair<double, double>>& pts, Rgb c, double w) {
  os_ << "<polyline fill=\"none\" stroke=\"" << to_hex(c) << "\" stroke-width=\"" << num(w)
      << "\" stroke-linejoin=\"round\" stroke-linecap=\"round\" points=\"";
  for (size_t i = 0; i < pts.size(); ++i)
    os_ << (i ? " " : "") << num(pts[i].first) << "," << num(pts[i].second);
  os_ << "\"/>\n";
}

void SvgCanvas::dot(double x, double y, double r, Rgb c) {
  os_ << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"" << num(r) << "\" fill=\""
      << to_hex(c) << "\"/>\n";
}

void SvgCanvas::text(double x, double y, const std::string& s, double px, Rgb c, Anchor a,
                     bool vertical, bool bold) {
  static const char* anchors[] = {"start", "middle", "end"};
  os_ << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" font-size=\"" << num(px)
      << "\" fill=\"" << to_hex(c) << "\" text-anchor=\"" << anchors[int(a)] << "\"";
  if (bold) os_ << " font-weight=\"bold\"";
  if (vertical) os_ << " transform=\"rotate(-90 " << num(x) << " " << num(y) << ")\"";
  os_ << ">" << xml_escape(s) << "</text>\n";
}

std::string SvgCanvas::finish() {
  os_ << "</svg>\n";
  return os_.str();
}

}  // namespace qkv::viz::detail
