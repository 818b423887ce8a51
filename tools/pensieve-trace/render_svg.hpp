#pragma once
// pensieve-trace render: a standalone SVG timeline of a window of a trace.
// One lane per track lane (actors, then streams, then files) with its name on
// the left, each span a rectangle (nested spans drawn inset) with its name
// when it fits and a tooltip with its details, and a time axis in ms since
// the trace's first span. Below the tracks, one row per request (the first
// `request_rows` whose phases reach into the window) shows its phase spans.
#include "tools/pensieve-trace/trace_model.hpp"

#include <optional>
#include <string>

namespace pensieve::tools::trace {

struct RenderOptions {
  std::optional<double> from_ms;  // window start, ms since the first span (default 0)
  std::optional<double> to_ms;    // window end (default: the last span's end)
  int width_px = 1400;
  int request_rows = 8;
};

// The SVG document, or an Error for an empty or inverted window.
Result<std::string> render_svg(const Trace& trace, const RenderOptions& options);

}  // namespace pensieve::tools::trace
