// Heatmap grids: layout once, render to PNG or SVG through the canvas.
#include "qkv/viz/heatmap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "canvas.h"
#include "qkv/nn/positional.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"
#include "qkv/viz/plot.h"

namespace qkv::viz {
namespace {

const Rgb kText{33, 33, 33}, kMuted{90, 90, 90}, kMissing{208, 208, 208}, kFrame{120, 120, 120};

void validate(const std::vector<Heatmap>& panels, const char* op) {
  QKV_CHECK(!panels.empty(), op, "expected at least one heatmap panel, got none");
  for (size_t i = 0; i < panels.size(); ++i) {
    const Heatmap& h = panels[i];
    QKV_CHECK(h.rows > 0 && h.cols > 0, op, "panel ", i, " ('", h.title, "'): rows and cols must be > 0, got ",
              h.rows, "x", h.cols);
    QKV_CHECK(h.values.size() == size_t(h.rows) * h.cols, op, "panel ", i, " ('", h.title, "'): values has ",
              h.values.size(), " entries, expected rows*cols = ", size_t(h.rows) * h.cols);
    QKV_CHECK(h.row_labels.empty() || int(h.row_labels.size()) == h.rows, op, "panel ", i,
              ": row_labels has ", h.row_labels.size(), " entries, expected 0 or ", h.rows);
    QKV_CHECK(h.col_labels.empty() || int(h.col_labels.size()) == h.cols, op, "panel ", i,
              ": col_labels has ", h.col_labels.size(), " entries, expected 0 or ", h.cols);
  }
}

std::string tick_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// Round values inside [lo, hi] (about 5), or the single value when the scale is flat.
std::vector<double> colorbar_ticks(double lo, double hi) {
  if (!(hi > lo)) return {lo};
  return nice_ticks(lo, hi, 4);
}

struct Layout {
  int n = 0, ncols = 0, nrows = 0, cell = 0, stride_r = 1, stride_c = 1;
  double label_px = 12, title_px = 13, fig_title_px = 16;
  double row_w = 0, col_h = 0, panel_title_h = 0, fig_title_h = 0;
  double panel_w = 0, panel_h = 0, gap = 28, margin = 18;
  double cb_x = 0, cb_y = 0, cb_w = 16, cb_h = 0, tick_w = 0;
  double vmin = 0, vmax = 1;
  int width = 0, height = 0;
};

Layout layout(const detail::Canvas& cv, const std::vector<Heatmap>& ps, const HeatmapOptions& o) {
  Layout L;
  L.n = int(ps.size());
  L.ncols = o.ncols > 0 ? std::min(o.ncols, L.n) : int(std::ceil(std::sqrt(double(L.n))));
  L.nrows = (L.n + L.ncols - 1) / L.ncols;
  int R = 0, C = 0;
  bool titled = false;
  for (auto& p : ps) R = std::max(R, p.rows), C = std::max(C, p.cols), titled |= !p.title.empty();
  const double base = L.n == 1 ? 520.0 : 360.0;
  L.cell = o.cell_px > 0 ? o.cell_px : std::clamp(int(base / std::max(R, C)), 4, 36);
  L.label_px = std::clamp(std::min(o.font_px, L.cell * 0.8), 8.0, o.font_px);
  L.stride_r = L.stride_c = std::max(1, int(std::ceil((L.label_px + 2) / L.cell)));
  for (auto& p : ps) {
    for (auto& s : p.row_labels)
      L.row_w = std::max(L.row_w, std::min<double>(cv.text_width(s, L.label_px), o.max_label_px));
    for (auto& s : p.col_labels)
      L.col_h = std::max(L.col_h, std::min<double>(cv.text_width(s, L.label_px), o.max_label_px));
  }
  L.row_w = std::ceil(L.row_w) + (L.row_w > 0 ? 6 : 0);
  L.col_h = std::ceil(L.col_h) + (L.col_h > 0 ? 6 : 0);
  L.panel_title_h = titled ? std::ceil(L.title_px * 1.8) : 0;
  L.fig_title_h = o.title.empty() ? 0 : std::ceil(L.fig_title_px * 2.2);
  L.panel_w = L.row_w + C * L.cell;
  L.panel_h = L.panel_title_h + R * L.cell + L.col_h;

  // colour scale
  double lo = INFINITY, hi = -INFINITY;
  for (auto& p : ps)
    for (float v : p.values)
      if (std::isfinite(v)) lo = std::min(lo, double(v)), hi = std::max(hi, double(v));
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (o.colormap == Colormap::Diverging) {
    const double m = std::max(std::fabs(lo), std::fabs(hi));
    lo = -m, hi = m;
  }
  L.vmin = std::isnan(o.vmin) ? lo : o.vmin;
  L.vmax = std::isnan(o.vmax) ? hi : o.vmax;
  QKV_CHECK(L.vmax >= L.vmin, "heatmap", "vmax (", L.vmax, ") must be >= vmin (", L.vmin, ")");

  const double grid_w = L.ncols * L.panel_w + (L.ncols - 1) * L.gap;
  const double grid_h = L.nrows * L.panel_h + (L.nrows - 1) * L.gap;
  L.cb_x = L.margin + grid_w + 24;
  L.cb_y = L.margin + L.fig_title_h + L.panel_title_h;
  L.cb_h = std::max(120.0, std::min(double(R * L.cell), 360.0));
  for (double v : colorbar_ticks(L.vmin, L.vmax)) L.tick_w = std::max(L.tick_w, cv.text_width(tick_text(v), 11));
  double right = L.cb_x + L.cb_w + 6 + L.tick_w + (o.colorbar_label.empty() ? 0 : 22) + L.margin;
  L.width = int(std::ceil(std::max(right, L.margin * 2 + cv.text_width(o.title, L.fig_title_px, true))));
  L.height = int(std::ceil(L.margin * 2 + L.fig_title_h + std::max(grid_h, L.panel_title_h + L.cb_h + 8)));
  return L;
}

void draw(detail::Canvas& cv, const Layout& L, const std::vector<Heatmap>& ps, const HeatmapOptions& o) {
  if (!o.title.empty())
    cv.text(L.width / 2.0, L.margin + L.fig_title_px, o.title, L.fig_title_px, kText, Anchor::Middle, false, true);
  const double span = L.vmax - L.vmin;
  const double gapcell = L.cell >= 12 ? 1 : 0;  // white grid lines between larger cells
  for (int i = 0; i < L.n; ++i) {
    const Heatmap& h = ps[i];
    const double px = L.margin + (i % L.ncols) * (L.panel_w + L.gap);
    const double py = L.margin + L.fig_title_h + (i / L.ncols) * (L.panel_h + L.gap);
    const double mx = px + L.row_w, my = py + L.panel_title_h;  // matrix origin
    const double mw = h.cols * L.cell, mh = h.rows * L.cell;
    if (!h.title.empty())
      cv.text(mx + mw / 2, py + L.title_px * 1.15,
              detail::ellipsize(cv, h.title, L.title_px, L.panel_w), L.title_px, kText, Anchor::Middle,
              false, true);
    for (int r = 0; r < h.rows; ++r)
      for (int c = 0; c < h.cols; ++c) {
        const float v = h.values[size_t(r) * h.cols + c];
        const Rgb col = !std::isfinite(v) ? kMissing
                        : colormap(o.colormap, span > 0 ? (v - L.vmin) / span : 0.5);
        cv.rect(mx + c * L.cell, my + r * L.cell, L.cell - gapcell, L.cell - gapcell, col, "cell");
      }
    const double cap = 0.36 * L.label_px;  // baseline offset that centres lower-case text
    for (int r = 0; r < int(h.row_labels.size()); r += L.stride_r)
      cv.text(mx - 5, my + (r + 0.5) * L.cell + cap, detail::ellipsize(cv, h.row_labels[r], L.label_px, o.max_label_px),
              L.label_px, kText, Anchor::End);
    for (int c = 0; c < int(h.col_labels.size()); c += L.stride_c)
      cv.text(mx + (c + 0.5) * L.cell + cap, my + mh + 5,
              detail::ellipsize(cv, h.col_labels[c], L.label_px, o.max_label_px), L.label_px, kText,
              Anchor::End, true);
    cv.frame(mx - 1, my - 1, mw + 2 - gapcell, mh + 2 - gapcell, kFrame, 1);
  }
  // colour bar: 64 bands, top = vmax
  const int bands = 64;
  for (int k = 0; k < bands; ++k) {
    const double t = 1.0 - (k + 0.5) / bands;
    cv.rect(L.cb_x, L.cb_y + L.cb_h * k / bands, L.cb_w, L.cb_h / bands + 0.5, colormap(o.colormap, t),
            "colorbar");
  }
  cv.frame(L.cb_x - 1, L.cb_y - 1, L.cb_w + 2, L.cb_h + 2, kFrame, 1);
  for (double v : colorbar_ticks(L.vmin, L.vmax)) {
    const double y = L.cb_y + L.cb_h * (span > 0 ? 1.0 - (v - L.vmin) / span : 0.5);
    cv.rect(L.cb_x + L.cb_w, y - 0.5, 4, 1, kFrame);
    cv.text(L.cb_x + L.cb_w + 7, y + 4, tick_text(v), 11, kMuted);
  }
  if (!o.colorbar_label.empty())
    cv.text(L.cb_x + L.cb_w + 10 + L.tick_w + 12, L.cb_y + L.cb_h / 2, o.colorbar_label, 12, kMuted,
            Anchor::Middle, true);
}

}  // namespace

void write_heatmap_grid_png(const std::string& path, const std::vector<Heatmap>& panels,
                            const HeatmapOptions& opt) {
  validate(panels, "write_heatmap_grid_png");
  Font font;
  detail::PngCanvas probe(font, 1, 1);
  const Layout L = layout(probe, panels, opt);
  detail::PngCanvas cv(font, L.width, L.height);
  draw(cv, L, panels, opt);
  write_png(path, cv.image());
}

void write_heatmap_grid_svg(const std::string& path, const std::vector<Heatmap>& panels,
                            const HeatmapOptions& opt) {
  validate(panels, "write_heatmap_grid_svg");
  Font font;  // text widths for the layout come from the same font the PNG uses
  detail::PngCanvas probe(font, 1, 1);
  const Layout L = layout(probe, panels, opt);
  detail::SvgCanvas cv(font, L.width, L.height);
  draw(cv, L, panels, opt);
  write_file_atomic(path, cv.finish());
}

void write_heatmap_grid(const std::string& path, const std::vector<Heatmap>& panels,
                        const HeatmapOptions& opt) {
  auto ends = [&](const char* ext) {
    const std::string e = ext;
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".svg") || ends(".SVG")) return write_heatmap_grid_svg(path, panels, opt);
  QKV_CHECK(ends(".png") || ends(".PNG"), "write_heatmap_grid", path,
            ": expected a .png or .svg file name");
  write_heatmap_grid_png(path, panels, opt);
}

Heatmap average_heatmap(const std::vector<Heatmap>& panels, const std::string& title) {
  validate(panels, "average_heatmap");
  Heatmap avg = panels[0];
  avg.title = title;
  std::vector<double> sum(avg.values.size(), 0.0);
  for (size_t i = 0; i < panels.size(); ++i) {
    QKV_CHECK(panels[i].rows == avg.rows && panels[i].cols == avg.cols, "average_heatmap", "panel ", i,
              " is ", panels[i].rows, "x", panels[i].cols, ", expected ", avg.rows, "x", avg.cols);
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += panels[i].values[k];
  }
  for (size_t k = 0; k < sum.size(); ++k) avg.values[k] = float(sum[k] / double(panels.size()));
  return avg;
}

Heatmap sinusoidal_positional_encoding(int max_len, int d_model) {
  QKV_CHECK(max_len > 0 && d_model > 0 && d_model % 2 == 0, "sinusoidal_positional_encoding",
            "expected max_len > 0 and an even d_model > 0, got ", max_len, " and ", d_model);
  Heatmap h;
  h.rows = max_len;
  h.cols = d_model;
  h.values = nn::sinusoidal_table(max_len, d_model).to_vector<float>();  // (max_len, d_model)
  for (int p = 0; p < max_len; ++p) h.row_labels.push_back(std::to_string(p));
  for (int i = 0; i < d_model; ++i) h.col_labels.push_back(std::to_string(i));
  h.title = "sinusoidal positional encoding (d_model " + std::to_string(d_model) + ")";
  return h;
}

}  // namespace qkv::viz
