#pragma once
// pensieve-trace export: the Chrome trace-event JSON that chrome://tracing
// and ui.perfetto.dev open. One thread track per lane (an actor, stream or
// file; named with "thread_name" metadata), a complete event ("X") per span,
// request-phase spans as async events keyed by request, and flow arrows
// ("s" -> "f") from each span of a request to its next span on any track.
// Times are µs since the trace's first span.
#include "tools/pensieve-trace/trace_model.hpp"

#include <boost/json/value.hpp>

namespace pensieve::tools::trace {

inline constexpr int chrome_pid = 1;

boost::json::value chrome_trace_json(const Trace& trace);

}  // namespace pensieve::tools::trace
