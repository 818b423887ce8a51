#include "gpu/text/tokenizer_vocab.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

namespace pensieve::model {

namespace {

Result<void> check_lengths(const TokenizerData& d) {
  if (d.tokens.empty()) return fail("tokenizer: the vocabulary is empty");
  if (!d.scores.empty() && d.scores.size() != d.tokens.size()) {
    return fail("tokenizer: " + std::to_string(d.scores.size()) + " scores for " +
                std::to_string(d.tokens.size()) + " tokens");
  }
  if (!d.token_types.empty() && d.token_types.size() != d.tokens.size()) {
    return fail("tokenizer: " + std::to_string(d.token_types.size()) + " token types for " +
                std::to_string(d.tokens.size()) + " tokens");
  }
  const auto n = static_cast<std::int64_t>(d.tokens.size());
  const std::array<std::pair<const char*, std::int32_t>, 5> ids = {
      {{"bos", d.bos_id}, {"eos", d.eos_id}, {"eot", d.eot_id}, {"unk", d.unk_id}, {"pad", d.pad_id}}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= n) {
      return fail("tokenizer: " + std::string(name) + " id " + std::to_string(id) +
                  " is outside the vocabulary of " + std::to_string(n));
    }
  }
  return {};
}

std::int32_t find_end_of_turn(const Vocab& v) {
  for (const char* piece : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}) {
    if (auto id = v.find(piece)) return *id;
  }
  return -1;
}

}  // namespace

TokenType Vocab::type(TokenId id) const {
  if (data.token_types.empty()) return TokenType::normal;
  return data.token_types[static_cast<std::size_t>(id)];
}

float Vocab::score(TokenId id) const {
  return data.scores.empty() ? 0.0f : data.scores[static_cast<std::size_t>(id)];
}

std::optional<TokenId> Vocab::find(std::string_view piece) const {
  auto it = ids_by_piece.find(piece);
  if (it == ids_by_piece.end()) return std::nullopt;
  return it->second;
}

std::optional<TokenId> Vocab::byte_token(std::uint8_t byte) const {
  char name[8];
  std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned>(byte));
  if (auto id = find(name)) return id;
  if (auto id = find(std::string_view(reinterpret_cast<const char*>(&byte), 1))) return id;
  if (data.unk_id >= 0) return data.unk_id;
  return std::nullopt;
}

Result<Vocab> make_vocab(TokenizerData data) {
  if (auto checked = check_lengths(data); !checked) return checked.error();
  Vocab v;
  v.data = std::move(data);
  v.ids_by_piece.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto [it, inserted] = v.ids_by_piece.emplace(v.data.tokens[i], static_cast<TokenId>(i));
    if (!inserted) {
      return fail("tokenizer: duplicate piece '" + v.data.tokens[i] + "' (ids " +
                  std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
  for (TokenId id = 0; v.contains(id); ++id) {
    const TokenType t = v.type(id);
    if ((t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined) &&
        !v.piece(id).empty()) {
      v.special_by_length.push_back(id);
    }
  }
  std::stable_sort(v.special_by_length.begin(), v.special_by_length.end(),
                   [&](TokenId a, TokenId b) { return v.piece(a).size() > v.piece(b).size(); });
  if (v.data.eot_id < 0) v.data.eot_id = find_end_of_turn(v);
  return v;
}

}  // namespace pensieve::model
