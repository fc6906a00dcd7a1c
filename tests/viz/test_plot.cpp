// Line plots: tick placement, the metrics JSONL reader's grouping, and the rendered PNG/SVG
// (decoded back: size, the series colours are present, the SVG parses with xml.etree).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "qkv/util/error.h"
#include "qkv/viz/image.h"
#include "qkv/viz/plot.h"
#include "viz_test_util.h"

using namespace qkv::viz;
using qkv::testing::python;
using qkv::testing::tmp_path;

namespace {
int count(const Image& img, Rgb c) {
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) n += img.at(x, y) == c;
  return n;
}

std::string write_metrics() {
  const std::string path = tmp_path("metrics.jsonl");
  std::ofstream f(path);
  for (int s = 0; s <= 2000; s += 50) {
    f << "{\"step\": " << s << ", \"epoch\": " << s / 1000 << ", \"train_loss\": " << 8.0 / (1 + s / 300.0)
      << ", \"lr\": " << 7e-4 * std::min(1.0, s / 400.0) << ", \"tokens_per_s\": " << 9000 + s % 300 << "}\n";
    if (s % 500 == 0)
      f << "{\"step\": " << s << ", \"valid_loss\": " << 8.5 / (1 + s / 350.0) << ", \"valid_bleu\": "
        << 25.0 * s / 2000 << ", \"note\": \"text is ignored\"}\n";
  }
  f << "\n";  // blank lines are allowed
  return path;
}
}  // namespace

TEST(Plot, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 10), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(0, 2000), (std::vector<double>{0, 500, 1000, 1500, 2000}));
  auto t = nice_ticks(0.13, 0.87);  // raw step 0.148 -> 0.2
  ASSERT_EQ(t.size(), 4u);
  EXPECT_NEAR(t[0], 0.2, 1e-12);
  EXPECT_NEAR(t[3], 0.8, 1e-12);
  auto u = nice_ticks(-1, 1);  // step 0.5, includes an exact 0
  EXPECT_EQ(u.size(), 5u);
  EXPECT_EQ(u[2], 0.0);
  EXPECT_THROW(nice_ticks(1, 1), qkv::Error);
}

TEST(Plot, MetricsGroupedIntoPanels) {
  const std::string path = write_metrics();
  auto panels = metrics_panels_from_jsonl(path);
  ASSERT_EQ(panels.size(), 4u);
  EXPECT_EQ(panels[0].title, "Loss");
  ASSERT_EQ(panels[0].series.size(), 2u);
  EXPECT_EQ(panels[0].series[0].name, "train_loss");
  EXPECT_EQ(panels[0].series[0].x.size(), 41u);
  EXPECT_EQ(panels[0].series[1].name, "valid_loss");
  EXPECT_EQ(panels[0].series[1].x.size(), 5u);
  EXPECT_EQ(panels[1].title, "BLEU / chrF");
  EXPECT_EQ(panels[2].title, "Learning rate");
  EXPECT_EQ(panels[3].title, "Throughput");
  EXPECT_DOUBLE_EQ(panels[1].series[0].y.back(), 25.0);
  std::remove(path.c_str());
}

TEST(Plot, PngAndSvgRender) {
  const std::string metrics = write_metrics();
  auto panels = metrics_panels_from_jsonl(metrics);
  LinePlotOptions o;
  o.title = "en-de transformer";
  const std::string png = tmp_path("curves.png"), svg = tmp_path("curves.svg");
  write_line_plot(png, panels, o);
  Image img = read_png(png);
  EXPECT_EQ(img.width(), 960);
  EXPECT_EQ(img.height(), 24 + 34 + 4 * 320);
  EXPECT_GT(count(img, rgb_hex(0x1f77b4)), 500) << "first series (blue) drawn";
  EXPECT_GT(count(img, rgb_hex(0xff7f0e)), 100) << "second series (orange) drawn";
  write_line_plot(svg, panels, o);
  std::istringstream out(python(
      "import sys, xml.etree.ElementTree as ET\nns = '{http://www.w3.org/2000/svg}'\n"
      "root = ET.parse(sys.argv[1]).getroot()\n"
      "print(sum(1 for p in root.iter(ns + 'polyline')))\n"
      "print(sum(1 for t in root.iter(ns + 'text') if t.text in ('train_loss', 'valid_bleu')))\n", svg));
  int lines = 0, legend = 0;
  out >> lines >> legend;
  EXPECT_EQ(lines, 2 * 5);  // 5 series, each a curve plus its legend swatch
  EXPECT_EQ(legend, 2);
  std::remove(png.c_str());
  std::remove(svg.c_str());
  std::remove(metrics.c_str());
}

TEST(Plot, Errors) {
  Series s{"a", {1, 2, 3}, {1, 2}};
  EXPECT_THROW(write_line_plot_png(tmp_path("e.png"), std::vector<Series>{s}), qkv::Error);
  const std::string bad = tmp_path("bad.jsonl");
  std::ofstream(bad) << "{\"step\": 1, \"loss\": 2}\n{\"step\": 2, loss}\n";
  try {
    metrics_panels_from_jsonl(bad);
    FAIL();
  } catch (const qkv::Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad + ":2"), std::string::npos) << e.what();
  }
  std::ofstream(bad) << "{\"epoch\": 1}\n";
  EXPECT_THROW(metrics_panels_from_jsonl(bad), qkv::Error);
  EXPECT_THROW(metrics_panels_from_jsonl("/nonexistent/m.jsonl"), qkv::Error);
  std::remove(bad.c_str());
}
