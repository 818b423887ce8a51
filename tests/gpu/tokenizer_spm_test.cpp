// SentencePiece-style BPE on small hand-made vocabularies: merge order by
// score, byte fallback, the leading-space rule and special tokens.
#include "gpu/text/tokenizer.hpp"

#include <catch2/catch.hpp>

#include <cstdio>

using namespace pensieve::model;

namespace {

const std::string sp = "\xe2\x96\x81";  // ▁

struct Piece {
  std::string text;
  float score;
  TokenType type = TokenType::normal;
};

TokenizerData spm_data(const std::vector<Piece>& pieces, bool add_space_prefix = true) {
  TokenizerData d;
  d.kind = TokenizerKind::sentencepiece;
  for (const auto& p : pieces) {
    d.tokens.push_back(p.text);
    d.scores.push_back(p.score);
    d.token_types.push_back(p.type);
  }
  d.unk_id = 0;
  d.bos_id = 1;
  d.eos_id = 2;
  d.add_bos = true;
  d.add_space_prefix = add_space_prefix;
  return d;
}

// ids: 0 <unk>, 1 <s>, 2 </s>, 3 ▁, 4 a, 5 b, 6 ab, 7 ▁a, 8 ▁ab, 9 c, 10 bc,
// 11 <0xC3>, 12 <0xA9>, 13 x, 14 y, 15 z, 16 xy, 17 yz
std::vector<Piece> small_vocab() {
  return {{"<unk>", 0, TokenType::unknown}, {"<s>", 0, TokenType::control}, {"</s>", 0, TokenType::control},
          {sp, -1.0f}, {"a", -2.0f}, {"b", -2.0f}, {"ab", -1.5f}, {sp + "a", -1.2f}, {sp + "ab", -0.5f},
          {"c", -3.0f}, {"bc", -0.1f}, {"<0xC3>", 0, TokenType::byte}, {"<0xA9>", 0, TokenType::byte},
          {"x", -2.0f}, {"y", -2.0f}, {"z", -2.0f}, {"xy", -1.0f}, {"yz", -1.0f}};
}

Tokenizer small_tokenizer(bool add_space_prefix = true) {
  return Tokenizer::from_data(spm_data(small_vocab(), add_space_prefix)).value();
}

using Ids = std::vector<TokenId>;

}  // namespace

TEST_CASE("spm merges the best-scoring pair first until no pair is a piece") {
  const auto tok = small_tokenizer();
  CHECK(tok.encode("ab", false, false) == Ids{8});      // ▁a (-1.2) before ab (-1.5), then ▁ab
  CHECK(tok.encode("abc", false, false) == Ids{7, 10});  // bc (-0.1) first, so ▁ab never forms
}

TEST_CASE("spm merges the leftmost of equally scored pairs first") {
  const auto tok = small_tokenizer(false);
  CHECK(tok.encode("xyz", false, false) == Ids{16, 15});
}

TEST_CASE("spm prefixes the text with a space only when the vocabulary asks for it") {
  CHECK(small_tokenizer(true).encode("ab", false, false) == Ids{8});
  CHECK(small_tokenizer(false).encode("ab", false, false) == Ids{6});
  CHECK(small_tokenizer(true).encode(" ab", false, false) == Ids{3, 8});
}

TEST_CASE("spm falls back to byte tokens for characters without a piece, and to unk without one") {
  const auto tok = small_tokenizer();
  CHECK(tok.encode("\xc3\xa9", false, false) == Ids{3, 11, 12});  // ▁ then é as <0xC3><0xA9>
  CHECK(tok.encode("q", false, false) == Ids{3, 0});               // no <0x71>: unk
}

TEST_CASE("spm decoding turns the space mark back into spaces and bytes into text") {
  const auto tok = small_tokenizer();
  CHECK(tok.decode(Ids{8}) == "ab");            // the prefix space is dropped
  CHECK(tok.decode(Ids{1, 8}) == "ab");         // also right after BOS
  CHECK(tok.decode(Ids{3, 8}) == " ab");        // only the first space goes
  CHECK(tok.decode(Ids{7, 10}) == "abc");
  CHECK(tok.decode(Ids{3, 11, 12}) == "\xc3\xa9");
  CHECK(tok.decode(Ids{8}, DecodeOptions{.strip_leading_space = false}) == " ab");
  CHECK(tok.decode(Ids{1, 8, 2}, DecodeOptions{.render_special = true}) == "<s>ab</s>");
  CHECK(tok.token_to_piece(11) == "\xc3");
}

TEST_CASE("spm adds BOS on request and a space prefix after each special token") {
  const auto tok = small_tokenizer();
  CHECK(tok.encode("ab", true, false) == Ids{1, 8});
  CHECK(tok.encode("", true, false) == Ids{1});
  CHECK(tok.encode("", false, false).empty());
  CHECK(tok.encode("a</s>ab", false, true) == Ids{7, 2, 8});
  const auto literal = tok.encode("a</s>ab", false, false);
  CHECK(std::count(literal.begin(), literal.end(), 2) == 0);
}

TEST_CASE("user-defined tokens are matched even without parse_special") {
  auto pieces = small_vocab();
  pieces.push_back({"<tool>", 0, TokenType::user_defined});
  const auto tok = Tokenizer::from_data(spm_data(pieces)).value();
  CHECK(tok.encode("ab<tool>ab", false, false) == Ids{8, 18, 8});
  CHECK(tok.decode(Ids{8, 18}) == "ab<tool>");
}

TEST_CASE("longer special tokens win over shorter ones that overlap them") {
  auto pieces = small_vocab();
  pieces.push_back({"<|a|>", 0, TokenType::control});
  pieces.push_back({"<|a|><|b|>", 0, TokenType::control});
  const auto tok = Tokenizer::from_data(spm_data(pieces)).value();
  CHECK(tok.encode("<|a|><|b|><|a|>", false, true) == Ids{19, 18});
}

TEST_CASE("a malformed vocabulary is an error, not a crash") {
  TokenizerData empty;
  CHECK_FALSE(Tokenizer::from_data(empty).has_value());

  auto short_scores = spm_data(small_vocab());
  short_scores.scores.pop_back();
  CHECK_THAT(Tokenizer::from_data(short_scores).error().message, Catch::Contains("scores"));

  auto bad_bos = spm_data(small_vocab());
  bad_bos.bos_id = 100;
  CHECK_THAT(Tokenizer::from_data(bad_bos).error().message, Catch::Contains("bos"));

  auto duplicate = spm_data(small_vocab());
  duplicate.tokens[5] = duplicate.tokens[4];  // "a" twice
  CHECK_THAT(Tokenizer::from_data(duplicate).error().message, Catch::Contains("duplicate"));
}

TEST_CASE("ids outside the vocabulary decode to nothing") {
  const auto tok = small_tokenizer();
  CHECK_FALSE(tok.contains(-1));
  CHECK_FALSE(tok.contains(18));
  CHECK(tok.decode(Ids{8, -5, 1000}) == "ab");
}
