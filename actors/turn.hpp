#pragma once
// The messages of one chat turn between a front end and the engine.
#include "gpu/text/chat_template.hpp"
#include "gpu/model/sampler.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::actors {

struct TurnRequest {
  std::vector<model::ChatMessage> messages;  // the whole conversation so far
  model::SamplingParams sampling;
};

// Text released to the client: whole UTF-8 characters, never the start of a
// stop string; `tokens` are the sampled tokens it came from (with logprobs).
struct TurnDelta {
  std::string text;
  std::vector<model::SampledToken> tokens;
  std::int64_t computed_ns = 0;  // steady clock: when its newest token was sampled
};

struct TurnSummary {
  model::FinishReason finish = model::FinishReason::none;
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::int32_t cached_tokens = 0;
  bool cancelled = false;
};

enum class TurnErrorKind : std::uint8_t { invalid_request, not_found, overloaded, internal };

struct TurnError {
  TurnErrorKind kind = TurnErrorKind::internal;
  std::string message;
};

}  // namespace pensieve::actors
