#include "gpu/text/tokenizer_special.hpp"

namespace pensieve::model {

namespace {

// Splits one stretch of raw text at every occurrence of `piece`.
void split_at(std::string_view raw, std::string_view piece, TokenId id, std::vector<TextFragment>& out) {
  std::size_t start = 0;
  for (std::size_t match = raw.find(piece); match != std::string_view::npos;
       match = raw.find(piece, start)) {
    if (match > start) out.push_back({raw.substr(start, match - start), std::nullopt});
    out.push_back({{}, id});
    start = match + piece.size();
  }
  if (start < raw.size()) out.push_back({raw.substr(start), std::nullopt});
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::vector<TextFragment> split_special_tokens(const Vocab& vocab, std::string_view text,
                                               bool parse_special) {
  std::vector<TextFragment> fragments;
  if (!text.empty()) fragments.push_back({text, std::nullopt});
  for (TokenId id : vocab.special_by_length) {
    if (!parse_special && vocab.type(id) != TokenType::user_defined) continue;
    const std::string& piece = vocab.piece(id);
    bool found = false;
    for (const TextFragment& f : fragments) {
      if (!f.token && f.text.find(piece) != std::string_view::npos) found = true;
    }
    if (!found) continue;
    std::vector<TextFragment> next;
    next.reserve(fragments.size() + 2);
    for (const TextFragment& f : fragments) {
      if (f.token) {
        next.push_back(f);
      } else {
        split_at(f.text, piece, id, next);
      }
    }
    fragments = std::move(next);
  }
  return fragments;
}

std::optional<std::uint8_t> parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece.back() != '>') return std::nullopt;
  const int high = hex_digit(piece[3]);
  const int low = hex_digit(piece[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<std::uint8_t>(high * 16 + low);
}

}  // namespace pensieve::model
