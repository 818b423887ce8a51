#pragma once
// The vocabulary of the built-in default model, made in code so the server
// runs with no file at all: SentencePiece-style with byte fallback (every
// UTF-8 byte is a token, so any text encodes), the usual control tokens, and a
// ChatML chat template whose markers are control tokens.
#include "gpu/text/tokenizer_data.hpp"
#include "runtime/error.hpp"

#include <filesystem>

namespace pensieve::model {

// ids: 0 <unk>, 1 <s>, 2 </s>, 3 <|im_start|>, 4 <|im_end|>, 5..260 <0x00>..<0xFF>,
// then "▁" and the printable ASCII characters with and without a leading "▁".
TokenizerData builtin_vocab();

// Writes builtin_vocab() as a vocabulary-only GGUF (tokenizer.* keys, as
// llama.cpp names them), the input make_test_model copies a vocabulary from.
Result<void> write_builtin_vocab_gguf(const std::filesystem::path& path);

}  // namespace pensieve::model
