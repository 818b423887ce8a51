#pragma once
// A server to measure: `[LABEL=]http://HOST[:PORT][/BASE]`. BASE is the
// server root or its OpenAI base ending in /v1; plain HTTP only.
#include "runtime/error.hpp"

#include <cstdint>
#include <string>

namespace pensieve::bench {

struct Target {
  std::string label;  // names its result files; from LABEL= or HOST-PORT
  std::string url;    // as given, without LABEL=
  std::string host;
  std::uint16_t port = 80;
  std::string api_base;  // "/v1" or "/BASE/v1"

  std::string chat_path() const { return api_base + "/chat/completions"; }
  std::string models_path() const { return api_base + "/models"; }
};

Result<Target> parse_target(const std::string& spec);

// Keeps [A-Za-z0-9._-], replaces the rest with '-' (a file-name-safe label).
std::string sanitize_label(const std::string& text);

}  // namespace pensieve::bench
