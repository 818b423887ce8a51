// ws_tenant_of (declared in net/ws_chat_session.hpp): the WebSocket's API key,
// from the Authorization header or the api_key query parameter.
#include "net/ws_chat_session.hpp"

#include <string_view>

namespace pensieve::net {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The decoded value of `name` in a request target's query, if present.
std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.size() <= name.size() || !pair.starts_with(name) || pair[name.size()] != '=') continue;
    const std::string_view raw = pair.substr(name.size() + 1);
    std::string out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size() && hex_digit(raw[i + 1]) >= 0 && hex_digit(raw[i + 2]) >= 0) {
        out.push_back(char(hex_digit(raw[i + 1]) * 16 + hex_digit(raw[i + 2])));
        i += 2;
      } else {
        out.push_back(raw[i] == '+' ? ' ' : raw[i]);
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::function<std::optional<std::string>(const HttpRequest&)> ws_tenant_of(std::shared_ptr<const ApiKeys> keys) {
  return [keys = std::move(keys)](const HttpRequest& request) -> std::optional<std::string> {
    if (!keys || !keys->required()) return std::string();
    if (auto h = request.find(boost::beast::http::field::authorization); h != request.end()) {
      return keys->tenant_for(std::string_view(h->value()));
    }
    if (auto key = query_param(request.target(), "api_key")) return keys->tenant_for("Bearer " + *key);
    return std::nullopt;
  };
}

}  // namespace pensieve::net
