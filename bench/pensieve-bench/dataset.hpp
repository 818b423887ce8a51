#pragma once
// The conversations a benchmark replays, read from JSONL: one
// {"id": "...", "turns": [{"role": "user"|"assistant"|"system", "content": "..."}]}
// per line (the format of ../shared/data/*.jsonl).
#include "runtime/error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace pensieve::bench {

struct DatasetMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct Conversation {
  std::string id;
  std::vector<DatasetMessage> turns;
};

// Parses JSONL text; `source` names it in errors ("FILE:LINE: what is wrong").
// Blank lines are skipped; every other line must be a valid conversation with
// at least one user message.
Result<std::vector<Conversation>> parse_dataset(std::string_view text, const std::string& source);

Result<std::vector<Conversation>> load_dataset(const std::string& path);

// Unicode code points in UTF-8 text (the "characters" of chars/4 token estimates).
std::size_t utf8_chars(std::string_view text);

}  // namespace pensieve::bench
