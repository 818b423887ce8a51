#pragma once
// API keys and the tenants they name. `--api-key KEY` gives one key for the
// tenant "default"; `--api-keys FILE` reads one "KEY TENANT" pair per line
// ('#' starts a comment). Without keys the server is open and every request
// belongs to the tenant "". Immutable after loading; any thread.
#include "runtime/error.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace pensieve::net {

class ApiKeys {
 public:
  ApiKeys() = default;  // open: no key required
  static ApiKeys single(std::string key, std::string tenant = "default");
  static Result<ApiKeys> from_file(const std::string& path);
  // The same format from text (the file's contents); `origin` names it in errors.
  static Result<ApiKeys> parse(std::string_view text, const std::string& origin);

  bool required() const { return !tenants_.empty(); }
  // The tenant of an "Authorization" header value ("Bearer KEY"), or nullopt
  // when keys are required and it names none. Compared in constant time.
  std::optional<std::string> tenant_for(std::string_view authorization) const;

 private:
  std::map<std::string, std::string, std::less<>> tenants_;  // key -> tenant
};

}  // namespace pensieve::net
