#pragma once
// The lookup tables every tokenizer algorithm shares, built once from a
// TokenizerData: piece -> id, each id's type, and the special pieces that are
// matched in raw text before tokenization (longest first). Immutable after
// make_vocab; read from any thread.
#include "gpu/text/tokenizer_data.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pensieve::model {

using TokenId = std::int32_t;

struct Vocab {
  struct PieceHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  TokenizerData data;
  std::unordered_map<std::string, TokenId, PieceHash, std::equal_to<>> ids_by_piece;
  // Control, unknown and user-defined tokens, longest piece first: the order
  // in which raw text is searched for them.
  std::vector<TokenId> special_by_length;

  std::size_t size() const { return data.tokens.size(); }
  bool contains(TokenId id) const { return id >= 0 && static_cast<std::size_t>(id) < size(); }
  TokenType type(TokenId id) const;
  const std::string& piece(TokenId id) const { return data.tokens[static_cast<std::size_t>(id)]; }
  float score(TokenId id) const;
  std::optional<TokenId> find(std::string_view piece) const;
  // SentencePiece byte fallback: <0xXX>, else the raw byte as a piece, else unk.
  std::optional<TokenId> byte_token(std::uint8_t byte) const;
};

// Checks the data (non-empty, arrays of matching length, special ids in range,
// no duplicate pieces) and builds the tables; fills eot_id from well-known
// pieces (<|eot_id|>, <|im_end|>, ...) when the file did not name one.
Result<Vocab> make_vocab(TokenizerData data);

}  // namespace pensieve::model
