// Line plots (training curves) and the JSON-lines metrics reader.
#include "qkv/viz/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "canvas.h"
#include "qkv/util/error.h"
#include "qkv/util/file.h"

namespace qkv::viz {
namespace {

const Rgb kText{33, 33, 33}, kMuted{90, 90, 90}, kGrid{228, 228, 228}, kAxis{120, 120, 120};
const Rgb kPalette[] = {rgb_hex(0x1f77b4), rgb_hex(0xff7f0e), rgb_hex(0x2ca02c), rgb_hex(0xd62728),
                        rgb_hex(0x9467bd), rgb_hex(0x8c564b), rgb_hex(0xe377c2), rgb_hex(0x7f7f7f),
                        rgb_hex(0xbcbd22), rgb_hex(0x17becf)};

std::string tick_label(double v, double step) {
  char buf[48];
  const double a = std::fabs(v);
  if (a < step * 1e-9) {
    v = 0;
  } else if (a >= 1e6 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  const double e = std::floor(std::log10(step) + 1e-9);
  int dec = std::max(0, -int(e));
  if (std::fabs(step / std::pow(10.0, e) - 2.5) < 1e-6) ++dec;  // steps of 2.5 need one more digit
  std::snprintf(buf, sizeof buf, "%.*f", dec, v);
  return buf;
}

struct Range {
  double lo = INFINITY, hi = -INFINITY;
};

void validate(const std::vector<PlotPanel>& panels, const char* op) {
  QKV_CHECK(!panels.empty(), op, "expected at least one panel, got none");
  for (size_t p = 0; p < panels.size(); ++p) {
    bool any = false;
    for (auto& s : panels[p].series) {
      QKV_CHECK(s.x.size() == s.y.size(), op, "panel '", panels[p].title, "' series '", s.name,
                "': x has ", s.x.size(), " points but y has ", s.y.size());
      for (size_t i = 0; i < s.x.size(); ++i) any |= std::isfinite(s.x[i]) && std::isfinite(s.y[i]);
    }
    QKV_CHECK(any, op, "panel '", panels[p].title, "' has no finite data point");
  }
}

void draw_panel(detail::Canvas& cv, const PlotPanel& P, double x0, double y0, double w, double h) {
  const double title_px = 13, tick_px = 11, label_px = 12;
  Range xr, yr;
  for (auto& s : P.series)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        xr.lo = std::min(xr.lo, s.x[i]), xr.hi = std::max(xr.hi, s.x[i]);
        yr.lo = std::min(yr.lo, s.y[i]), yr.hi = std::max(yr.hi, s.y[i]);
      }
  if (xr.hi == xr.lo) xr.lo -= 0.5, xr.hi += 0.5;
  const double xpad = (xr.hi - xr.lo) * 0.02;  // keep end points off the frame
  xr.lo -= xpad, xr.hi += xpad;
  if (yr.hi == yr.lo) yr.lo -= std::max(0.5, std::fabs(yr.lo) * 0.05), yr.hi += std::max(0.5, std::fabs(yr.hi) * 0.05);
  const double pad = (yr.hi - yr.lo) * 0.05;
  yr.lo -= pad, yr.hi += pad;
  const auto xt = nice_ticks(xr.lo, xr.hi), yt = nice_ticks(yr.lo, yr.hi);
  const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1, ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  double ytw = 0;
  for (double v : yt) ytw = std::max(ytw, cv.text_width(tick_label(v, ystep), tick_px));
  // plot area
  const double ax = x0 + 22 + ytw + 8, ay = y0 + title_px * 2;
  const double aw = x0 + w - 16 - ax, ah = y0 + h - ay - (tick_px + 8) - (label_px + 10);
  auto X = [&](double v) { return ax + (v - xr.lo) / (xr.hi - xr.lo) * aw; };
  auto Y = [&](double v) { return ay + ah - (v - yr.lo) / (yr.hi - yr.lo) * ah; };

  cv.text(ax + aw / 2, y0 + title_px * 1.2, P.title, title_px, kText, Anchor::Middle, false, true);
  for (double v : yt) {
    if (v < yr.lo || v > yr.hi) continue;
    cv.rect(ax, Y(v) - 0.5, aw, 1, kGrid);
    cv.text(ax - 6, Y(v) + tick_px * 0.36, tick_label(v, ystep), tick_px, kMuted, Anchor::End);
  }
  for (double v : xt) {
    if (v < xr.lo || v > xr.hi) continue;
    cv.rect(X(v) - 0.5, ay, 1, ah, kGrid);
    cv.text(X(v), ay + ah + tick_px + 5, tick_label(v, xstep), tick_px, kMuted, Anchor::Middle);
  }
  cv.frame(ax, ay, aw, ah, kAxis, 1);
  cv.text(ax + aw / 2, y0 + h - 6, P.xlabel, label_px, kText, Anchor::Middle);
  if (!P.ylabel.empty()) cv.text(x0 + 14, ay + ah / 2, P.ylabel, label_px, kText, Anchor::Middle, true);

  for (size_t k = 0; k < P.series.size(); ++k) {
    const Series& s = P.series[k];
    const Rgb c = kPalette[k % 10];
    std::vector<std::pair<double, double>> pts;
    for (size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) pts.emplace_back(X(s.x[i]), Y(s.y[i]));
    cv.polyline(pts, c, 2.0);
    if (pts.size() <= 40)  // sparse series (e.g. validation points): mark the points
      for (auto& p : pts) cv.dot(p.first, p.second, 3.0, c);
  }
  // legend: the inside corner that covers the fewest data points (top right on a tie)
  double lw = 0;
  for (auto& s : P.series) lw = std::max(lw, cv.text_width(s.name, tick_px));
  const double row = tick_px + 7, bw = lw + 44, bh = row * P.series.size() + 8;
  double bx = ax + aw - bw - 8, by = ay + 8;
  size_t best = SIZE_MAX;
  for (int corner : {1, 0, 3, 2}) {  // 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right
    const double cx = corner % 2 ? ax + aw - bw - 8 : ax + 8, cy = corner < 2 ? ay + 8 : ay + ah - bh - 8;
    size_t hidden = 0;
    for (auto& s : P.series)
      for (size_t i = 0; i < s.x.size(); ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
        const double px = X(s.x[i]), py = Y(s.y[i]);
        hidden += px >= cx - 4 && px <= cx + bw + 4 && py >= cy - 4 && py <= cy + bh + 4;
      }
    if (hidden < best) best = hidden, bx = cx, by = cy;
  }
  cv.rect(bx, by, bw, bh, {255, 255, 255});
  cv.frame(bx, by, bw, bh, kGrid, 1);
  for (size_t k = 0; k < P.series.size(); ++k) {
    const double ly = by + 4 + row * (k + 0.5);
    cv.polyline({{bx + 8, ly}, {bx + 30, ly}}, kPalette[k % 10], 2.5);
    cv.text(bx + 36, ly + tick_px * 0.36, P.series[k].name, tick_px, kText);
  }
}

template <class CanvasT>
void render(CanvasT& cv, const std::vector<PlotPanel>& panels, const LinePlotOptions& opt) {
  const double margin = 12, title_h = opt.title.empty() ? 0 : 34;
  if (!opt.title.empty())
    cv.text(opt.width / 2.0, margin + 18, opt.title, 16, kText, Anchor::Middle, false, true);
  for (size_t p = 0; p < panels.size(); ++p)
    draw_panel(cv, panels[p], margin, margin + title_h + p * opt.panel_height, opt.width - 2 * margin,
               opt.panel_height - 8);
}

int figure_height(const std::vector<PlotPanel>& panels, const LinePlotOptions& opt) {
  return int(24 + (opt.title.empty() ? 0 : 34) + panels.size() * opt.panel_height);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  QKV_CHECK(std::isfinite(lo) && std::isfinite(hi) && hi > lo && target > 0, "nice_ticks",
            "expected finite lo < hi, got ", lo, " and ", hi);
  const double raw = (hi - lo) / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return t;
}

void write_line_plot_png(const std::string& path, const std::vector<PlotPanel>& panels,
                         const LinePlotOptions& opt) {
  validate(panels, "write_line_plot_png");
  Font font;
  detail::PngCanvas cv(font, opt.width, figure_height(panels, opt));
  render(cv, panels, opt);
  write_png(path, cv.image());
}

void write_line_plot_svg(const std::string& path, const std::vector<PlotPanel>& panels,
                         const LinePlotOptions& opt) {
  validate(panels, "write_line_plot_svg");
  Font font;
  detail::SvgCanvas cv(font, opt.width, figure_height(panels, opt));
  render(cv, panels, opt);
  write_file_atomic(path, cv.finish());
}

void write_line_plot(const std::string& path, const std::vector<PlotPanel>& panels,
                     const LinePlotOptions& opt) {
  const bool svg = path.size() > 4 && (path.substr(path.size() - 4) == ".svg" || path.substr(path.size() - 4) == ".SVG");
  const bool png = path.size() > 4 && (path.substr(path.size() - 4) == ".png" || path.substr(path.size() - 4) == ".PNG");
  QKV_CHECK(svg || png, "write_line_plot", path, ": expected a .png or .svg file name");
  svg ? write_line_plot_svg(path, panels, opt) : write_line_plot_png(path, panels, opt);
}

void write_line_plot_png(const std::string& path, const std::vector<Series>& series,
                         const LinePlotOptions& opt) {
  PlotPanel p;
  p.series = series;
  write_line_plot_png(path, std::vector<PlotPanel>{p}, opt);
}

std::vector<PlotPanel> metrics_panels_from_jsonl(const std::string& path, const std::string& x_key) {
  const std::string text = read_file(path);
  std::map<std::string, Series> by_key;
  std::vector<std::string> order;
  size_t line_no = 0;
  for (size_t a = 0; a < text.size();) {
    size_t b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    const std::string line = text.substr(a, b - a);
    a = b + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      fail("metrics_panels_from_jsonl", path, ":", line_no, ": not valid JSON (", e.what(), ")");
    }
    QKV_CHECK(j.is_object(), "metrics_panels_from_jsonl", path, ":", line_no, ": expected a JSON object");
    if (!j.contains(x_key) || !j[x_key].is_number()) continue;
    const double x = j[x_key].get<double>();
    for (auto& [k, v] : j.items()) {
      if (k == x_key || k == "epoch" || k == "time" || k == "elapsed" || !v.is_number()) continue;
      if (!by_key.count(k)) order.push_back(k), by_key[k].name = k;
      by_key[k].x.push_back(x);
      by_key[k].y.push_back(v.get<double>());
    }
  }
  QKV_CHECK(!order.empty(), "metrics_panels_from_jsonl", path, ": no numeric series with an x value '",
            x_key, "'");
  auto has = [](const std::string& k, const char* s) { return k.find(s) != std::string::npos; };
  auto group = [&](const std::string& k) -> std::string {
    if (has(k, "loss")) return "Loss";
    if (has(k, "bleu") || has(k, "chrf") || has(k, "BLEU") || has(k, "chrF")) return "BLEU / chrF";
    if (k == "lr" || has(k, "learning_rate")) return "Learning rate";
    if (has(k, "tok") && (has(k, "per_s") || has(k, "/s"))) return "Throughput";
    return k;
  };
  std::vector<PlotPanel> panels;
  auto panel_for = [&](const std::string& title) -> PlotPanel& {
    for (auto& p : panels)
      if (p.title == title) return p;
    PlotPanel p;
    p.title = title;
    p.xlabel = x_key;
    p.ylabel = title == "Loss" ? "loss" : title == "BLEU / chrF" ? "score" : title == "Learning rate" ? "lr"
             : title == "Throughput" ? "tokens/s" : "";
    panels.push_back(p);
    return panels.back();
  };
  for (const char* first : {"Loss", "BLEU / chrF"})  // the usual order: losses, then scores
    for (auto& k : order)
      if (group(k) == first) panel_for(first).series.push_back(by_key[k]);
  for (auto& k : order)
    if (group(k) != "Loss" && group(k) != "BLEU / chrF") panel_for(group(k)).series.push_back(by_key[k]);
  return panels;
}

}  // namespace qkv::viz
