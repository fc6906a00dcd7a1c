// Heatmap PNG/SVG: the PNG is decoded back (libpng here, Pillow as an independent cross-check),
// every cell's colour is compared with matplotlib's viridis (its published stops, interpolated
// in viz_test_util.h); labels must leave ink in the label areas; the SVG must be well-formed XML
// (python xml.etree) with one cell <rect> per matrix entry and the expected <text> elements.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "qkv/util/error.h"
#include "qkv/viz/font.h"
#include "qkv/viz/heatmap.h"
#include "viz_test_util.h"

using namespace qkv::viz;
using qkv::testing::python;
using qkv::testing::tmp_path;
using qkv::testing::viridis_ref;

namespace {

Heatmap sample(int rows, int cols, const std::string& title) {
  Heatmap h;
  h.rows = rows, h.cols = cols, h.title = title;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) h.values.push_back(float((r * cols + c) % 7) / 6.0f);  // 0..1
  for (int r = 0; r < rows; ++r) h.row_labels.push_back("Zielwort_" + std::to_string(r) + "ü");
  for (int c = 0; c < cols; ++c) h.col_labels.push_back("source" + std::to_string(c));
  return h;
}

// Bounding box of the pixels with exactly colour c.
struct Box { int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1, n = 0; };
Box find(const Image& img, Rgb c) {
  Box b;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x)
      if (img.at(x, y) == c) b.x0 = std::min(b.x0, x), b.y0 = std::min(b.y0, y), b.x1 = std::max(b.x1, x),
                             b.y1 = std::max(b.y1, y), ++b.n;
  return b;
}

int ink(const Image& img, int x0, int y0, int x1, int y1) {  // non-white pixels in a region
  int n = 0;
  for (int y = std::max(0, y0); y < std::min(img.height(), y1); ++y)
    for (int x = std::max(0, x0); x < std::min(img.width(), x1); ++x) n += img.at(x, y) != Rgb{255, 255, 255};
  return n;
}

}  // namespace

TEST(Heatmap, PngCellsMatchViridisAndLabelsAreDrawn) {
  Heatmap h;
  h.rows = 3, h.cols = 4;
  h.values = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f, NAN};
  h.row_labels = {"Das", "Haus", "ist"};
  h.col_labels = {"The", "house", "is", "big"};
  HeatmapOptions o;
  o.cell_px = 24;
  o.title = "cross-attention";
  const std::string path = tmp_path("one.png");
  write_heatmap_grid_png(path, {h}, o);
  Image img = read_png(path);

  // the max cell (row 2, col 2, value 1.0) is the only area of exactly viridis(1) = #fde725
  const Box mx = find(img, viridis_ref(1.0));
  ASSERT_EQ(mx.n, 23 * 23) << "cell 24 px minus the 1 px grid line";
  const int x0 = mx.x0 - 2 * 24, y0 = mx.y0 - 2 * 24;  // matrix origin
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      const float v = h.values[r * 4 + c];
      const Rgb want = std::isnan(v) ? Rgb{208, 208, 208} : viridis_ref(v);  // scale = data [0, 1]
      const Rgb got = img.at(x0 + c * 24 + 11, y0 + r * 24 + 11);
      EXPECT_EQ(got, want) << "cell " << r << "," << c << " got " << to_hex(got) << " want " << to_hex(want);
    }
  EXPECT_GT(ink(img, x0 - 60, y0, x0 - 2, y0 + 3 * 24), 50) << "row labels";
  EXPECT_GT(ink(img, x0, y0 + 3 * 24 + 2, x0 + 4 * 24, y0 + 3 * 24 + 40), 50) << "column labels";
  EXPECT_GT(ink(img, 0, 0, img.width(), y0 - 4), 50) << "title";
  EXPECT_GT(ink(img, x0 + 4 * 24 + 10, y0, img.width(), y0 + 3 * 24), 200) << "colour bar";
  EXPECT_EQ(ink(img, 0, 0, img.width(), 3), 0) << "top margin stays clear";
  EXPECT_EQ(ink(img, 0, img.height() - 3, img.width(), img.height()), 0) << "bottom margin";
  EXPECT_EQ(ink(img, img.width() - 3, 0, img.width(), img.height()), 0) << "right margin";

  // Pillow decodes the same size and pixels (independent PNG reader)
  std::istringstream pil(python(
      "import sys\nfrom PIL import Image\nim = Image.open(sys.argv[1]).convert('RGB')\n"
      "print(im.size[0], im.size[1])\nprint(*im.getpixel((" + std::to_string(mx.x0 + 5) + ", " +
          std::to_string(mx.y0 + 5) + ")))\n", path));
  int w, hh, r, g, b;
  pil >> w >> hh >> r >> g >> b;
  EXPECT_EQ(w, img.width());
  EXPECT_EQ(hh, img.height());
  EXPECT_EQ((Rgb{uint8_t(r), uint8_t(g), uint8_t(b)}), viridis_ref(1.0));
  std::remove(path.c_str());
}

TEST(Heatmap, GridOfPanelsAndFixedScale) {
  std::vector<Heatmap> panels;
  for (int i = 0; i < 5; ++i) panels.push_back(sample(6, 8, "layer 0 head " + std::to_string(i)));
  HeatmapOptions o;
  o.ncols = 3;
  o.cell_px = 16;
  o.vmin = 0;
  o.vmax = 2;  // values reach 1 -> mid-scale; nothing may reach viridis(1)
  const std::string path = tmp_path("grid.png");
  write_heatmap_grid_png(path, panels, o);
  Image img = read_png(path);
  EXPECT_EQ(find(img, viridis_ref(1.0)).n, 0);
  // value 1.0 at t = 0.5: 5 panels x 6 cells of 15x15 each ((r*8+c) % 7 == 6 happens 6 times)
  EXPECT_EQ(find(img, viridis_ref(0.5)).n, 5 * 6 * 15 * 15);
  // 3 panels wide, two grid rows: wider than 3 matrices, taller than 2
  EXPECT_GT(img.width(), 3 * 8 * 16);
  EXPECT_GT(img.height(), 2 * 6 * 16);
  std::remove(path.c_str());
}

TEST(Heatmap, SvgIsWellFormedWithOneRectPerCell) {
  std::vector<Heatmap> panels = {sample(3, 5, "head 0"), sample(4, 2, "head 1 <&>")};
  HeatmapOptions o;
  o.title = "attention \"quotes\" & ampersands";
  o.colorbar_label = "weight";
  const std::string path = tmp_path("grid.svg");
  write_heatmap_grid_svg(path, panels, o);
  std::istringstream out(python(
      "import sys, xml.etree.ElementTree as ET\nns = '{http://www.w3.org/2000/svg}'\n"
      "root = ET.parse(sys.argv[1]).getroot()\n"
      "rects = root.iter(ns + 'rect')\nprint(sum(1 for r in rects if r.get('class') == 'cell'))\n"
      "print(sum(1 for t in root.iter(ns + 'text')))\n"
      "print(sum(1 for t in root.iter(ns + 'text') if t.text == 'head 1 <&>'))\n", path));
  int cells = -1, texts = -1, escaped = -1;
  out >> cells >> texts >> escaped;
  EXPECT_EQ(cells, 3 * 5 + 4 * 2);
  // labels (3+5 + 4+2) + 2 panel titles + figure title + 5 colour-bar ticks + colour-bar label
  EXPECT_EQ(texts, 14 + 2 + 1 + 5 + 1);
  EXPECT_EQ(escaped, 1);
  std::remove(path.c_str());
}

TEST(Heatmap, PositionalEncodingDiverging) {
  // Vaswani et al. 2017 sec. 3.5, d_model 8: PE(p, 2i) = sin(p / 10000^(2i/8)), PE(p, 2i+1) = cos(...)
  Heatmap pe = sinusoidal_positional_encoding(12, 8);
  ASSERT_EQ(pe.rows, 12);
  ASSERT_EQ(pe.cols, 8);
  EXPECT_FLOAT_EQ(pe.values[1 * 8 + 0], float(std::sin(1.0)));
  EXPECT_FLOAT_EQ(pe.values[1 * 8 + 1], float(std::cos(1.0)));
  EXPECT_FLOAT_EQ(pe.values[3 * 8 + 2], float(std::sin(3.0 / std::pow(10000.0, 2.0 / 8))));
  EXPECT_FLOAT_EQ(pe.values[5 * 8 + 7], float(std::cos(5.0 / std::pow(10000.0, 6.0 / 8))));
  HeatmapOptions o;
  o.colormap = Colormap::Diverging;
  o.vmin = -1, o.vmax = 1;
  o.cell_px = 20;
  const std::string path = tmp_path("pe.png");
  write_heatmap_grid_png(path, {pe}, o);
  Image img = read_png(path);
  // position 0: sin 0 = 0 -> the middle colour (#f7f7f7), cos 0 = 1 -> the top colour (#b2182b)
  EXPECT_GE(find(img, rgb_hex(0xb2182b)).n, 4 * 19 * 19);  // the 4 cos columns of row 0
  EXPECT_GE(find(img, rgb_hex(0xf7f7f7)).n, 4 * 19 * 19);
  std::remove(path.c_str());
}

TEST(Heatmap, AverageAndErrors) {
  Heatmap a = sample(2, 2, "a"), b = sample(2, 2, "b");
  b.values = {1, 1, 1, 1};
  Heatmap m = average_heatmap({a, b}, "mean");
  EXPECT_FLOAT_EQ(m.values[1], (a.values[1] + 1.0f) / 2);
  EXPECT_EQ(m.title, "mean");
  Heatmap bad = sample(2, 3, "bad");
  bad.values.pop_back();
  EXPECT_THROW(write_heatmap_grid_png(tmp_path("x.png"), {bad}), qkv::Error);
  bad = sample(2, 3, "bad");
  bad.col_labels.pop_back();
  EXPECT_THROW(write_heatmap_grid_png(tmp_path("x.png"), {bad}), qkv::Error);
  EXPECT_THROW(write_heatmap_grid_png(tmp_path("x.png"), {}), qkv::Error);
  EXPECT_THROW(average_heatmap({sample(2, 2, "a"), sample(3, 2, "b")}, "m"), qkv::Error);
  EXPECT_THROW(write_heatmap_grid(tmp_path("x.jpg"), {a}), qkv::Error);
  EXPECT_THROW(write_heatmap_grid_png("/nonexistent-dir/x.png", {a}), qkv::Error);
  try {
    Font f("/nonexistent/font.ttf", "/nonexistent/bold.ttf");
    FAIL();
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/font.ttf"), std::string::npos) << e.what();
  }
}
