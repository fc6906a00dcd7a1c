// qkv/viz/plot.h - line plots for training curves (PNG or SVG): one or more stacked panels,
// each with several series, ticks at round numbers, grid lines, axis labels and a legend.
#pragma once
#include <string>
#include <vector>

namespace qkv::viz {

struct Series {
  std::string name;            // legend entry
  std::vector<double> x, y;    // same length; non-finite points are skipped
};

struct PlotPanel {
  std::string title;           // e.g. "Loss"
  std::string xlabel = "step";
  std::string ylabel;
  std::vector<Series> series;
};

struct LinePlotOptions {
  std::string title;           // figure title
  int width = 960;             // pixels
  int panel_height = 320;      // pixels per panel
};

// Atomic writes; qkv::Error on a panel without data or mismatched x/y lengths (naming them).
void write_line_plot_png(const std::string& path, const std::vector<PlotPanel>& panels,
                         const LinePlotOptions& opt = {});
void write_line_plot_svg(const std::string& path, const std::vector<PlotPanel>& panels,
                         const LinePlotOptions& opt = {});
void write_line_plot(const std::string& path, const std::vector<PlotPanel>& panels,
                     const LinePlotOptions& opt = {});  // by extension: .png or .svg
// One panel of series.
void write_line_plot_png(const std::string& path, const std::vector<Series>& series,
                         const LinePlotOptions& opt = {});

// Panels from a JSON-lines metrics log (one object per line, e.g. {"step": 100,
// "train_loss": 4.2, "valid_loss": 4.5, "valid_bleu": 3.1, "lr": 0.0007, "tokens_per_s": 9000}):
// x = x_key; numeric keys grouped as Loss (*loss*), BLEU / chrF (*bleu*, *chrf*), Learning rate
// (lr, *learning_rate*), Throughput (*tok*per_s, *tok/s*), then one panel per other key. Keys
// "epoch", "time", "elapsed" are not plotted. Records without x_key are skipped. qkv::Error names
// file:line on malformed JSON and the file when nothing is plottable.
std::vector<PlotPanel> metrics_panels_from_jsonl(const std::string& path,
                                                 const std::string& x_key = "step");

// Round tick values covering [lo, hi] (about `target` of them), steps of 1, 2, 2.5 or 5 x 10^k.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

}  // namespace qkv::viz
