// Pre-tokenizer regexes, matched by hand over Unicode categories.
#include "gpu/text/pre_tokenizer.hpp"
#include "gpu/text/unicode_tables.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::model;

namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre, std::string_view text) {
  return pre_tokenize(pre_tokenizer_from_name(pre).value(), text);
}

}  // namespace

TEST_CASE("the generated tables know letters and numbers beyond ASCII") {
  CHECK(unicode::is_letter('a'));
  CHECK(unicode::is_letter(0x0436));   // ж
  CHECK(unicode::is_letter(0x6211));   // 我
  CHECK_FALSE(unicode::is_letter(0x17B6));  // Khmer vowel sign: a mark, not a letter
  CHECK(unicode::is_number('7'));
  CHECK(unicode::is_number(0x0663));   // Arabic-Indic three
  CHECK(unicode::is_number(0x00BD));   // ½
  CHECK_FALSE(unicode::is_number('x'));
  CHECK(unicode::is_whitespace(0x3000));
  CHECK_FALSE(unicode::is_whitespace(0x200B));
}

TEST_CASE("gpt2 splits words with their leading space, contractions and space runs") {
  CHECK(split("gpt-2", "Hello world's  test") == Words{"Hello", " world", "'s", " ", " test"});
  CHECK(split("gpt2", "3.14!!\n") == Words{"3", ".", "14", "!!", "\n"});
  CHECK(split("gpt2", "I'M") == Words{"I", "'", "M"});
  CHECK(split("gpt2", "   ") == Words{"   "});
  CHECK(split("gpt2", "нещо на") == Words{"нещо", " на"});
}

TEST_CASE("llama3 splits numbers in threes and keeps newline runs together") {
  CHECK(split("llama-bpe", "Hello 12345 world\n\n  x") ==
        Words{"Hello", " ", "123", "45", " world", "\n\n", " ", " x"});
  CHECK(split("llama3", "I'M ok") == Words{"I", "'M", " ok"});
  CHECK(split("llama3", "a...\n\nb") == Words{"a", "...\n\n", "b"});
}

TEST_CASE("qwen2 splits numbers digit by digit") {
  CHECK(split("qwen2", "x12345") == Words{"x", "1", "2", "3", "4", "5"});
}

TEST_CASE("starcoder-style pre-tokenizers split every digit before gpt2") {
  CHECK(split("smollm", "abc 123") == Words{"abc", " ", "1", "2", "3"});
}

TEST_CASE("invalid UTF-8 reaches the words as U+FFFD") {
  CHECK(split("gpt2", "a\xff") == Words{"a", "\xef\xbf\xbd"});
}

TEST_CASE("an unknown pre-tokenizer name is an error") {
  const auto result = pre_tokenizer_from_name("martian");
  REQUIRE_FALSE(result.has_value());
  CHECK_THAT(result.error().message, Catch::Contains("martian"));
}
