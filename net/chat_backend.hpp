#pragma once
// The front end's view of the engine: run one chat turn and stream its text.
// Implemented over the actor system; the HTTP, WebSocket and RPC front ends
// share it.
#include "net/api_error.hpp"
#include "net/chat_request.hpp"

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <string>
#include <vector>

namespace pensieve::net {

struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // top_logprobs alternatives
};

// A piece of the reply: whole UTF-8 characters only.
struct GenerationDelta {
  std::string text;
  std::vector<TokenLogprob> logprobs;
};

struct GenerationResult {
  std::string finish_reason;  // "stop" or "length"
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;  // prompt tokens served from the KV cache
};

// Called for each delta; returning false cancels the generation (the client left).
using DeltaSink = std::function<boost::asio::awaitable<bool>(const GenerationDelta&)>;

class ChatBackend {
 public:
  virtual ~ChatBackend() = default;
  virtual std::string model_name() const = 0;
  virtual boost::asio::awaitable<ApiResult<GenerationResult>> generate(const ChatRequest& request,
                                                                       DeltaSink sink) = 0;
};

}  // namespace pensieve::net
