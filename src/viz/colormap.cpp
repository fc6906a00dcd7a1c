// Colour map tables and interpolation.
#include "qkv/viz/colormap.h"

#include <algorithm>
#include <cmath>

namespace qkv::viz {

const std::vector<Rgb>& colormap_stops(Colormap cmap) {
  static const std::vector<Rgb> viridis = {
      rgb_hex(0x440154), rgb_hex(0x482878), rgb_hex(0x3e4989), rgb_hex(0x31688e), rgb_hex(0x26828e),
      rgb_hex(0x1f9e89), rgb_hex(0x35b779), rgb_hex(0x6ece58), rgb_hex(0xfde725)};
  static const std::vector<Rgb> rdbu_r = {
      rgb_hex(0x2166ac), rgb_hex(0x4393c3), rgb_hex(0x92c5de), rgb_hex(0xd1e5f0), rgb_hex(0xf7f7f7),
      rgb_hex(0xfddbc7), rgb_hex(0xf4a582), rgb_hex(0xd6604d), rgb_hex(0xb2182b)};
  return cmap == Colormap::Viridis ? viridis : rdbu_r;
}

Rgb colormap(Colormap cmap, double t) {
  const auto& s = colormap_stops(cmap);
  if (!(t >= 0)) t = 0;  // also NaN
  t = std::min(t, 1.0);
  const double pos = t * double(s.size() - 1);
  const size_t i = std::min(size_t(pos), s.size() - 2);
  const double f = pos - double(i);
  auto lerp = [f](uint8_t a, uint8_t b) { return uint8_t(std::lround(a + (b - a) * f)); };
  return {lerp(s[i].r, s[i + 1].r), lerp(s[i].g, s[i + 1].g), lerp(s[i].b, s[i + 1].b)};
}

}  // namespace qkv::viz
