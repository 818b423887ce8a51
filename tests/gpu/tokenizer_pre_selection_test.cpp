// Choosing the pre-tokenizer from a model file: a GGUF's tokenizer.ggml.pre
// name and a tokenizer.json's pre_tokenizer steps (Split regexes, Sequence,
// ByteLevel, Digits, Metaspace). What is not known is an error that names it,
// never GPT-2's splitter in its place.
#include "gpu/formats/gguf_writer.hpp"
#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/model/tokenizer_json.hpp"
#include "gpu/model/tokenizer_json_export.hpp"
#include "gpu/text/pre_tokenizer.hpp"
#include "gpu/text/tokenizer.hpp"
#include "tests/result_checks.hpp"
#include "tests/temp_dir.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace pensieve::model;
namespace json = boost::json;

namespace {

json::object split_step(std::string_view regex, std::string_view behavior = "Isolated") {
  return json::object{{"type", "Split"},
                      {"pattern", json::object{{"Regex", regex}}},
                      {"behavior", behavior},
                      {"invert", false}};
}

json::object byte_level(bool use_regex) {
  return json::object{{"type", "ByteLevel"},
                      {"add_prefix_space", false},
                      {"trim_offsets", true},
                      {"use_regex", use_regex}};
}

json::object digits() {
  return json::object{{"type", "Digits"}, {"individual_digits", true}};
}

json::value sequence(json::array steps) {
  return json::object{{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

// A byte-level BPE tokenizer.json ("h", "i", "hi") with the given pre_tokenizer.
std::string byte_level_json(const json::value& pre) {
  json::object model{{"type", "BPE"},
                     {"vocab", json::object{{"h", 0}, {"i", 1}, {"hi", 2}}},
                     {"merges", json::array{"h i"}}};
  return json::serialize(json::object{{"model", std::move(model)},
                                      {"pre_tokenizer", pre},
                                      {"decoder", json::object{{"type", "ByteLevel"}}}});
}

// A byte-fallback (SentencePiece-style) tokenizer.json.
std::string spm_json(const json::value& pre, const json::value& normalizer) {
  json::object model{{"type", "BPE"},
                     {"byte_fallback", true},
                     {"vocab", json::object{{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"a", 3}}},
                     {"merges", json::array{}}};
  return json::serialize(json::object{
      {"model", std::move(model)}, {"pre_tokenizer", pre}, {"normalizer", normalizer}});
}

std::string pre_of(const json::value& pre) {
  auto tok = parse_tokenizer_json(byte_level_json(pre), "", "t.json");
  REQUIRE_OK(tok);
  return tok->pre;
}

std::string error_of(const json::value& pre) {
  auto tok = parse_tokenizer_json(byte_level_json(pre), "", "t.json");
  REQUIRE_FALSE(tok.has_value());
  return tok.error().message;
}

// As the families' tokenizer.json files write them (JSON-decoded).
const std::string llama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string qwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string tekken =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const std::string deepseek_v3_words =
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const std::string cjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

}  // namespace

TEST_CASE("tokenizer.json's pre_tokenizer steps select the family's splitter", "[safetensors]") {
  CHECK(pre_of(byte_level(true)) == "gpt-2");
  CHECK(pre_of(sequence({split_step(llama3), byte_level(false)})) == "llama-bpe");
  CHECK(pre_of(sequence({split_step(qwen2), byte_level(false)})) == "qwen2");
  CHECK(pre_of(sequence({digits(), byte_level(true)})) == "starcoder");
  CHECK(pre_of(sequence({split_step(tekken), byte_level(false)})) == "tekken");
  CHECK(pre_of(sequence({split_step("[\r\n]"), split_step("\\s?\\p{L}+"), split_step("\\s?\\p{P}+"),
                         split_step(cjk), digits(), byte_level(false)})) == "deepseek-coder");
  CHECK(pre_of(sequence({split_step("\\p{N}{1,3}"),
                         split_step("[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"),
                         split_step(deepseek_v3_words), byte_level(false)})) == "deepseek-v3");
  json::array deepseek_llm;
  for (std::string_view regex : pre_tokenizer_regexes(PreTokenizer::deepseek_llm)) {
    deepseek_llm.push_back(split_step(regex == "[\\r\\n]" ? "[\r\n]" : regex));
  }
  deepseek_llm.push_back(byte_level(false));
  CHECK(pre_of(sequence(std::move(deepseek_llm))) == "deepseek-llm");
}

TEST_CASE("a tokenizer.json pre_tokenizer that Pensieve does not know is an error that names it",
          "[safetensors]") {
  const std::string unknown_regex =
      error_of(sequence({split_step("\\p{N}{1,5}"), byte_level(false)}));
  CHECK_THAT(unknown_regex, Catch::Contains("t.json") &&
                                Catch::Contains("unknown BPE pre-tokenizer") &&
                                Catch::Contains("'\\p{N}{1,5}'"));
  // GPT-2's regex after Llama 3's is a pre-tokenizer of its own, not Llama 3's.
  CHECK_THAT(error_of(sequence({split_step(llama3), byte_level(true)})),
             Catch::Contains("unknown BPE pre-tokenizer"));
  CHECK_THAT(error_of(json::object{{"type", "Whitespace"}}), Catch::Contains("'Whitespace'"));
  CHECK_THAT(error_of(sequence({split_step(llama3, "Removed"), byte_level(false)})),
             Catch::Contains("\"Removed\""));
  CHECK_THAT(error_of(nullptr), Catch::Contains("without a pre_tokenizer"));
  json::object prefixed = byte_level(true);
  prefixed["add_prefix_space"] = true;
  CHECK_THAT(error_of(prefixed), Catch::Contains("add_prefix_space"));
}

TEST_CASE("a byte-fallback tokenizer.json accepts only pre_tokenizers that do not split",
          "[safetensors]") {
  const json::value replace = json::object{
      {"type", "Replace"}, {"pattern", json::object{{"String", " "}}}, {"content", "\xe2\x96\x81"}};
  // Llama 2 / TinyLlama converted with legacy=false: Metaspace, prepend "first", no split.
  auto metaspace = parse_tokenizer_json(spm_json(json::object{{"type", "Metaspace"},
                                                              {"replacement", "\xe2\x96\x81"},
                                                              {"prepend_scheme", "first"},
                                                              {"split", false}},
                                                 nullptr),
                                        "", "m");
  REQUIRE_OK(metaspace);
  CHECK(metaspace->kind == TokenizerKind::sentencepiece);
  CHECK(metaspace->add_space_prefix);
  auto never = parse_tokenizer_json(
      spm_json(json::object{{"type", "Metaspace"}, {"prepend_scheme", "never"}, {"split", false}},
               nullptr),
      "", "n");
  REQUIRE_OK(never);
  CHECK_FALSE(bool(never->add_space_prefix));
  // Gemma: spaces become "▁" in the normalizer, so its split at " " splits nothing, and no prefix
  // is added.
  auto gemma =
      parse_tokenizer_json(spm_json(json::object{{"type", "Split"},
                                                 {"pattern", json::object{{"String", " "}}},
                                                 {"behavior", "MergedWithPrevious"},
                                                 {"invert", false}},
                                    replace),
                           "", "g");
  REQUIRE_OK(gemma);
  CHECK_FALSE(bool(gemma->add_space_prefix));
  // Phi-3 / Llama 2 (legacy): Prepend + Replace normalizers, no pre_tokenizer.
  const json::value prepend = json::object{
      {"type", "Sequence"},
      {"normalizers",
       json::array{json::object{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}}, replace}}};
  auto phi3 = parse_tokenizer_json(spm_json(nullptr, prepend), "", "p");
  REQUIRE_OK(phi3);
  CHECK(phi3->add_space_prefix);
  CHECK_FALSE(bool(metaspace->split_at_space_mark));
  auto digits_spm = parse_tokenizer_json(spm_json(digits(), nullptr), "", "d");
  REQUIRE_FALSE(digits_spm.has_value());
  CHECK_THAT(digits_spm.error().message, Catch::Contains("Digits"));
}

TEST_CASE("a Metaspace that splits starts a word at each space mark, as Hugging Face's does", "[safetensors]") {
  // "  b" is "▁▁b": merged whole, the best pair "▁ ▁" goes first; split, the words are "▁" and "▁b".
  auto with_split = [](const json::value& split) {
    json::object pre{{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}, {"prepend_scheme", "never"}};
    if (!split.is_null()) pre["split"] = split;
    json::object model{{"type", "BPE"},
                       {"byte_fallback", true},
                       {"vocab", json::object{{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"\xe2\x96\x81", 3},
                                              {"\xe2\x96\x81\xe2\x96\x81", 4}, {"b", 5}, {"\xe2\x96\x81" "b", 6}}},
                       {"merges", json::array{"\xe2\x96\x81 \xe2\x96\x81", "\xe2\x96\x81 b"}}};
    auto data = parse_tokenizer_json(json::serialize(json::object{{"model", model}, {"pre_tokenizer", pre}}), "", "m");
    REQUIRE_OK(data);
    CHECK_FALSE(bool(data->add_space_prefix));
    auto tokenizer = Tokenizer::from_data(*data);
    REQUIRE_OK(tokenizer);
    return tokenizer->encode("  b", false, false);
  };
  CHECK(with_split(true) == std::vector<TokenId>{3, 6});
  CHECK(with_split(nullptr) == std::vector<TokenId>{3, 6});  // files older than the field always split
  CHECK(with_split(false) == std::vector<TokenId>{4, 5});
}

TEST_CASE("the tokenizer.json export writes each family's steps and reads back as the same family",
          "[safetensors]") {
  TokenizerData d;
  d.kind = TokenizerKind::byte_bpe;
  d.tokens = {"h", "i", "hi"};
  d.token_types.assign(3, TokenType::normal);
  d.merges = {"h i"};
  d.add_space_prefix = false;
  for (const char* pre : {"gpt-2", "llama-bpe", "qwen2", "starcoder", "deepseek-llm",
                          "deepseek-coder", "deepseek-v3", "tekken", "default", "falcon"}) {
    INFO(pre);
    d.pre = pre;
    auto text = tokenizer_json_text(d);
    REQUIRE_OK(text);
    auto back = parse_tokenizer_json(*text, "", "export");
    REQUIRE_OK(back);
    CHECK(back->pre == pre);
  }
  d.pre = "martian";
  auto unknown = tokenizer_json_text(d);
  REQUIRE_FALSE(unknown.has_value());
  CHECK_THAT(unknown.error().message, Catch::Contains("'martian'"));
}

namespace {

pensieve::Result<TokenizerData> gguf_vocab_with_pre(const pensieve::testing::TempDir& dir,
                                                    const char* pre) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.model", GgufValue::of_string("gpt2"));
  if (pre != nullptr) w.set("tokenizer.ggml.pre", GgufValue::of_string(pre));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"h", "i", "hi", "1", "11"}));
  w.set("tokenizer.ggml.merges", GgufValue::of_strings({"h i", "1 1"}));
  const auto path = dir / (std::string(pre ? pre : "none") + ".gguf");
  if (auto ok = w.write(path); !ok) return ok.error();
  return read_gguf_tokenizer(path);
}

}  // namespace

TEST_CASE(
    "a GGUF's tokenizer.ggml.pre selects the splitter, and an unknown one is an error naming it",
    "[gguf]") {
  const pensieve::testing::TempDir dir("gguf-pre");
  for (const char* pre : {"llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                          "tekken", "smollm"}) {
    INFO(pre);
    auto data = gguf_vocab_with_pre(dir, pre);
    REQUIRE_OK(data);
    CHECK(data->pre == pre);
    auto tokenizer = Tokenizer::from_data(*data);
    REQUIRE_OK(tokenizer);
    CHECK(tokenizer->encode("hi", false, false) == std::vector<TokenId>{2});
  }
  // Qwen2 splits "11" into two words, Llama 3 keeps it one word that merges.
  auto qwen = Tokenizer::from_data(gguf_vocab_with_pre(dir, "qwen2").value()).value();
  CHECK(qwen.encode("11", false, false) == std::vector<TokenId>{3, 3});
  auto llama3 = Tokenizer::from_data(gguf_vocab_with_pre(dir, "llama-bpe").value()).value();
  CHECK(llama3.encode("11", false, false) == std::vector<TokenId>{4});
  auto missing = gguf_vocab_with_pre(dir, nullptr);
  REQUIRE_OK(missing);
  CHECK(missing->pre == "default");
  auto unknown = gguf_vocab_with_pre(dir, "martian");
  REQUIRE_FALSE(unknown.has_value());
  CHECK_THAT(unknown.error().message,
             Catch::Contains("tokenizer.ggml.pre") && Catch::Contains("'martian'"));
}

TEST_CASE("a Gemma-style SentencePiece GGUF without the space prefix splits no words and adds no prefix", "[gguf]") {
  const pensieve::testing::TempDir dir("gguf-gemma");
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("gemma2"));
  w.set("tokenizer.ggml.model", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.pre", GgufValue::of_string("default"));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings({"<unk>", "<s>", "</s>", "a", "\xe2\x96\x81" "b", "ab"}));
  w.set("tokenizer.ggml.scores", GgufValue::of_f32_array({0, 0, 0, -3, -1, -2}));
  w.set("tokenizer.ggml.add_space_prefix", GgufValue::of_bool(false));
  REQUIRE_OK(w.write(dir / "gemma.gguf"));
  auto data = read_gguf_tokenizer(dir / "gemma.gguf");
  REQUIRE_OK(data);
  CHECK(data->kind == TokenizerKind::sentencepiece);
  CHECK_FALSE(bool(data->add_space_prefix));
  auto tokenizer = Tokenizer::from_data(*data);
  REQUIRE_OK(tokenizer);
  CHECK(tokenizer->encode("a b", false, false) == std::vector<TokenId>{3, 4});
}
