#pragma once
// A vocabulary as stored in a model file (GGUF metadata or tokenizer.json),
// before any tokenizer is built from it.
#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::model {

enum class TokenizerKind : std::uint8_t {
  sentencepiece,  // GGUF "llama": scores, byte fallback <0xNN>, leading-space rule
  byte_bpe,       // GGUF "gpt2": merges, byte-to-unicode mapping, pre-tokenizer regexes
};

// GGUF token types (llama.cpp's llama_token_type).
enum class TokenType : std::int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

struct TokenizerData {
  TokenizerKind kind = TokenizerKind::sentencepiece;
  std::vector<std::string> tokens;
  std::vector<float> scores;           // sentencepiece; may be empty for BPE
  std::vector<TokenType> token_types;  // same length as tokens, or empty
  std::vector<std::string> merges;     // byte_bpe: "left right", in rank order
  std::string pre;                     // pre-tokenizer name (tokenizer.ggml.pre), e.g. "gpt2", "llama3"
  std::int32_t bos_id = -1;
  std::int32_t eos_id = -1;
  std::int32_t eot_id = -1;            // end of turn (<|eot_id|>, <|im_end|>) when distinct
  std::int32_t unk_id = -1;
  std::int32_t pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;        // sentencepiece: prepend "▁" to the text
  // sentencepiece from a tokenizer.json whose Metaspace pre_tokenizer splits:
  // each "▁" starts a word of its own that merges never cross (not in GGUF).
  bool split_at_space_mark = false;
  std::string chat_template;           // Jinja source, empty when the file has none
};

}  // namespace pensieve::model
