#pragma once
// The OpenAI-compatible routes: GET /health, GET /v1/models,
// POST /v1/chat/completions (whole or streamed as Server-Sent Events).
#include "net/chat_backend.hpp"
#include "net/http_types.hpp"

#include <cstdint>
#include <functional>

namespace pensieve::net {

struct RouteOptions {
  RequestLimits limits;
  std::function<std::int64_t()> now_s;  // wall clock for `created`; injectable for tests
};

HttpHandler make_openai_routes(ChatBackend& backend, RouteOptions options);

}  // namespace pensieve::net
