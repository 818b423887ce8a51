#include "bench/pensieve-bench/target.hpp"

#include <charconv>
#include <string_view>
#include <utility>

namespace pensieve::bench {

std::string sanitize_label(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

Result<Target> parse_target(const std::string& spec) {
  Target t;
  std::string labelled = spec;
  for (const auto& [name, mode] : {std::pair{"stateful:", ClientMode::stateful},
                                   std::pair{"stateless:", ClientMode::stateless}}) {
    if (labelled.rfind(name, 0) == 0) {
      t.mode = mode;
      labelled = labelled.substr(std::string_view(name).size());
      break;
    }
  }
  std::string url = labelled;
  const std::size_t scheme = labelled.find("://");
  const std::size_t eq = labelled.find('=');
  if (eq != std::string::npos && (scheme == std::string::npos || eq < scheme)) {
    t.label = sanitize_label(labelled.substr(0, eq));
    url = labelled.substr(eq + 1);
    if (t.label.empty()) return fail("--target '" + spec + "': empty label");
  }
  t.url = url;
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return fail("--target '" + url + "': only http:// URLs are supported");
  std::string rest = url.substr(prefix.size());
  const std::size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (const std::size_t colon = authority.rfind(':'); colon != std::string::npos) {
    const std::string port = authority.substr(colon + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return fail("--target '" + url + "': bad port '" + port + "'");
    }
    t.port = std::uint16_t(value);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return fail("--target '" + url + "': no host");
  t.host = authority;
  const bool ends_v1 = path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0;
  t.api_base = ends_v1 ? path : path + "/v1";
  if (t.label.empty()) t.label = sanitize_label(t.host + "-" + std::to_string(t.port));
  return t;
}

}  // namespace pensieve::bench
