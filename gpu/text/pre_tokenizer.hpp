#pragma once
// Byte-level BPE pre-tokenization: splitting text into the words that BPE
// merges never cross, as the tokenizer.json regexes do. std::regex has no
// \p{L} / \p{N}, so each regex family is matched by hand over code points
// (the same shortcut llama.cpp takes). Pure functions; any thread.
#include "runtime/error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

enum class PreTokenizer {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  llama3,
  // llama3 with \p{N} (one digit per word) instead of \p{N}{1,3}
  qwen2,
  // every \p{N} its own word, then gpt2 on the rest (StarCoder, SmolLM)
  digits_then_gpt2,
};

// Maps a GGUF `tokenizer.ggml.pre` name ("gpt-2", "llama-bpe", "qwen2", ...)
// to its splitter; an empty name or "default" means gpt2. Unknown names fail.
Result<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

// Splits `text` into words (UTF-8; invalid bytes come out as U+FFFD, as in
// llama.cpp). Concatenating the words gives the text back when it is valid.
std::vector<std::string> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace pensieve::model
