#pragma once
// What a stored conversation's turn does when its history plus max_tokens
// passes the model's context (--context-overflow): drop the oldest whole
// turns (never the system prompt) until it fits, or fail the turn. An
// anonymous (stateless) turn always fails, as OpenAI's API does.
#include <cstdint>

namespace pensieve::actors {

enum class ContextOverflow : std::uint8_t { truncate, error };

}  // namespace pensieve::actors
