#include "net/admin_routes.hpp"

#include <charconv>
#include <memory>

namespace pensieve::net {

namespace asio = boost::asio;
namespace http = boost::beast::http;

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

HttpHandler with_admin_routes(HttpHandler next, AdminRouteOptions options) {
  auto o = std::make_shared<const AdminRouteOptions>(std::move(options));
  auto n = std::make_shared<const HttpHandler>(std::move(next));
  return [o, n](const HttpRequest& req, ResponseWriter& w) { return route(o, n, req, w); };
}

}  // namespace pensieve::net
