#pragma once
// Line charts as standalone SVG text (no plotting dependency). Each series is
// one <polyline class="series" data-series="LABEL">, so that tests and scripts
// can find a target's line. Pure.
#include <string>
#include <utility>
#include <vector>

namespace pensieve::bench {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are skipped
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool markers = false;  // a circle on every point
  std::vector<PlotSeries> series;
};

std::string render_svg(const LinePlot& plot);

// The empirical CDF of `values`: a step per value, (v, i / n).
std::vector<std::pair<double, double>> cdf_points(std::vector<double> values);

// Escapes & < > " ' for XML text and attributes.
std::string xml_escape(const std::string& text);

}  // namespace pensieve::bench
