#pragma once
// The vocabulary stored in a GGUF file's tokenizer.* metadata, as TokenizerData.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/text/tokenizer_data.hpp"
#include "runtime/error.hpp"

#include <filesystem>

namespace pensieve::model {

// True when the file carries a vocabulary (tokenizer.ggml.model and tokens).
bool gguf_has_tokenizer(const GgufFile& file);

// Reads tokenizer.ggml.* and tokenizer.chat_template. Model "llama" is a
// SentencePiece vocabulary, "gpt2" a byte-level BPE one; others are an Error.
// Missing special ids and flags take llama.cpp's defaults for that model.
Result<TokenizerData> tokenizer_from_gguf(const GgufFile& file);

// The end-of-turn token of the common chat formats (<|eot_id|>, <|im_end|>,
// <end_of_turn>, <|end|>) when the vocabulary has one; -1 otherwise.
std::int32_t find_end_of_turn_token(const TokenizerData& tok);

// Reads only the vocabulary of a GGUF (a vocab-only file or a whole model).
Result<TokenizerData> read_gguf_tokenizer(const std::filesystem::path& path);

}  // namespace pensieve::model
