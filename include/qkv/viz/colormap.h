// qkv/viz/colormap.h - colour maps as piecewise-linear tables over [0, 1]:
//   Viridis   - matplotlib's perceptually uniform map, sampled at its 9 published stops
//               (#440154 ... #fde725), for attention weights;
//   Diverging - ColorBrewer RdBu (9 classes, reversed: blue = low, white = middle, red = high),
//               for signed values such as positional encodings.
#pragma once
#include <vector>

#include "qkv/viz/image.h"

namespace qkv::viz {

enum class Colormap { Viridis, Diverging };

const std::vector<Rgb>& colormap_stops(Colormap cmap);  // evenly spaced over [0, 1]
// Linear interpolation between the stops (t clamped to [0, 1], NaN -> 0); channels rounded.
Rgb colormap(Colormap cmap, double t);

}  // namespace qkv::viz
