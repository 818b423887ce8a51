// Byte-level BPE on small hand-made vocabularies: the GPT-2 byte mapping and
// merges applied by rank.
#include "gpu/text/bpe_tokenizer.hpp"
#include "gpu/text/tokenizer.hpp"

#include <catch2/catch.hpp>

#include <set>

using namespace pensieve::model;

namespace {

using Ids = std::vector<TokenId>;

// ids: 0 h, 1 e, 2 l, 3 o, 4 Ġ, 5 w, 6 r, 7 d, 8 he, 9 ll, 10 hell, 11 hello, 12 Ġw, 13 el,
// 14 <|endoftext|> (control)
TokenizerData bpe_data(std::vector<std::string> merges) {
  TokenizerData d;
  d.kind = TokenizerKind::byte_bpe;
  d.tokens = {"h", "e", "l", "o", "\xc4\xa0", "w", "r", "d", "he", "ll", "hell", "hello", "\xc4\xa0w", "el",
              "<|endoftext|>"};
  d.token_types.assign(d.tokens.size(), TokenType::normal);
  d.token_types.back() = TokenType::control;
  d.merges = std::move(merges);
  d.pre = "gpt2";
  d.bos_id = 14;
  d.eos_id = 14;
  d.add_space_prefix = false;
  return d;
}

Tokenizer tokenizer(std::vector<std::string> merges) {
  return Tokenizer::from_data(bpe_data(std::move(merges))).value();
}

}  // namespace

TEST_CASE("the GPT-2 byte mapping is a bijection onto printable code points") {
  std::set<std::uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const std::uint32_t cpt = byte_to_unicode(static_cast<std::uint8_t>(b));
    CHECK(unicode_to_byte(cpt) == static_cast<std::uint8_t>(b));
    seen.insert(cpt);
  }
  CHECK(seen.size() == 256);
  CHECK(byte_to_unicode(' ') == 0x120);  // Ġ
  CHECK(byte_to_unicode('\n') == 0x10A);  // Ċ
  CHECK(byte_to_unicode('A') == 'A');
  CHECK(bytes_to_bpe_piece("a b") == "a\xc4\xa0"
                                     "b");
  const std::string raw("\xff\x00 x", 4);
  CHECK(bpe_piece_to_bytes(bytes_to_bpe_piece(raw)) == raw);
}

TEST_CASE("bpe merges pairs in rank order, lowest rank first") {
  const auto tok = tokenizer({"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"});
  CHECK(tok.encode("hello", false, false) == Ids{11});
  CHECK(tok.encode("hello world", false, false) == Ids{11, 12, 3, 6, 2, 7});
  // With "e l" ranked first, "ell" forms "el" + "l" and "hell" can never form.
  const auto other = tokenizer({"e l", "h e", "l l", "he ll", "hell o"});
  CHECK(other.encode("hello", false, false) == Ids{0, 13, 2, 3});
}

TEST_CASE("bpe decodes byte-level pieces back to the original bytes") {
  const auto tok = tokenizer({"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"});
  CHECK(tok.decode(Ids{11, 12, 3, 6, 2, 7}) == "hello world");
  CHECK(tok.token_to_piece(4) == " ");
  CHECK(tok.decode(Ids{14, 11}) == "hello");
  CHECK(tok.decode(Ids{14, 11}, DecodeOptions{.render_special = true}) == "<|endoftext|>hello");
}

TEST_CASE("bpe matches control tokens in the text only with parse_special") {
  const auto tok = tokenizer({"h e", "l l", "he ll", "hell o"});
  CHECK(tok.encode("hello<|endoftext|>", false, true) == Ids{11, 14});
  CHECK(tok.encode("hello", true, false) == Ids{14, 11});
}

TEST_CASE("bpe characters without any piece are dropped as llama.cpp drops them") {
  const auto tok = tokenizer({"h e"});
  CHECK(tok.encode("hez", false, false) == Ids{8});
}

TEST_CASE("a byte-level vocabulary needs merges and a known pre-tokenizer") {
  CHECK_THAT(Tokenizer::from_data(bpe_data({})).error().message, Catch::Contains("merges"));
  auto bad_merge = bpe_data({"he"});
  CHECK_THAT(Tokenizer::from_data(bad_merge).error().message, Catch::Contains("merge 0"));
  auto unknown_pre = bpe_data({"h e"});
  unknown_pre.pre = "martian";
  CHECK_THAT(Tokenizer::from_data(unknown_pre).error().message, Catch::Contains("martian"));
}
