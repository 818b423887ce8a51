#pragma once
// Text <-> token ids for a model, built from the vocabulary its file stores
// (TokenizerData): SentencePiece-style BPE or byte-level BPE, chosen by the
// data's kind. A Tokenizer is immutable and cheap to copy (the tables are
// shared); encode/decode may run on any thread at once.
#include "gpu/text/tokenizer_data.hpp"
#include "gpu/text/tokenizer_vocab.hpp"
#include "runtime/error.hpp"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::model {

struct EncodeOptions {
  // Prepend the BOS token (when the vocabulary has one). Models whose file
  // asks for it (adds_bos_by_default) want it at the start of a prompt.
  bool add_bos = false;
  // Match control tokens written in the text ("<|im_start|>") as those
  // tokens. User-defined tokens are always matched, control ones only then.
  bool parse_special = false;
};

struct DecodeOptions {
  // Write control and unknown tokens as their text ("<s>") instead of nothing.
  bool render_special = false;
  // SentencePiece: drop the space the encoder added in front of the text,
  // i.e. the leading space of the first token that is not BOS.
  bool strip_leading_space = true;
};

// A stretch of text to encode, and whether control tokens written in it may
// be matched (template markup: yes; text a client sent: never).
struct TextPiece {
  std::string_view text;
  bool parse_special = false;
};

class Tokenizer {
 public:
  static Result<Tokenizer> from_data(TokenizerData data);

  std::vector<TokenId> encode(std::string_view text, EncodeOptions options = {}) const;
  // Pieces encoded as their concatenation would be (raw text runs across
  // piece boundaries), except that specials are matched only where allowed.
  std::vector<TokenId> encode_pieces(std::span<const TextPiece> pieces, bool add_bos) const;
  std::vector<TokenId> encode(std::string_view text, bool add_bos, bool parse_special) const {
    return encode(text, EncodeOptions{add_bos, parse_special});
  }

  // Ids outside the vocabulary decode to nothing (check with contains()).
  std::string decode(std::span<const TokenId> ids, DecodeOptions options = {}) const;
  // The bytes one token stands for; may be part of a UTF-8 character (feed
  // pieces to a Utf8Stream before showing them to anyone).
  std::string token_to_piece(TokenId id, bool render_special = false) const;

  TokenizerKind kind() const;
  std::size_t vocab_size() const;
  bool contains(TokenId id) const;
  std::optional<TokenId> find_piece(std::string_view piece) const;  // the stored piece text
  TokenType type(TokenId id) const;
  bool is_control(TokenId id) const;
  // Control or unknown: not text, written out only with render_special.
  bool is_special(TokenId id) const;
  // EOS or end of turn: generation stops here.
  bool is_end_of_generation(TokenId id) const;

  std::optional<TokenId> bos_id() const;
  std::optional<TokenId> eos_id() const;
  std::optional<TokenId> eot_id() const;
  bool adds_bos_by_default() const;
  const std::string& chat_template() const;
  const TokenizerData& data() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

  std::shared_ptr<const Impl> impl_;
};

}  // namespace pensieve::model
