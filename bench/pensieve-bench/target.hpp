#pragma once
// A server to measure: `[MODE:][LABEL=]http://HOST[:PORT][/BASE]`. BASE is
// the server root or its OpenAI base ending in /v1; plain HTTP only. MODE
// (stateful or stateless) is this target's client, overriding the run's, so
// one run compares the conversation API with a stateless client side by side.
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace pensieve::bench {

// A stateless client resends the whole history every turn (as the OpenAI
// SDKs do); a stateful one sends only the new message and names the
// conversation.
enum class ClientMode { stateless, stateful };

struct Target {
  std::string label;  // names its result files; from LABEL= or HOST-PORT
  std::string url;    // as given, without LABEL=
  std::string host;
  std::uint16_t port = 80;
  std::string api_base;  // "/v1" or "/BASE/v1"
  std::optional<ClientMode> mode;  // absent: the run's --stateful / --stateless

  std::string chat_path() const { return api_base + "/chat/completions"; }
  std::string models_path() const { return api_base + "/models"; }
};

Result<Target> parse_target(const std::string& spec);

// Keeps [A-Za-z0-9._-], replaces the rest with '-' (a file-name-safe label).
std::string sanitize_label(const std::string& text);

}  // namespace pensieve::bench
