#pragma once
// The OpenAI-compatible routes: GET /health, GET /metrics, GET /v1/models,
// POST /v1/chat/completions and POST /v1/completions (whole or streamed as
// Server-Sent Events), and the stateful extension: POST/GET /v1/conversations,
// GET/DELETE /v1/conversations/{id}. With API keys every /v1 route needs
// "Authorization: Bearer KEY"; the key's tenant owns the conversations, and
// another tenant's conversation id answers 404.
#include "net/api_keys.hpp"
#include "net/chat_backend.hpp"
#include "net/http_types.hpp"
#include "net/metrics.hpp"

#include <cstdint>
#include <functional>
#include <memory>

namespace pensieve::net {

struct RouteOptions {
  RequestLimits limits;
  std::function<std::int64_t()> now_s;  // wall clock for `created`; injectable for tests
  std::shared_ptr<const ApiKeys> keys;  // null or empty: open
  ServerMetrics* metrics = nullptr;     // optional; must outlive the routes
};

HttpHandler make_openai_routes(ChatBackend& backend, RouteOptions options);

}  // namespace pensieve::net
