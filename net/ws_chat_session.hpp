#pragma once
// The WebSocket chat at /v1/ws (protocol in net/README.md): one session per
// connection. The session's coroutine reads the client's messages; a writer
// coroutine sends everything out in order (deltas and answers share it), and
// a turn coroutine pumps the running turn's deltas, so a cancel is read
// while a reply streams. When the client goes, its turn is cancelled and the
// session returns only after the turn and the writer have ended.
//
// Runs on the HTTP server's executor (one thread: the session's state is
// unsynchronised). The engine outlives the server that runs the sessions.
#include "actors/engine.hpp"
#include "net/api_keys.hpp"
#include "net/chat_request.hpp"
#include "net/http_server.hpp"
#include "net/http_types.hpp"
#include "net/turn_call.hpp"
#include "net/ws_chat_protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace pensieve::net {

struct WsChatOptions {
  std::size_t max_message_bytes = 64 * 1024;  // larger: closed with 1009
  std::int32_t default_max_tokens = 256;
  RequestLimits limits;  // the bounds every turn is checked against (net/turn_call.hpp)
  TurnCallOptions turn;  // each turn's timeout and the metrics it records into
  // The tenant a connection acts for, from its upgrade request; nullopt
  // refuses the upgrade with 401. Unset: every connection is tenant "".
  std::function<std::optional<std::string>(const HttpRequest&)> tenant_of;
  // Refuse by accepting the upgrade and closing at once with 1008 (policy
  // violation, reason "invalid_api_key"), which a browser can read, rather
  // than answering 401, which it cannot.
  bool refuse_with_close = false;
};

// tenant_of for API keys: "Authorization: Bearer KEY" on the upgrade
// request, or, since a browser's WebSocket cannot set headers, the query
// parameter api_key (/v1/ws?api_key=KEY, percent-encoded). Open keys: "".
std::function<std::optional<std::string>(const HttpRequest&)> ws_tenant_of(std::shared_ptr<const ApiKeys> keys);

UpgradeHandler make_ws_chat_handler(actors::Engine& engine, WsChatOptions options);

}  // namespace pensieve::net
