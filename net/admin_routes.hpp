#pragma once
// The operator's routes, in front of the public ones: POST /admin/trace?seconds=N
// records the engine's spans for N seconds (1..60) and answers them as Chrome
// trace-event JSON (what ui.perfetto.dev and chrome://tracing open); POST
// /admin/prefix-cache/clear drops every cached KV path that no conversation
// names (stateless requests' prefixes; conversations keep theirs) and answers
// {"cleared": true}. They
// need "Authorization: Bearer ADMIN_KEY"; without an admin key configured
// they do not exist (404, like any unknown route), and a missing or wrong
// key answers 401. Every other request goes to `next`.
//
// Runs on the HTTP server's executor; what recording means is the caller's
// (the composition root owns the Tracer and the export).
#include "net/api_error.hpp"
#include "net/http_types.hpp"

#include <chrono>
#include <functional>
#include <string>

namespace pensieve::net {

// Records for `duration` and returns the trace as JSON text, or an ApiError
// (e.g. 409 when a recording is already running).
using TraceCapture = std::function<boost::asio::awaitable<ApiResult<std::string>>(std::chrono::seconds duration)>;

struct AdminRouteOptions {
  std::string admin_key;  // empty: no /admin routes (404)
  TraceCapture capture_trace;
  int max_trace_seconds = 60;
  std::function<void()> clear_prefix_cache;  // null: no /admin/prefix-cache/clear (404)
};

HttpHandler with_admin_routes(HttpHandler next, AdminRouteOptions options);

// The seconds of "?seconds=N" in a target, checked against [1, max]; a
// 400 naming param "seconds" otherwise.
ApiResult<int> trace_seconds(std::string_view target, int max_seconds);

}  // namespace pensieve::net
