// Pre-tokenizer regexes, matched by hand over Unicode categories: hand-made
// cases worked out from each family's regexes (tokenizer.json's Split steps,
// llama.cpp's lists), and the choice of a pre-tokenizer by name and by regexes.
// tests/gpu/pre_tokenizers/oracle.mjs compares the same splitters with
// JavaScript's regex engine over generated strings.
#include "gpu/text/pre_tokenizer.hpp"
#include "gpu/text/unicode_tables.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

using namespace pensieve::model;

namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre, std::string_view text) {
  return pre_tokenize(pre_tokenizer_from_name(pre).value(), text);
}

}  // namespace

TEST_CASE("the generated tables know letters and numbers beyond ASCII", "[pre_tokenizer]") {
  CHECK(unicode::is_letter('a'));
  CHECK(unicode::is_letter(0x0436));        // ж
  CHECK(unicode::is_letter(0x6211));        // 我
  CHECK_FALSE(unicode::is_letter(0x17B6));  // Khmer vowel sign: a mark, not a letter
  CHECK(unicode::is_number('7'));
  CHECK(unicode::is_number(0x0663));  // Arabic-Indic three
  CHECK(unicode::is_number(0x00BD));  // ½
  CHECK_FALSE(unicode::is_number('x'));
  CHECK(unicode::is_whitespace(0x3000));
  CHECK_FALSE(unicode::is_whitespace(0x200B));
}

TEST_CASE("the generated tables give each code point its general category", "[pre_tokenizer]") {
  using unicode::general_category;
  using unicode::GeneralCategory;
  CHECK(general_category('A') == GeneralCategory::lu);
  CHECK(general_category(0x00E9) == GeneralCategory::ll);  // é
  CHECK(general_category(0x01C5) == GeneralCategory::lt);  // ǅ
  CHECK(general_category(0x02B0) == GeneralCategory::lm);  // ʰ
  CHECK(general_category(0x30FC) == GeneralCategory::lm);  // ー
  CHECK(general_category(0x05D0) == GeneralCategory::lo);  // א
  CHECK(general_category(0x0301) == GeneralCategory::mn);
  CHECK(general_category(0x093E) == GeneralCategory::mc);  // Devanagari vowel sign aa
  CHECK(general_category(0x20DD) == GeneralCategory::me);
  CHECK(general_category(0x2163) == GeneralCategory::nl);  // Ⅳ
  CHECK(general_category('!') == GeneralCategory::po);
  CHECK(general_category('$') == GeneralCategory::sc);
  CHECK(general_category('+') == GeneralCategory::sm);
  CHECK(general_category('^') == GeneralCategory::sk);
  CHECK(general_category(0x1F600) == GeneralCategory::so);  // 😀
  CHECK(general_category(0x200D) == GeneralCategory::cf);   // zero width joiner
  CHECK(general_category(0xE000) == GeneralCategory::co);
  CHECK(general_category(0x0378) == GeneralCategory::cn);  // unassigned
  CHECK(general_category(0x10FFFF) == GeneralCategory::cn);
}

TEST_CASE("each class's generated table is sorted, holds only its class, and no code point is in two",
          "[pre_tokenizer]") {
  using unicode::GeneralCategory;
  using unicode::CategoryRange;
  using Check = bool (*)(GeneralCategory);
  const std::pair<std::span<const CategoryRange>, Check> tables[] = {
      {unicode::letter_ranges(), [](GeneralCategory c) { return unicode::is_letter(c); }},
      {unicode::mark_ranges(), [](GeneralCategory c) { return unicode::is_mark(c); }},
      {unicode::number_ranges(), [](GeneralCategory c) { return unicode::is_number(c); }},
      {unicode::punctuation_ranges(), [](GeneralCategory c) { return unicode::is_punctuation(c); }},
      {unicode::symbol_ranges(), [](GeneralCategory c) { return unicode::is_symbol(c); }},
      {unicode::separator_ranges(),
       [](GeneralCategory c) { return c >= GeneralCategory::zs && c <= GeneralCategory::zp; }},
      {unicode::other_ranges(), [](GeneralCategory c) { return c >= GeneralCategory::cc && c < GeneralCategory::cn; }},
  };
  std::vector<CategoryRange> all;
  for (const auto& [table, in_class] : tables) {
    REQUIRE_FALSE(table.empty());
    for (std::size_t i = 0; i < table.size(); ++i) {
      CHECK(table[i].first <= table[i].last);
      CHECK(in_class(table[i].category));
      if (i > 0) CHECK(table[i - 1].last < table[i].first);
    }
    all.insert(all.end(), table.begin(), table.end());
  }
  // The ranges of the single table the generator wrote before (Unicode 14.0.0).
  CHECK(all.size() == 3270);
  std::sort(all.begin(), all.end(), [](const CategoryRange& a, const CategoryRange& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < all.size(); ++i) {
    INFO("range at " << all[i].first);
    CHECK(all[i - 1].last < all[i].first);
    CHECK(unicode::general_category(all[i].first) == all[i].category);
    CHECK(unicode::general_category(all[i].last) == all[i].category);
  }
  // The ASCII table says what the range tables say.
  for (std::uint32_t c = 0; c < 128; ++c) {
    const auto in = std::find_if(all.begin(), all.end(), [c](const CategoryRange& r) { return r.first <= c && c <= r.last; });
    REQUIRE(in != all.end());
    CHECK(unicode::ascii_categories()[c] == in->category);
  }
}

TEST_CASE("gpt2 splits words with their leading space, contractions and space runs",
          "[pre_tokenizer]") {
  CHECK(split("gpt-2", "Hello world's  test") == Words{"Hello", " world", "'s", " ", " test"});
  CHECK(split("gpt2", "3.14!!\n") == Words{"3", ".", "14", "!!", "\n"});
  CHECK(split("gpt2", "I'M") == Words{"I", "'", "M"});
  CHECK(split("gpt2", "   ") == Words{"   "});
  CHECK(split("gpt2", "нещо на") == Words{"нещо", " на"});
  CHECK(split("gpt2", "a\t\tb") == Words{"a", "\t", "\t", "b"});
}

TEST_CASE("llama.cpp's default isolates punctuation and symbols, then digit runs in threes",
          "[pre_tokenizer]") {
  // [\p{P}\$\+<=>\^~\|]+ first, then gpt2, then \p{N}+, then [0-9][0-9][0-9].
  CHECK(split("default", "a $b 12345!") == Words{"a", " ", "$", "b", " ", "123", "45", "!"});
  CHECK(split("", "x<=y") == Words{"x", "<=", "y"});
}

TEST_CASE("llama3 folds contractions, splits numbers in threes and keeps newline runs together",
          "[pre_tokenizer]") {
  CHECK(split("llama-bpe", "Hello 12345 world\n\n  x") ==
        Words{"Hello", " ", "123", "45", " world", "\n\n", " ", " x"});
  CHECK(split("llama3", "I'M ok") == Words{"I", "'M", " ok"});
  CHECK(split("llama3", "don't STOP'LL") == Words{"don", "'t", " STOP", "'LL"});
  CHECK(split("llama3", "a...\n\nb") == Words{"a", "...\n\n", "b"});
  CHECK(split("llama3", "a \n\n b") == Words{"a", " \n\n", " b"});
  CHECK(split("llama3", "1234567") == Words{"123", "456", "7"});
  CHECK(split("llama3", "你好世界 日本語テキスト") == Words{"你好世界", " 日本語テキスト"});
  CHECK(split("llama3", "hi \xf0\x9f\x98\x80\xf0\x9f\x98\x80!") ==
        Words{"hi", " \xf0\x9f\x98\x80\xf0\x9f\x98\x80!"});
  CHECK(split("llama3", "(x)") == Words{"(x", ")"});  // one non-letter may lead a word
}

TEST_CASE("qwen2 splits numbers digit by digit", "[pre_tokenizer]") {
  CHECK(split("qwen2", "x12345") == Words{"x", "1", "2", "3", "4", "5"});
  CHECK(split("qwen2", "abc 2024年") == Words{"abc", " ", "2", "0", "2", "4", "年"});
  CHECK(split("deepseek-r1-qwen", "We're") == Words{"We", "'re"});
}

TEST_CASE("starcoder-style pre-tokenizers split every digit before gpt2", "[pre_tokenizer]") {
  CHECK(split("smollm", "abc 123") == Words{"abc", " ", "1", "2", "3"});
  CHECK(split("starcoder", "x=12;") == Words{"x", "=", "1", "2", ";"});
}

TEST_CASE(
    "deepseek-llm splits newlines, Latin, punctuation, trailing spaces, CJK and numbers in turn",
    "[pre_tokenizer]") {
  CHECK(split("deepseek-llm", "Hello, 世界!\n  123") ==
        Words{"Hello", ",", " ", "世界", "!", "\n", "  ", "123"});
  // Each Split sees the pieces of the one before: the punctuation class
  // [!-/:-~] holds the ASCII letters, so "éHello" (one Latin piece) splits at é.
  CHECK(split("deepseek-llm", "éHello") == Words{"é", "Hello"});
  CHECK(split("deepseek-llm", "ab  ") == Words{"ab", "  "});
  CHECK(split("deepseek-llm", "한국어 ok") == Words{"한국어", " ok"});
}

TEST_CASE("deepseek-coder splits letters and punctuation with one leading space, and every digit",
          "[pre_tokenizer]") {
  CHECK(split("deepseek-coder", "def f(x):\n    return x+1") ==
        Words{"def", " f", "(", "x", "):", "\n", "   ", " return", " x", "+", "1"});
  CHECK(split("deepseek-coder", "v2.10") == Words{"v", "2", ".", "1", "0"});
}

TEST_CASE("deepseek-v3 isolates numbers in threes and CJK before its word regex",
          "[pre_tokenizer]") {
  CHECK(split("deepseek-v3", "abc12345 日本語カナ,hello") ==
        Words{"abc", "123", "45", " ", "日本語カナ", ",hello"});
  CHECK(split("deepseek-v3", "don't") == Words{"don", "'t"});
  CHECK(split("deepseek-v3", "e\xcc\x81t\xc3\xa9 !!\n\nx") ==
        Words{"e\xcc\x81t\xc3\xa9", " !!\n\n", "x"});
}

TEST_CASE("tekken splits at case changes, keeps a leading non-letter and splits every digit",
          "[pre_tokenizer]") {
  CHECK(split("tekken", "HTTPServer iPhone") == Words{"HTTPServer", " i", "Phone"});
  CHECK(split("tekken",
              "\xc3\x89"
              "COLE \xc3\xa9"
              "cole") == Words{"\xc3\x89"
                               "COLE",
                               " \xc3\xa9"
                               "cole"});
  CHECK(split("tekken", "a123") == Words{"a", "1", "2", "3"});
  CHECK(split("tekken", "path/to\n") == Words{"path", "/to", "\n"});
  CHECK(split("tekken", "x!!/\n") == Words{"x", "!!/\n"});
  CHECK(split("tekken", "e\xcc\x81") ==
        Words{"e\xcc\x81"});  // a combining mark stays with its letter
}

TEST_CASE("falcon isolates punctuation and splits ASCII digits in threes", "[pre_tokenizer]") {
  CHECK(split("falcon", "x+=1000") == Words{"x", "+=", "100", "0"});
}

TEST_CASE("invalid UTF-8 reaches the words as U+FFFD", "[pre_tokenizer]") {
  CHECK(split("gpt2", "a\xff") == Words{"a", "\xef\xbf\xbd"});
  CHECK(split("tekken", "") == Words{});
}

TEST_CASE("every GGUF pre-tokenizer name selects its family", "[pre_tokenizer]") {
  const std::pair<const char*, PreTokenizer> names[] = {
      {"gpt-2", PreTokenizer::gpt2},
      {"phi-2", PreTokenizer::gpt2},
      {"mpt", PreTokenizer::gpt2},
      {"olmo", PreTokenizer::gpt2},
      {"default", PreTokenizer::llama_default},
      {"", PreTokenizer::llama_default},
      {"llama-bpe", PreTokenizer::llama3},
      {"llama3", PreTokenizer::llama3},
      {"dbrx", PreTokenizer::llama3},
      {"chatglm-bpe", PreTokenizer::llama3},
      {"qwen2", PreTokenizer::qwen2},
      {"deepseek-r1-qwen", PreTokenizer::qwen2},
      {"stablelm2", PreTokenizer::qwen2},
      {"starcoder", PreTokenizer::starcoder},
      {"smollm", PreTokenizer::starcoder},
      {"command-r", PreTokenizer::starcoder},
      {"refact", PreTokenizer::starcoder},
      {"deepseek-llm", PreTokenizer::deepseek_llm},
      {"deepseek-coder", PreTokenizer::deepseek_coder},
      {"deepseek-v3", PreTokenizer::deepseek_v3},
      {"tekken", PreTokenizer::tekken},
      {"falcon", PreTokenizer::falcon},
  };
  for (auto [name, kind] : names) {
    INFO(name);
    auto selected = pre_tokenizer_from_name(name);
    REQUIRE(selected.has_value());
    CHECK(*selected == kind);
  }
  CHECK(pre_tokenizer_name(PreTokenizer::llama3) == "llama-bpe");
  CHECK(pre_tokenizer_name(PreTokenizer::deepseek_v3) == "deepseek-v3");
  CHECK(pre_tokenizer_ignores_merges(PreTokenizer::llama3));
  CHECK(pre_tokenizer_ignores_merges(PreTokenizer::tekken));
  CHECK_FALSE(pre_tokenizer_ignores_merges(PreTokenizer::qwen2));
}

TEST_CASE("an unknown pre-tokenizer name is an error that names it", "[pre_tokenizer]") {
  const auto result = pre_tokenizer_from_name("martian");
  REQUIRE_FALSE(result.has_value());
  CHECK_THAT(result.error().message, Catch::Contains("'martian'"));
  CHECK_THAT(result.error().message, Catch::Contains("llama-bpe"));
}

TEST_CASE("a family is found from its regexes, with CR and LF written either way",
          "[pre_tokenizer]") {
  for (PreTokenizer kind :
       {PreTokenizer::gpt2, PreTokenizer::llama_default, PreTokenizer::llama3, PreTokenizer::qwen2,
        PreTokenizer::starcoder, PreTokenizer::deepseek_llm, PreTokenizer::deepseek_coder,
        PreTokenizer::deepseek_v3, PreTokenizer::tekken, PreTokenizer::falcon}) {
    INFO(pre_tokenizer_name(kind));
    const auto listed = pre_tokenizer_regexes(kind);
    const std::vector<std::string> regexes(listed.begin(), listed.end());
    auto found = pre_tokenizer_from_regexes(regexes);
    REQUIRE(found.has_value());
    CHECK(*found == kind);
  }
  const std::vector<std::string> llama3_raw = {
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\r\n]*|"
      "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
  CHECK(pre_tokenizer_from_regexes(llama3_raw).value() == PreTokenizer::llama3);
  const std::vector<std::string> coder = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                          "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}"};
  CHECK(pre_tokenizer_from_regexes(coder).value() == PreTokenizer::deepseek_coder);
}

TEST_CASE("regexes of no known family are an error that quotes them", "[pre_tokenizer]") {
  const std::vector<std::string> regexes = {"\\p{N}{1,4}", "[a-z]+"};
  auto found = pre_tokenizer_from_regexes(regexes);
  REQUIRE_FALSE(found.has_value());
  CHECK_THAT(found.error().message, Catch::Contains("'\\p{N}{1,4}', '[a-z]+'"));
  CHECK_THAT(found.error().message, Catch::Contains("unknown BPE pre-tokenizer"));
  // The families' regexes, but in another order, are not a family either.
  const std::vector<std::string> swapped = {"\\p{N}+", "[\\p{P}\\$\\+<=>\\^~\\|]+"};
  CHECK_FALSE(pre_tokenizer_from_regexes(swapped).has_value());
}
