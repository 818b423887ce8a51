#pragma once
// The WebSocket chat protocol's messages (see net/README.md, "WebSocket
// chat"): parsing what a client sends and writing what the server answers.
// Pure: no sockets, no engine.
#include "actors/engine.hpp"

#include <boost/system/result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pensieve::net {

struct WsOpen {
  std::optional<std::string> conversation;  // absent: a new conversation
};
struct WsSend {
  std::string content;
  std::string role = "user";
  std::optional<std::int32_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  bool ignore_eos = false;
};
struct WsCancel {};
struct WsList {};
struct WsDelete {
  std::string conversation;
};

using WsClientMessage = std::variant<WsOpen, WsSend, WsCancel, WsList, WsDelete>;

// Answered as {"type":"error","code":code,"message":message}.
struct WsError {
  std::string code;
  std::string message;
};

// Parses a client message; its values' bounds are checked by the adapter
// (validate_turn), as every front end's.
boost::system::result<WsClientMessage, WsError> parse_ws_message(std::string_view text);

// The code a failed turn is reported with (error_protocol's ws_code).
std::string ws_error_code(actors::TurnErrorKind kind);

std::string ws_error_json(const WsError& error);
std::string ws_opened_json(const std::string& conversation, const std::string& model,
                           const std::vector<model::ChatMessage>& history);
std::string ws_delta_json(std::string_view text);

struct WsTurnTiming {
  double elapsed_s = 0;          // from the send to the end of the turn
  std::optional<double> ttft_s;  // to the first delta; absent when none came
};
std::string ws_done_json(const actors::TurnDone& summary, const WsTurnTiming& timing);
std::string ws_conversations_json(const std::vector<actors::ConversationInfo>& items);
std::string ws_deleted_json(const std::string& conversation);

}  // namespace pensieve::net
