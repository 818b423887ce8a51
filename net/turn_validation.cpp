#include "net/turn_call.hpp"

#include <cmath>
#include <vector>

// The adapter's pure half: a request's bounds and the error-kind table, with
// no engine in it (the chat request fuzz target links it alone).
namespace pensieve::net {

using actors::TurnError;
using actors::TurnErrorKind;

namespace {

std::string number_text(double d) {
  std::string s = std::to_string(d);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::optional<TurnError> invalid(std::string param, std::string what) {
  return TurnError{TurnErrorKind::invalid_request, "'" + param + "' " + what, std::move(param)};
}

std::optional<TurnError> in_range(std::string param, double v, double lo, double hi) {
  if (std::isfinite(v) && v >= lo && v <= hi) return std::nullopt;
  return invalid(std::move(param),
                 "must be between " + number_text(lo) + " and " + number_text(hi));
}

std::optional<TurnError> validate_sampling(const model::SamplingParams& s,
                                           const RequestLimits& limits) {
  if (auto e = in_range("max_tokens", s.max_tokens, 1, limits.max_tokens_ceiling)) return e;
  if (auto e = in_range("min_tokens", s.min_tokens, 0, limits.max_tokens_ceiling)) return e;
  if (auto e = in_range("temperature", s.temperature, 0.0, 2.0)) return e;
  if (auto e = in_range("top_p", s.top_p, 0.0, 1.0)) return e;
  if (s.top_p == 0.0f) return invalid("top_p", "must be greater than 0");
  if (auto e = in_range("top_k", s.top_k, 0, 1 << 20)) return e;
  if (auto e = in_range("min_p", s.min_p, 0.0, 1.0)) return e;
  if (auto e = in_range("presence_penalty", s.presence_penalty, -2.0, 2.0)) return e;
  if (auto e = in_range("frequency_penalty", s.frequency_penalty, -2.0, 2.0)) return e;
  if (auto e = in_range("repetition_penalty", s.repetition_penalty, 0.01, 10.0)) return e;
  if (auto e = in_range("top_logprobs", s.top_logprobs, 0, 20)) return e;
  if (s.top_logprobs > 0 && !s.logprobs)
    return invalid("top_logprobs", "requires 'logprobs': true");
  if (s.min_tokens > s.max_tokens) return invalid("min_tokens", "exceeds 'max_tokens'");
  if (s.stop_strings.size() > limits.max_stop_strings) {
    return invalid("stop",
                   "allows at most " + std::to_string(limits.max_stop_strings) + " strings");
  }
  for (const auto& stop : s.stop_strings) {
    if (stop.empty()) return invalid("stop", "strings must not be empty");
  }
  return std::nullopt;
}

}  // namespace

std::optional<TurnError> validate_turn(const actors::TurnRequest& r, const RequestLimits& limits) {
  if (auto e = validate_sampling(r.sampling, limits)) return e;
  if (r.prompt || r.prompt_tokens) return std::nullopt;
  if (r.messages.empty()) return invalid("messages", "must not be empty");
  if (r.messages.size() > limits.max_messages) {
    return invalid("messages", "has more than " + std::to_string(limits.max_messages) + " entries");
  }
  for (std::size_t i = 0; i < r.messages.size(); ++i) {
    const std::string& role = r.messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return invalid("messages[" + std::to_string(i) + "].role",
                     "must be system, user, assistant or tool");
    }
  }
  return std::nullopt;
}

actors::TurnRequest turn_request(const ChatRequest& r, std::uint64_t seed) {
  actors::TurnRequest t;
  t.tenant = r.tenant;
  t.conversation = r.conversation_id;
  t.compare_history = true;  // OpenAI clients resend the history every turn
  t.prompt = r.prompt;
  t.prompt_tokens = r.prompt_tokens;
  t.messages = r.messages;
  t.chat = r.chat;
  t.cache_salt = r.cache_salt;
  t.pin_ttl_s = r.pin_ttl_s;
  model::SamplingParams& p = t.sampling;
  p.temperature = r.temperature;
  p.top_k = r.top_k;
  p.top_p = r.top_p;
  p.min_p = r.min_p;
  p.repetition_penalty = r.repetition_penalty;
  p.presence_penalty = r.presence_penalty;
  p.frequency_penalty = r.frequency_penalty;
  p.seed = r.seed ? *r.seed : seed;
  p.logprobs = r.logprobs;
  p.top_logprobs = r.top_logprobs;
  p.stop_strings = r.stop;
  p.max_tokens = r.max_tokens;
  p.min_tokens = r.min_tokens;
  p.ignore_eos = r.ignore_eos;
  return t;
}

const ErrorProtocol& error_protocol(TurnErrorKind kind) {
  static constexpr ErrorProtocol invalid_request{
      400, "invalid_request_error", "", "invalid_request", false, "invalid request"};
  static constexpr ErrorProtocol not_found{
      404, "invalid_request_error", "not_found", "not_found", false, "not found"};
  static constexpr ErrorProtocol overloaded{503,          "server_error", "overloaded",
                                            "overloaded", true,           "overloaded"};
  static constexpr ErrorProtocol rate_limited{429,           "rate_limit_error", "rate_limit_exceeded",
                                              "rate_limited", true,               "rate limited"};
  static constexpr ErrorProtocol timeout{504,       "server_error", "timeout",
                                         "timeout", false,          "timeout"};
  static constexpr ErrorProtocol internal{500, "server_error", "", "internal", false, "internal"};
  switch (kind) {
    case TurnErrorKind::invalid_request:
      return invalid_request;
    case TurnErrorKind::not_found:
      return not_found;
    case TurnErrorKind::overloaded:
      return overloaded;
    case TurnErrorKind::rate_limited:
      return rate_limited;
    case TurnErrorKind::timeout:
      return timeout;
    case TurnErrorKind::internal:
      break;
  }
  return internal;
}

ApiError api_error(const TurnError& e) {
  const ErrorProtocol& p = error_protocol(e.kind);
  ApiError out{p.http_status, std::string(p.openai_type), e.message, e.param,
               std::string(p.openai_code)};
  // A refusal for load: a client may come back shortly (a turn takes seconds).
  if (p.http_status == 429 || p.http_status == 503) out.retry_after_s = 1;
  return out;
}

}  // namespace pensieve::net
