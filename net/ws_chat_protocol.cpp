#include "net/ws_chat_protocol.hpp"

#include "net/turn_call.hpp"

#include <boost/json.hpp>

#include <cmath>

namespace pensieve::net {

namespace json = boost::json;

namespace {

WsError ws_bad_request(std::string message) {
  return WsError{"bad_request", std::move(message)};
}

// A field that must be a string when present.
boost::system::result<std::optional<std::string>, WsError> optional_string(const json::object& o,
                                                                            std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return std::optional<std::string>{};
  if (!v->is_string()) return ws_bad_request("'" + std::string(key) + "' must be a string");
  return std::optional<std::string>{std::string(v->as_string())};
}

boost::system::result<WsClientMessage, WsError> parse_send(const json::object& o) {
  WsSend send;
  const json::value* content = o.if_contains("content");
  if (content == nullptr || !content->is_string() || content->as_string().empty()) {
    return ws_bad_request("'content' must be a non-empty string");
  }
  send.content = std::string(content->as_string());
  // Types only; the bounds are the adapter's (net/turn_call.hpp).
  if (const json::value* v = o.if_contains("max_tokens"); v != nullptr && !v->is_null()) {
    if (!v->is_int64() || v->as_int64() < INT32_MIN || v->as_int64() > INT32_MAX) {
      return ws_bad_request("'max_tokens' must be an integer");
    }
    send.max_tokens = std::int32_t(v->as_int64());
  }
  if (const json::value* v = o.if_contains("temperature"); v != nullptr && !v->is_null()) {
    if (!v->is_number()) return ws_bad_request("'temperature' must be a number");
    send.temperature = float(v->to_number<double>());
  }
  if (const json::value* v = o.if_contains("top_p"); v != nullptr && !v->is_null()) {
    if (!v->is_number()) return ws_bad_request("'top_p' must be a number");
    send.top_p = float(v->to_number<double>());
  }
  if (const json::value* v = o.if_contains("role"); v != nullptr && !v->is_null()) {
    if (!v->is_string()) return ws_bad_request("'role' must be a string");
    send.role = std::string(v->as_string());
  }
  if (const json::value* v = o.if_contains("ignore_eos"); v != nullptr && !v->is_null()) {
    if (!v->is_bool()) return ws_bad_request("'ignore_eos' must be a boolean");
    send.ignore_eos = v->as_bool();
  }
  return WsClientMessage{std::move(send)};
}

}  // namespace

boost::system::result<WsClientMessage, WsError> parse_ws_message(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return WsError{"bad_json", "the message is not JSON: " + ec.message()};
  if (!v.is_object()) return ws_bad_request("a message must be a JSON object");
  const json::object& o = v.as_object();
  const json::value* type = o.if_contains("type");
  if (type == nullptr || !type->is_string())
    return ws_bad_request("a message needs a string 'type'");
  const std::string_view t = type->as_string();
  if (t == "open") {
    auto id = optional_string(o, "conversation");
    if (!id) return id.error();
    return WsClientMessage{WsOpen{std::move(*id)}};
  }
  if (t == "send") return parse_send(o);
  if (t == "cancel") return WsClientMessage{WsCancel{}};
  if (t == "list") return WsClientMessage{WsList{}};
  if (t == "delete") {
    auto id = optional_string(o, "conversation");
    if (!id) return id.error();
    if (!*id) return ws_bad_request("'delete' needs a 'conversation'");
    return WsClientMessage{WsDelete{std::move(**id)}};
  }
  return WsError{"unknown_type", "unknown message type '" + std::string(t) + "'"};
}

std::string ws_error_code(actors::TurnErrorKind kind) {
  return std::string(error_protocol(kind).ws_code);
}

std::string ws_error_json(const WsError& error) {
  return json::serialize(json::object{{"type", "error"}, {"code", error.code}, {"message", error.message}});
}

std::string ws_opened_json(const std::string& conversation, const std::string& model,
                           const std::vector<model::ChatMessage>& history) {
  json::array items;
  for (const auto& m : history) items.push_back(json::object{{"role", m.role}, {"content", m.content}});
  return json::serialize(json::object{
      {"type", "opened"}, {"conversation", conversation}, {"model", model}, {"history", std::move(items)}});
}

std::string ws_delta_json(std::string_view text) {
  return json::serialize(json::object{{"type", "delta"}, {"text", text}});
}

std::string ws_done_json(const actors::TurnDone& summary, const WsTurnTiming& timing) {
  std::string_view finish = "stop";
  if (summary.cancelled) {
    finish = "cancelled";
  } else if (summary.finish == model::FinishReason::length) {
    finish = "length";
  }
  json::object usage{{"prompt_tokens", summary.prompt_tokens},
                     {"completion_tokens", summary.completion_tokens},
                     {"cached_tokens", summary.cached_tokens}};
  if (summary.truncated_tokens > 0) usage["truncated_tokens"] = summary.truncated_tokens;
  json::object done{{"type", "done"}, {"finish_reason", finish}, {"cancelled", summary.cancelled},
                    {"usage", std::move(usage)}};
  done["tokens_per_s"] = timing.elapsed_s > 0 ? summary.completion_tokens / timing.elapsed_s : 0.0;
  done["elapsed_ms"] = timing.elapsed_s * 1e3;
  if (timing.ttft_s) done["ttft_ms"] = *timing.ttft_s * 1e3;
  return json::serialize(done);
}

std::string ws_conversations_json(const std::vector<actors::ConversationInfo>& items) {
  json::array out;
  for (const auto& c : items) out.push_back(json::object{{"id", c.id}, {"created", c.created_unix_s}});
  return json::serialize(json::object{{"type", "conversations"}, {"items", std::move(out)}});
}

std::string ws_deleted_json(const std::string& conversation) {
  return json::serialize(json::object{{"type", "deleted"}, {"conversation", conversation}});
}

}  // namespace pensieve::net
