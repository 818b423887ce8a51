#include "net/admin_routes.hpp"

#include "net/chat_request_json.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <memory>

namespace pensieve::net {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

// Constant time in the key's length: the comparison does not tell how much
// of a guess was right.
bool same_key(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

asio::awaitable<void> send_error(ResponseWriter& w, ApiError e) {
  const std::string body = e.to_json();
  co_await w.send(e.status, "application/json", body);
}

asio::awaitable<void> trace_route(const AdminRouteOptions& o, const HttpRequest& req, ResponseWriter& w) {
  if (req.method() != http::verb::post) {
    ApiError e{405, "invalid_request_error", "method " + std::string(req.method_string()) + " not allowed on /admin/trace",
               {}, {}};
    co_return co_await send_error(w, std::move(e));
  }
  auto seconds = trace_seconds(req.target(), o.max_trace_seconds);
  if (!seconds) co_return co_await send_error(w, seconds.error());
  auto trace = co_await o.capture_trace(std::chrono::seconds(*seconds));
  if (!trace) co_return co_await send_error(w, trace.error());
  co_await w.send(200, "application/json", std::move(*trace));
}

asio::awaitable<void> prefix_cache_route(const AdminRouteOptions& o, const HttpRequest& req, ResponseWriter& w) {
  if (req.method() != http::verb::post) {
    ApiError e{405, "invalid_request_error",
               "method " + std::string(req.method_string()) + " not allowed on /admin/prefix-cache/clear", {}, {}};
    co_return co_await send_error(w, std::move(e));
  }
  o.clear_prefix_cache();
  co_await w.send(200, "application/json", R"({"cleared":true})");
}

asio::awaitable<void> pin_route(const AdminRouteOptions& o, const HttpRequest& req, ResponseWriter& w) {
  if (req.method() != http::verb::post) {
    ApiError e{405, "invalid_request_error",
               "method " + std::string(req.method_string()) + " not allowed on /admin/prefix-cache/pin", {}, {}};
    co_return co_await send_error(w, std::move(e));
  }
  auto pin = parse_pin_request(req.body(), o.limits);
  if (!pin) co_return co_await send_error(w, pin.error());
  const std::int64_t ttl = pin->pin_ttl_s;
  auto done = co_await o.pin_prefix(std::move(*pin));
  if (!done) co_return co_await send_error(w, done.error());
  json::object body{{"pinned", true},
                    {"prompt_tokens", done->prompt_tokens},
                    {"cached_tokens", done->cached_tokens},
                    {"ttl_s", ttl}};
  co_await w.send(200, "application/json", json::serialize(body));
}

asio::awaitable<void> unpin_route(const AdminRouteOptions& o, const HttpRequest& req, ResponseWriter& w) {
  if (req.method() != http::verb::post) {
    ApiError e{405, "invalid_request_error",
               "method " + std::string(req.method_string()) + " not allowed on /admin/prefix-cache/unpin", {}, {}};
    co_return co_await send_error(w, std::move(e));
  }
  auto scope = parse_unpin_request(req.body());
  if (!scope) co_return co_await send_error(w, scope.error());
  const std::int64_t blocks = co_await o.unpin_prefixes(std::move(scope->tenant), std::move(scope->cache_salt));
  json::object body;
  body["unpinned_blocks"] = blocks;
  co_await w.send(200, "application/json", json::serialize(body));
}

asio::awaitable<void> route(std::shared_ptr<const AdminRouteOptions> o, std::shared_ptr<const HttpHandler> next,
                            const HttpRequest& req, ResponseWriter& w) {
  std::string_view path = req.target();
  path = path.substr(0, path.find('?'));
  if (o->admin_key.empty() || !(path == "/admin" || path.starts_with("/admin/"))) {
    co_return co_await (*next)(req, w);
  }
  auto h = req.find(http::field::authorization);
  const std::string_view given = h == req.end() ? std::string_view() : std::string_view(h->value());
  const std::string expected = "Bearer " + o->admin_key;
  if (!same_key(given, expected)) {
    ApiError e{401, "invalid_request_error", "this route needs the admin key: 'Authorization: Bearer ADMIN_KEY'", {},
               "invalid_api_key"};
    co_return co_await send_error(w, std::move(e));
  }
  if (path == "/admin/trace") co_return co_await trace_route(*o, req, w);
  if (path == "/admin/prefix-cache/clear" && o->clear_prefix_cache) co_return co_await prefix_cache_route(*o, req, w);
  if (path == "/admin/prefix-cache/pin" && o->pin_prefix) co_return co_await pin_route(*o, req, w);
  if (path == "/admin/prefix-cache/unpin" && o->unpin_prefixes) co_return co_await unpin_route(*o, req, w);
  co_await send_error(w, not_found("no route for " + std::string(path)));
}

}  // namespace

ApiResult<int> trace_seconds(std::string_view target, int max_seconds) {
  const std::string range = "'seconds' must be an integer in [1, " + std::to_string(max_seconds) + "]";
  const auto q = target.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (!pair.starts_with("seconds=")) continue;
    const std::string_view text = pair.substr(8);
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > max_seconds) {
      return bad_request(range, "seconds");
    }
    return ApiResult<int>(boost::system::in_place_value, v);
  }
  return bad_request("missing ?seconds=N: " + range, "seconds");
}

ApiResult<ChatRequest> parse_pin_request(std::string_view body, const RequestLimits& limits) {
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec);
  if (ec) return bad_request("request body is not valid JSON: " + ec.message());
  json::object* o = doc.if_object();
  if (!o) return bad_request("request body must be a JSON object");
  const std::string ttl_range = "'ttl_s' is required: an integer of seconds from 1 to " +
                                std::to_string(kMaxPinTtlSeconds);
  const json::value* ttl = o->if_contains("ttl_s");
  if (!ttl || !ttl->is_int64() || ttl->get_int64() < 1 || ttl->get_int64() > kMaxPinTtlSeconds) {
    return bad_request(ttl_range, "ttl_s");
  }
  const std::int64_t ttl_s = ttl->get_int64();
  std::string tenant;
  if (const json::value* t = o->if_contains("tenant")) {
    if (!t->is_string()) return bad_request("'tenant' must be a string", "tenant");
    tenant = std::string(t->get_string());
  }
  const bool chat = o->contains("messages");
  if (chat == o->contains("prompt")) {
    return bad_request("the body needs 'messages' (a chat prompt) or 'prompt' (text), not both", "messages");
  }
  for (std::string_view own : {"conversation", "cache_control", "stream"}) {
    if (o->contains(own)) return bad_request("'" + std::string(own) + "' has no place in a pin", std::string(own));
  }
  // The rest is a chat or completion request's, checked by their parsers;
  // the model is the one served, whatever it says.
  o->erase("ttl_s");
  o->erase("tenant");
  if (!o->contains("model")) (*o)["model"] = "";
  (*o)["max_tokens"] = 1;
  const std::string request = json::serialize(*o);
  auto parsed = chat ? parse_chat_request(request, limits) : parse_completion_request(request, limits);
  if (!parsed) return parsed.error();
  parsed->tenant = std::move(tenant);
  parsed->pin_ttl_s = ttl_s;
  parsed->temperature = 0.0f;
  return parsed;
}

ApiResult<UnpinScope> parse_unpin_request(std::string_view body) {
  boost::system::error_code ec;
  const json::value doc = json::parse(body.empty() ? std::string_view("{}") : body, ec);
  if (ec) return bad_request("request body is not valid JSON: " + ec.message());
  const json::object* o = doc.if_object();
  if (!o) return bad_request("request body must be a JSON object");
  for (const auto& field : *o) {
    const std::string_view key = field.key();
    if (key != "all" && key != "tenant" && key != "cache_salt") {
      return bad_request("unknown field '" + std::string(key) + "': an unpin takes 'tenant' and 'cache_salt', or 'all'",
                         std::string(key));
    }
  }
  UnpinScope scope;
  if (const json::value* all = o->if_contains("all")) {
    if (!all->is_bool()) return bad_request("'all' must be a boolean", "all");
    if (all->get_bool()) {
      if (o->contains("tenant") || o->contains("cache_salt")) {
        return bad_request("'all' unpins every namespace: give it without 'tenant' and 'cache_salt'", "all");
      }
      return scope;
    }
  }
  scope.tenant.emplace();
  if (const json::value* t = o->if_contains("tenant")) {
    if (!t->is_string()) return bad_request("'tenant' must be a string", "tenant");
    scope.tenant = std::string(t->get_string());
  }
  if (const json::value* s = o->if_contains("cache_salt")) {
    if (!s->is_string() || s->get_string().empty() || s->get_string().size() > 256) {
      return bad_request("'cache_salt' must be a string of 1 to 256 bytes", "cache_salt");
    }
    scope.cache_salt = std::string(s->get_string());
  }
  return scope;
}

asio::awaitable<ApiResult<GenerationResult>> pin_through(ChatBackend& backend, ChatRequest request) {
  auto drop = [](DeltaSink::Batch) -> asio::awaitable<bool> { co_return true; };
  co_return co_await backend.generate(request, DeltaSink(drop));
}

HttpHandler with_admin_routes(HttpHandler next, AdminRouteOptions options) {
  auto o = std::make_shared<const AdminRouteOptions>(std::move(options));
  auto n = std::make_shared<const HttpHandler>(std::move(next));
  return [o, n](const HttpRequest& req, ResponseWriter& w) { return route(o, n, req, w); };
}

}  // namespace pensieve::net
