#pragma once
// Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerData.
// A BPE model with byte_fallback is a SentencePiece-style vocabulary (Llama 2,
// TinyLlama, Mistral); a BPE model with a ByteLevel pre-tokenizer is byte-level
// BPE (GPT-2, Llama 3, Qwen2). Other model types are an Error.
#include "gpu/text/tokenizer_data.hpp"
#include "runtime/error.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace pensieve::model {

// `config_json` may be empty (no tokenizer_config.json). SentencePiece-style
// scores come from the merge ranks (earlier merge = higher score), the
// priority that llama.cpp's SentencePiece tokenizer reads from scores.
Result<TokenizerData> parse_tokenizer_json(std::string_view tokenizer_json, std::string_view config_json,
                                           const std::string& label);

// Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json.
Result<TokenizerData> read_hf_tokenizer(const std::filesystem::path& dir);

}  // namespace pensieve::model
