#pragma once
// The web chat page's files (net/web/), embedded in the binary at build
// time by net/embed_web_assets.cmake, and the routes that serve them.
#include "net/http_types.hpp"

#include <span>
#include <string_view>

namespace pensieve::net {

struct WebAsset {
  std::string_view path;          // "/index.html", "/app.js", ...
  std::string_view content_type;  // from the file's extension
  std::string_view body;
};

// Every embedded file; defined in the generated web_assets_data.cpp.
std::span<const WebAsset> web_assets();

// The asset served at a request path ("/" is /index.html); null when none.
const WebAsset* find_web_asset(std::string_view path);

// Serves GET and HEAD of the page's files; every other request goes to
// `next` (which answers 404 for paths nobody serves).
HttpHandler with_web_page(HttpHandler next);

}  // namespace pensieve::net
