#pragma once
// Parsing and validating the JSON body of POST /v1/chat/completions.
#include "net/api_error.hpp"
#include "net/chat_request.hpp"

#include <string_view>

namespace pensieve::net {

// Every field is type- and range-checked; the error names the field (`param`).
ApiResult<ChatRequest> parse_chat_request(std::string_view body, const RequestLimits& limits);

// POST /v1/completions: `prompt` (a string, or an array of one string)
// instead of messages; `logprobs` is the legacy integer (top alternatives).
ApiResult<ChatRequest> parse_completion_request(std::string_view body, const RequestLimits& limits);

}  // namespace pensieve::net
