// `qkv plot`: training curves from a metrics JSON-lines file, or the sinusoidal positional
// encoding heatmap, as PNG or SVG (by the output's extension).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <string_view>

#include "cli.h"
#include "qkv/util/error.h"
#include "qkv/viz/heatmap.h"
#include "qkv/viz/plot.h"

namespace {

int run_plot(int argc, char** argv) {
  CLI::App app{"Draw training curves (--metrics) or a positional-encoding heatmap (--positional-encoding)",
               "qkv plot"};
  std::string metrics, out, x_key = "step", title;
  int pe_len = 0, d_model = 64, width = 960;
  app.add_option("--metrics", metrics, "metrics log, one JSON object per line (step, train_loss, ...)");
  app.add_option("--positional-encoding", pe_len, "draw the sinusoidal encoding for this many positions");
  app.add_option("--d-model", d_model, "model width for --positional-encoding")->check(CLI::Range(2, 4096));
  app.add_option("--out,-o", out, "output image (.png or .svg)")->required();
  app.add_option("--x", x_key, "key of the x axis");
  app.add_option("--title", title, "figure title");
  app.add_option("--width", width, "image width in pixels (curves)")->check(CLI::Range(320, 8192));
  QKV_PARSE(app, argc, argv);
  const bool pe = app.count("--positional-encoding") > 0;
  QKV_CHECK(metrics.empty() == pe, "plot", "give exactly one of --metrics FILE or --positional-encoding N");
  if (!metrics.empty()) {
    qkv::viz::LinePlotOptions o;
    o.title = title.empty() ? metrics : title;
    o.width = width;
    const std::string ext = out.size() > 4 ? out.substr(out.size() - 4) : "";
    QKV_CHECK(ext == ".png" || ext == ".svg" || ext == ".PNG" || ext == ".SVG", out,
              "--out: expected a .png or .svg file name");
    const auto panels = qkv::viz::metrics_panels_from_jsonl(metrics, x_key);
    try {  // e.g. values whose range is not finite (+-1e308): say which file
      qkv::viz::write_line_plot(out, panels, o);
    } catch (const qkv::Error& e) {
      if (std::string_view(e.what()).find(out) != std::string_view::npos) throw;  // writing --out failed
      qkv::fail(metrics, "cannot plot its values: ", e.what());
    }
    std::printf("wrote %s (%zu panels)\n", out.c_str(), panels.size());
  } else {
    QKV_CHECK(pe_len > 0 && pe_len <= 4096, "plot", "--positional-encoding must be in [1, 4096], got ", pe_len);
    qkv::viz::HeatmapOptions o;
    o.colormap = qkv::viz::Colormap::Diverging;
    o.vmin = -1, o.vmax = 1;
    o.title = title;
    o.colorbar_label = "value";
    qkv::viz::Heatmap pe = qkv::viz::sinusoidal_positional_encoding(pe_len, d_model);
    pe.row_labels.clear();  // positions and dimensions are read from the tick labels below
    pe.col_labels.clear();
    for (int p = 0; p < pe_len; ++p) pe.row_labels.push_back(p % 10 == 0 ? std::to_string(p) : "");
    for (int i = 0; i < d_model; ++i) pe.col_labels.push_back(i % 8 == 0 ? std::to_string(i) : "");
    qkv::viz::write_heatmap_grid(out, {pe}, o);
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

qkv::cli::Register register_plot("plot", "training curves from a metrics .jsonl, or the positional-encoding heatmap",
                                 run_plot);

}  // namespace
