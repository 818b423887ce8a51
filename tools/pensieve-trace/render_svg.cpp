#include "tools/pensieve-trace/render_svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

namespace pensieve::tools::trace {
namespace {

constexpr double label_width_px = 170;
constexpr double axis_height_px = 44;
constexpr double lane_height_px = 22;
constexpr double char_width_px = 6.2;  // 11 px sans-serif, roughly

std::string escape_xml(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters even escaped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string num(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms >= 100 ? "%.0f ms" : ms >= 1 ? "%.2f ms" : "%.3f ms", ms);
  return buf;
}

// A tick label with as many decimals as the tick step needs.
std::string tick_text(double ms, double step_ms) {
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step_ms) + 1e-9)), 0, 9);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*f ms", decimals, ms);
  return buf;
}

// A stable colour per span name (FNV-1a), from a palette readable under black text.
const char* colour_of(const rt::Span& s) {
  if (s.kind == rt::SpanKind::stream && !counts_as_busy(s)) return "#dddddd";
  constexpr std::array<const char*, 10> palette = {"#8ecae6", "#ffb703", "#90be6d", "#f4a261", "#cdb4db",
                                                   "#a8dadc", "#f6bd60", "#84a59d", "#e5989b", "#b5e48c"};
  std::uint64_t h = 1469598103934665603ull;
  for (char c : s.name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return palette[h % palette.size()];
}

// 1, 2 or 5 times a power of ten, giving about `target` ticks over `range`.
double tick_step(double range, int target) {
  const double raw = range / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

struct Window {
  std::int64_t from_ns;
  std::int64_t to_ns;
  double x0;
  double px_per_ns;
  double x(std::int64_t ns) const { return x0 + static_cast<double>(ns - from_ns) * px_per_ns; }
};

void append_axis(std::string& svg, const Trace& trace, const Window& w, double height) {
  const double from_ms = static_cast<double>(w.from_ns - trace.begin_ns) / 1e6;
  const double to_ms = static_cast<double>(w.to_ns - trace.begin_ns) / 1e6;
  const double step = tick_step(to_ms - from_ms, 10);
  svg += "<g class=\"axis\" stroke=\"#999999\">\n";
  for (double t = std::ceil(from_ms / step) * step; t <= to_ms + step * 1e-9; t += step) {
    const double x = w.x(trace.begin_ns + static_cast<std::int64_t>(std::llround(t * 1e6)));
    svg += "<line x1=\"" + num(x) + "\" y1=\"" + num(axis_height_px - 6) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(height) + "\" stroke-dasharray=\"2,3\"/>\n";
    svg += "<text x=\"" + num(x) + "\" y=\"" + num(axis_height_px - 10) +
           "\" text-anchor=\"middle\" stroke=\"none\" fill=\"#333333\">" + escape_xml(tick_text(t, step)) + "</text>\n";
  }
  svg += "</g>\n";
}

std::string tooltip(const rt::Span& s) {
  std::string text = std::string(s.actor) + ": " + s.name + " (" + ms_text(static_cast<double>(s.end_ns - s.start_ns) / 1e6) + ")";
  if (s.id != 0) text += " id=" + std::to_string(s.id);
  if (s.flow_id != 0) text += " request=" + std::to_string(s.flow_id);
  if (!s.detail.empty()) text += " " + s.detail;
  if (s.kind == rt::SpanKind::message && s.enqueue_ns != 0 && s.enqueue_ns <= s.start_ns) {
    text += " waited " + ms_text(static_cast<double>(s.start_ns - s.enqueue_ns) / 1e6);
  }
  return escape_xml(text);
}

// Draws one span as a rectangle inset by its depth, named when it fits.
void append_span(std::string& svg, const rt::Span& s, double lane_y, unsigned depth, const Window& w) {
  const double left = w.x(std::max(s.start_ns, w.from_ns));
  const double width = std::max(0.5, w.x(std::min(s.end_ns, w.to_ns)) - left);
  const double inset = std::min(2.0 + 3.0 * depth, lane_height_px / 2 - 2);
  const double height = lane_height_px - 2 * inset;
  svg += "<rect class=\"span\" x=\"" + num(left) + "\" y=\"" + num(lane_y + inset) + "\" width=\"" + num(width) +
         "\" height=\"" + num(height) + "\" fill=\"" + colour_of(s) +
         "\" stroke=\"#555555\" stroke-width=\"0.3\"><title>" + tooltip(s) + "</title></rect>\n";
  const double text_px = static_cast<double>(s.name.size()) * char_width_px + 4;
  if (width >= text_px && height >= 10) {
    svg += "<text x=\"" + num(left + 2) + "\" y=\"" + num(lane_y + 15) + "\" fill=\"#000000\">" +
           escape_xml(s.name) + "</text>\n";
  }
}

bool in_window(const rt::Span& s, const Window& w) { return s.end_ns >= w.from_ns && s.start_ns <= w.to_ns; }

void append_lane(std::string& svg, const Trace& trace, const Lane& lane, std::size_t index, const Window& w) {
  const double y = axis_height_px + static_cast<double>(index) * lane_height_px;
  svg += "<g class=\"lane\" data-track=\"" + escape_xml(lane.label) + "\">\n";
  svg += "<rect x=\"0\" y=\"" + num(y) + "\" width=\"" + num(w.x0 + (w.to_ns - w.from_ns) * w.px_per_ns) +
         "\" height=\"" + num(lane_height_px) + "\" fill=\"" + (index % 2 == 0 ? "#f7f7f7" : "#ffffff") + "\"/>\n";
  const Track& track = trace.tracks[lane.track];
  const std::string label =
      track.kind == TrackKind::actor ? lane.label : std::string(to_string(track.kind)) + ": " + lane.label;
  svg += "<text x=\"6\" y=\"" + num(y + 15) + "\" fill=\"#000000\">" + escape_xml(label) + "</text>\n";
  for (std::size_t k = 0; k < lane.spans.size(); ++k) {
    const rt::Span& s = trace.spans[lane.spans[k]];
    if (in_window(s, w)) append_span(svg, s, y, lane.depths[k], w);
  }
  svg += "</g>\n";
}

// The requests whose phase spans (SpanKind::request) reach into the window,
// by first phase, at most `limit`: each one row of its phases.
std::vector<std::pair<std::uint64_t, std::vector<std::size_t>>> requests_in_window(const Trace& trace, const Window& w,
                                                                                   std::size_t limit) {
  std::map<std::uint64_t, std::vector<std::size_t>> by_request;
  for (std::size_t i = 0; i < trace.spans.size(); ++i) {
    const rt::Span& s = trace.spans[i];
    if (s.kind == rt::SpanKind::request && s.flow_id != 0 && s.start_ns < s.end_ns && in_window(s, w)) {
      by_request[s.flow_id].push_back(i);
    }
  }
  std::vector<std::pair<std::uint64_t, std::vector<std::size_t>>> rows(by_request.begin(), by_request.end());
  for (auto& [request, spans] : rows) {
    std::stable_sort(spans.begin(), spans.end(), [&trace](std::size_t a, std::size_t b) {
      const rt::Span& x = trace.spans[a];
      const rt::Span& y = trace.spans[b];
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
    });
  }
  std::stable_sort(rows.begin(), rows.end(), [&trace](const auto& a, const auto& b) {
    return trace.spans[a.second.front()].start_ns < trace.spans[b.second.front()].start_ns;
  });
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

void append_request_row(std::string& svg, const Trace& trace, std::uint64_t request,
                        const std::vector<std::size_t>& spans, double y, const Window& w) {
  svg += "<g class=\"request\" data-request=\"" + std::to_string(request) + "\">\n";
  svg += "<text x=\"6\" y=\"" + num(y + 15) + "\" fill=\"#444444\">request " + std::to_string(request) + "</text>\n";
  // Phases of one request may overlap (a swap-in under a prefill): later ones nest visibly.
  std::vector<std::int64_t> open_ends;
  for (std::size_t i : spans) {
    const rt::Span& s = trace.spans[i];
    while (!open_ends.empty() && open_ends.back() <= s.start_ns) open_ends.pop_back();
    append_span(svg, s, y, static_cast<unsigned>(std::min<std::size_t>(open_ends.size(), 2)), w);
    open_ends.push_back(s.end_ns);
  }
  svg += "</g>\n";
}

}  // namespace

Result<std::string> render_svg(const Trace& trace, const RenderOptions& options) {
  const double from_ms = options.from_ms.value_or(0.0);
  const double to_ms = options.to_ms.value_or(static_cast<double>(trace.wall_ns()) / 1e6);
  if (!(from_ms < to_ms)) {
    return fail("render: the window is empty (from " + num(from_ms) + " ms to " + num(to_ms) +
                " ms); give --from-ms below --to-ms, within a trace that has spans");
  }
  if (options.width_px < 400) return fail("render: --width must be at least 400 px");
  Window w;
  w.from_ns = trace.begin_ns + static_cast<std::int64_t>(std::llround(from_ms * 1e6));
  w.to_ns = trace.begin_ns + static_cast<std::int64_t>(std::llround(to_ms * 1e6));
  if (w.to_ns <= w.from_ns) w.to_ns = w.from_ns + 1;
  w.x0 = label_width_px;
  w.px_per_ns = (options.width_px - label_width_px - 10) / static_cast<double>(w.to_ns - w.from_ns);
  const auto requests = requests_in_window(trace, w, static_cast<std::size_t>(std::max(0, options.request_rows)));
  const double lanes_bottom = axis_height_px + static_cast<double>(trace.lanes.size()) * lane_height_px;
  const double requests_top = lanes_bottom + (requests.empty() ? 0 : 8);
  const double height = requests_top + static_cast<double>(requests.size()) * lane_height_px + 10;

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(options.width_px) + "\" height=\"" +
         num(height) + "\" viewBox=\"0 0 " + std::to_string(options.width_px) + " " + num(height) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  svg += "<text x=\"6\" y=\"14\" font-weight=\"bold\">" +
         escape_xml("pensieve trace: " + std::to_string(trace.spans.size()) + " spans, " +
                    std::to_string(trace.lanes.size()) + " lanes, window " + ms_text(from_ms) + " to " + ms_text(to_ms)) +
         "</text>\n";
  append_axis(svg, trace, w, height - 10);
  for (std::size_t l = 0; l < trace.lanes.size(); ++l) append_lane(svg, trace, trace.lanes[l], l, w);
  for (std::size_t r = 0; r < requests.size(); ++r) {
    append_request_row(svg, trace, requests[r].first, requests[r].second,
                       requests_top + static_cast<double>(r) * lane_height_px, w);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace pensieve::tools::trace
