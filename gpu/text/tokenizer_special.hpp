#pragma once
// Finding special tokens written out in raw text ("<|im_start|>user") before
// the text is tokenized, as llama.cpp's tokenizer_st_partition does: tokens are
// tried longest first, each splitting every remaining stretch of raw text at
// all of its occurrences. Pure function; any thread.
#include "gpu/text/tokenizer_vocab.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace pensieve::model {

// Either a stretch of raw text (views into the input) or one token.
struct TextFragment {
  std::string_view text;
  std::optional<TokenId> token;
};

// User-defined tokens are always matched; control and unknown tokens only
// with parse_special. The fragments, in order, cover the whole text.
std::vector<TextFragment> split_special_tokens(const Vocab& vocab, std::string_view text,
                                               bool parse_special);

// The byte a "<0xNN>" piece stands for.
std::optional<std::uint8_t> parse_byte_piece(std::string_view piece);

}  // namespace pensieve::model
