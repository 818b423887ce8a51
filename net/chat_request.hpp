#pragma once
// A validated OpenAI chat-completions request, independent of HTTP and JSON.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::net {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  std::optional<std::string> conversation_id;  // stateful extension
  std::optional<std::string> prompt;           // POST /v1/completions: raw text, no messages
  std::string tenant;                          // set by the routes from the API key, never from the body
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
};

// Limits the front end enforces on every request.
struct RequestLimits {
  std::size_t max_messages = 1024;
  std::int32_t max_tokens_ceiling = 4096;
  std::size_t max_stop_strings = 4;
};

}  // namespace pensieve::net
