// qkv/viz/heatmap.h - attention and positional-encoding heatmaps as PNG or SVG: a grid of
// panels (one per layer/head, or their average), token labels on both axes (columns vertical),
// one shared colour bar, panel titles and a figure title.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "qkv/viz/colormap.h"

namespace qkv::viz {

struct Heatmap {
  std::vector<float> values;             // (rows, cols) row-major; NaN/inf cells drawn grey
  int rows = 0, cols = 0;                // attention: rows = target tokens, cols = source tokens
  std::vector<std::string> row_labels;   // empty or `rows` UTF-8 labels
  std::vector<std::string> col_labels;   // empty or `cols` labels
  std::string title;                     // panel title, e.g. "layer 2 head 0"
};

struct HeatmapOptions {
  std::string title;                       // figure title
  Colormap colormap = Colormap::Viridis;
  double vmin = NAN, vmax = NAN;           // colour scale; NaN: from the data (Diverging: +-max|v|)
  int ncols = 0;                           // panels per grid row; 0: ceil(sqrt(#panels))
  int cell_px = 0;                         // cell size; 0: from the matrix size (10..36 px)
  double font_px = 12;                     // label size (shrunk to fit small cells)
  std::string colorbar_label;              // e.g. "attention weight"
  int max_label_px = 150;                  // longer token labels are shortened with "..."
};

// Write the panels (at least one) atomically; throws qkv::Error naming the panel and field
// on inconsistent sizes, or the path on I/O failure. write_heatmap_grid picks the format from
// the extension (.png or .svg).
void write_heatmap_grid_png(const std::string& path, const std::vector<Heatmap>& panels,
                            const HeatmapOptions& opt = {});
void write_heatmap_grid_svg(const std::string& path, const std::vector<Heatmap>& panels,
                            const HeatmapOptions& opt = {});
void write_heatmap_grid(const std::string& path, const std::vector<Heatmap>& panels,
                        const HeatmapOptions& opt = {});

// Element-wise mean of panels of one shape (labels from the first), e.g. the average over heads.
Heatmap average_heatmap(const std::vector<Heatmap>& panels, const std::string& title);

// The sinusoidal encoding of Vaswani et al. (2017) sec. 3.5, rows = positions 0..max_len-1,
// cols = dimensions: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)).
// Values from nn::sinusoidal_table; labels every position/dimension; draw with
// Colormap::Diverging and vmin -1, vmax 1.
Heatmap sinusoidal_positional_encoding(int max_len, int d_model);

}  // namespace qkv::viz
