#pragma once
// A validated OpenAI chat-completions request, independent of HTTP and JSON.
#include "gpu/text/chat_template.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::net {

// role "system", "user", "assistant" or "tool", content, and the tool fields.
using ChatMessage = model::ChatMessage;

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  std::optional<std::string> conversation_id;  // stateful extension
  std::optional<std::string> prompt;           // POST /v1/completions: raw text, no messages
  // POST /v1/completions with `prompt` as token ids: fed to the model as
  // they are (no BOS added, no tokenizer), each checked against the vocabulary.
  std::optional<std::vector<std::int32_t>> prompt_tokens;
  std::string tenant;                          // set by the routes from the API key, never from the body
  // vLLM's cache_salt: a stateless request reuses only KV that requests
  // with the same tenant and salt left (1-256 characters).
  std::optional<std::string> cache_salt;
  // cache_control {"type": "ephemeral", "ttl": "5m" | seconds}: the
  // prompt's KV stays pinned this long once computed; 0: no pin.
  std::int64_t pin_ttl_s = 0;
  std::int32_t max_tokens = 256;
  std::int32_t min_tokens = 0;
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;  // extension; 0 = off
  float min_p = 0.0f;      // extension
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;  // extension
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;
  bool logprobs = false;
  std::int32_t top_logprobs = 0;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // extension (vLLM, llama.cpp)
  // tools and tool_choice as JSON text (checked for shape), for the model's
  // template; empty: absent.
  model::ChatExtras chat;
};

// The longest pin a request or the admin call may ask for (a day).
inline constexpr std::int64_t kMaxPinTtlSeconds = 86'400;
// cache_control's ttl when it names none (Anthropic's default).
inline constexpr std::int64_t kDefaultPinTtlSeconds = 300;

// Limits the front end enforces on every request.
class TenantTurnLimiter;

struct RequestLimits {
  std::size_t max_messages = 1024;
  std::int32_t max_tokens_ceiling = 4096;
  std::size_t max_stop_strings = 4;
  // Turns each tenant may have in the engine at once, shared by every front
  // end (net/tenant_limits.hpp); null: no limit.
  std::shared_ptr<TenantTurnLimiter> tenant_turns;
};

}  // namespace pensieve::net
