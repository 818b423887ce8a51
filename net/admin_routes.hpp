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
// POST /admin/prefix-cache/pin pins a prompt prefix for a time: the body is
// a chat request's `messages` (rendered with the model's template, as a
// stateless request's) or a completion's `prompt` (text or token ids), with `ttl_s`
// (1..86400, required), optional `cache_salt` and `tenant` (the tenant whose
// namespace it goes in; default "", that of requests without API keys).
// It runs as a stateless request of one token with that pin (computing what
// is not cached yet) and answers {"pinned": true, "prompt_tokens": N,
// "cached_tokens": C, "ttl_s": T}; the prompt's full KV blocks then stay
// cached until T seconds have passed. Bad bodies and a pin past the cap
// (--pin-cap-share of the device blocks) are 400s naming the field.
//
// POST /admin/prefix-cache/unpin drops pins before their time: the body
// {"tenant": T, "cache_salt": S} (tenant "" and no salt by default) names one
// namespace, {"all": true} every one; it answers {"unpinned_blocks": N}, the
// device blocks the pins held. The KV stays cached, evictable again.
//
// Runs on the HTTP server's executor; what recording means is the caller's
// (the composition root owns the Tracer and the export).
#include "net/api_error.hpp"
#include "net/chat_backend.hpp"
#include "net/http_types.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
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
  // Runs a pinning request (ChatRequest::pin_ttl_s set, max_tokens 1);
  // null: no /admin/prefix-cache/pin (404).
  std::function<boost::asio::awaitable<ApiResult<GenerationResult>>(ChatRequest)> pin_prefix;
  RequestLimits limits;  // the pin body's messages, as a chat request's
  // Drops the pins of a tenant's namespace with a salt (every pin when the
  // tenant is absent); answers the blocks they held. null: no
  // /admin/prefix-cache/unpin (404).
  std::function<boost::asio::awaitable<std::int64_t>(std::optional<std::string> tenant,
                                                     std::optional<std::string> cache_salt)>
      unpin_prefixes;
};

// Which pins an /admin/prefix-cache/unpin body names: a tenant's namespace
// with an optional salt, or (tenant absent) every pin.
struct UnpinScope {
  std::optional<std::string> tenant;
  std::optional<std::string> cache_salt;
};
ApiResult<UnpinScope> parse_unpin_request(std::string_view body);

// The request a /admin/prefix-cache/pin body asks for, or the 400 naming
// the field at fault.
ApiResult<ChatRequest> parse_pin_request(std::string_view body, const RequestLimits& limits);

// A pin run through `backend` (what AdminRouteOptions::pin_prefix does in
// the server): the request's one token is generated and dropped.
boost::asio::awaitable<ApiResult<GenerationResult>> pin_through(ChatBackend& backend, ChatRequest request);

HttpHandler with_admin_routes(HttpHandler next, AdminRouteOptions options);

// The seconds of "?seconds=N" in a target, checked against [1, max]; a
// 400 naming param "seconds" otherwise.
ApiResult<int> trace_seconds(std::string_view target, int max_seconds);

}  // namespace pensieve::net
