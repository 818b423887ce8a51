#include "net/api_keys.hpp"

#include <fstream>
#include <sstream>

namespace pensieve::net {

namespace {

// Equal without an early exit: how much of a key matched does not show in
// the time the check takes.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

}  // namespace

ApiKeys ApiKeys::single(std::string key, std::string tenant) {
  ApiKeys k;
  k.tenants_.emplace(std::move(key), std::move(tenant));
  return k;
}

Result<ApiKeys> ApiKeys::parse(std::string_view text, const std::string& origin) {
  ApiKeys keys;
  std::istringstream in{std::string(text)};
  std::size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string key, tenant, extra;
    if (!(fields >> key)) continue;  // blank
    if (!(fields >> tenant) || (fields >> extra)) {
      return fail(origin + ":" + std::to_string(line_no) + ": expected 'KEY TENANT'");
    }
    if (!keys.tenants_.emplace(key, tenant).second) {
      return fail(origin + ":" + std::to_string(line_no) + ": the key appears twice");
    }
  }
  if (keys.tenants_.empty()) return fail(origin + ": no keys");
  return keys;
}

Result<ApiKeys> ApiKeys::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail("cannot read the API keys file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

std::optional<std::string> ApiKeys::tenant_for(std::string_view authorization) const {
  if (!required()) return std::string();
  constexpr std::string_view bearer = "Bearer ";
  if (authorization.substr(0, bearer.size()) != bearer) return std::nullopt;
  const std::string_view key = authorization.substr(bearer.size());
  std::optional<std::string> found;
  for (const auto& [k, tenant] : tenants_) {  // every key compared: no early exit either
    if (same_secret(key, k)) found = tenant;
  }
  return found;
}

}  // namespace pensieve::net
