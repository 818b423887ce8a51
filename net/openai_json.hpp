#pragma once
// JSON shapes of OpenAI chat-completion responses and stream chunks.
#include "net/chat_backend.hpp"

#include <boost/json/object.hpp>

#include <string>

namespace pensieve::net {

// Chat completions, or the legacy text completions (POST /v1/completions).
enum class ApiShape : std::uint8_t { chat, text };

struct CompletionIds {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  std::string model;
  std::int64_t created_s = 0;
  ApiShape shape = ApiShape::chat;
};

boost::json::object usage_json(const GenerationResult& r);
boost::json::object logprobs_json(const std::vector<TokenLogprob>& lps);

// The whole (non-streamed) response.
std::string completion_json(const CompletionIds& ids, const std::string& text,
                            const std::vector<TokenLogprob>& lps, bool with_logprobs,
                            const GenerationResult& result);

// One "data: {...}\n\n" SSE event of a chat.completion.chunk.
std::string chunk_event(const CompletionIds& ids, const boost::json::object& delta,
                        const GenerationDelta* with_logprobs, const char* finish_reason);
std::string usage_event(const CompletionIds& ids, const GenerationResult& result);

}  // namespace pensieve::net
