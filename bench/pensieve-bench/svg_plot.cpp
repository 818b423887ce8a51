#include "bench/pensieve-bench/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pensieve::bench {

namespace {

constexpr double width = 720, height = 440;
constexpr double left = 80, right = 180, top = 56, bottom = 60;  // margins; legend on the right
const char* const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about five ticks.
double tick_step(double span) {
  if (span <= 0) return 1.0;
  const double raw = span / 5.0;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10.0 * p;
}

struct Range {
  double lo = 0, hi = 1;
};

Range axis_range(const LinePlot& plot, bool x) {
  Range r{0.0, 0.0};
  bool any = false;
  for (const auto& s : plot.series) {
    for (const auto& [px, py] : s.points) {
      const double v = x ? px : py;
      if (!std::isfinite(px) || !std::isfinite(py)) continue;
      r.lo = any ? std::min(r.lo, v) : std::min(0.0, v);
      r.hi = any ? std::max(r.hi, v) : v;
      any = true;
    }
  }
  if (!any || r.hi <= r.lo) r.hi = r.lo + 1.0;
  r.hi = std::ceil(r.hi / tick_step(r.hi - r.lo)) * tick_step(r.hi - r.lo);
  return r;
}

void axes(std::string& svg, const LinePlot& plot, Range xr, Range yr) {
  const double pw = width - left - right, ph = height - top - bottom;
  svg += "<g class=\"axes\" stroke=\"#000\" stroke-width=\"1\">\n";
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(left + pw) + "\" y2=\"" +
         num(top + ph) + "\"/>\n";
  svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(top) + "\" x2=\"" + num(left) + "\" y2=\"" + num(top + ph) + "\"/>\n";
  svg += "</g>\n<g class=\"ticks\" font-family=\"sans-serif\" font-size=\"11\">\n";
  const double xs = tick_step(xr.hi - xr.lo), ys = tick_step(yr.hi - yr.lo);
  for (double v = std::ceil(xr.lo / xs) * xs; v <= xr.hi + xs * 1e-9; v += xs) {
    const double px = left + (v - xr.lo) / (xr.hi - xr.lo) * pw;
    svg += "<line x1=\"" + num(px) + "\" y1=\"" + num(top + ph) + "\" x2=\"" + num(px) + "\" y2=\"" +
           num(top + ph + 5) + "\" stroke=\"#000\"/>\n";
    svg += "<text x=\"" + num(px) + "\" y=\"" + num(top + ph + 18) + "\" text-anchor=\"middle\">" + tick_label(v) + "</text>\n";
  }
  for (double v = std::ceil(yr.lo / ys) * ys; v <= yr.hi + ys * 1e-9; v += ys) {
    const double py = top + ph - (v - yr.lo) / (yr.hi - yr.lo) * ph;
    svg += "<line x1=\"" + num(left) + "\" y1=\"" + num(py) + "\" x2=\"" + num(left + pw) + "\" y2=\"" + num(py) +
           "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + num(left - 6) + "\" y=\"" + num(py + 4) + "\" text-anchor=\"end\">" + tick_label(v) + "</text>\n";
  }
  svg += "</g>\n<g class=\"labels\" font-family=\"sans-serif\" font-size=\"13\">\n";
  svg += "<text x=\"" + num(left + pw / 2) + "\" y=\"22\" text-anchor=\"middle\" font-weight=\"bold\">" +
         xml_escape(plot.title) + "</text>\n";
  svg += "<text x=\"" + num(left + pw / 2) + "\" y=\"" + num(height - 15) + "\" text-anchor=\"middle\">" +
         xml_escape(plot.x_label) + "</text>\n";
  // Horizontal, above the y axis: rotated text is not drawn by every SVG renderer.
  svg += "<text x=\"" + num(left - 40) + "\" y=\"" + num(top - 12) + "\" text-anchor=\"start\">" +
         xml_escape(plot.y_label) + "</text>\n</g>\n";
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<std::pair<double, double>> cdf_points(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<std::pair<double, double>> out;
  const double n = double(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out.emplace_back(values[i], double(i) / n);
    out.emplace_back(values[i], double(i + 1) / n);
  }
  return out;
}

std::string render_svg(const LinePlot& plot) {
  const Range xr = axis_range(plot, true), yr = axis_range(plot, false);
  const double pw = width - left - right, ph = height - top - bottom;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  axes(svg, plot, xr, yr);
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    const std::string color = palette[i % std::size(palette)];
    std::string points, marks;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      const double px = left + (x - xr.lo) / (xr.hi - xr.lo) * pw;
      const double py = top + ph - (y - yr.lo) / (yr.hi - yr.lo) * ph;
      points += (points.empty() ? "" : " ") + num(px) + "," + num(py);
      if (plot.markers) marks += "<circle cx=\"" + num(px) + "\" cy=\"" + num(py) + "\" r=\"3\" fill=\"" + color + "\"/>\n";
    }
    svg += "<g class=\"target\" data-series=\"" + xml_escape(s.label) + "\">\n";
    svg += "<polyline class=\"series\" data-series=\"" + xml_escape(s.label) + "\" fill=\"none\" stroke=\"" + color +
           "\" stroke-width=\"2\" points=\"" + points + "\"/>\n" + marks;
    const double ly = top + 10 + 20 * double(i);
    svg += "<line x1=\"" + num(width - right + 15) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(width - right + 40) +
           "\" y2=\"" + num(ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + num(width - right + 45) + "\" y=\"" + num(ly + 4) +
           "\" font-family=\"sans-serif\" font-size=\"12\">" + xml_escape(s.label) + "</text>\n</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace pensieve::bench
