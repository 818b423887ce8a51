#pragma once
// SentencePiece-style BPE (Llama 2 / TinyLlama vocabularies), as llama.cpp's
// llm_tokenizer_spm does it: the text (spaces already replaced by U+2581) is
// split into UTF-8 characters, adjacent pairs that form a vocabulary piece are
// merged highest score first, and what never formed a piece falls back to
// <0xNN> byte tokens. Pure functions of the Vocab; any thread.
#include "gpu/text/tokenizer_vocab.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

inline constexpr std::string_view spm_space = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// " " -> U+2581 everywhere in `text`.
std::string spm_escape_spaces(std::string_view text);

// Appends the ids of `escaped_text` (spaces already escaped) to `out`.
void spm_encode(const Vocab& vocab, std::string_view escaped_text, std::vector<TokenId>& out);

}  // namespace pensieve::model
