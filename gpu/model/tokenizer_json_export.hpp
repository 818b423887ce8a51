#pragma once
// TokenizerData -> Hugging Face tokenizer.json + tokenizer_config.json, so a
// model exported as a Hugging Face directory keeps its vocabulary.
// SentencePiece vocabularies become BPE with byte_fallback, their merges
// derived from the scores the way Hugging Face's converter does it: every
// split of a token into two tokens is a merge, ranked by the token's score.
#include "gpu/text/tokenizer_data.hpp"
#include "runtime/error.hpp"

#include <filesystem>
#include <string>

namespace pensieve::model {

Result<std::string> tokenizer_json_text(const TokenizerData& tok);
std::string tokenizer_config_json_text(const TokenizerData& tok);

// Writes dir/tokenizer.json and dir/tokenizer_config.json.
Result<void> write_hf_tokenizer(const TokenizerData& tok, const std::filesystem::path& dir);

}  // namespace pensieve::model
