#include "net/web_assets.hpp"

namespace pensieve::net {

namespace asio = boost::asio;
namespace http = boost::beast::http;

const WebAsset* find_web_asset(std::string_view path) {
  if (auto q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  if (path == "/") path = "/index.html";
  for (const WebAsset& asset : web_assets()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

HttpHandler with_web_page(HttpHandler next) {
  return [next = std::move(next)](const HttpRequest& req, ResponseWriter& w) -> asio::awaitable<void> {
    const bool read = req.method() == http::verb::get || req.method() == http::verb::head;
    const WebAsset* asset = read ? find_web_asset(req.target()) : nullptr;
    if (asset == nullptr) {
      co_await next(req, w);
      co_return;
    }
    std::string body = req.method() == http::verb::head ? std::string{} : std::string(asset->body);
    co_await w.send(200, asset->content_type, std::move(body));
  };
}

}  // namespace pensieve::net
