// tokenizer.json (+ tokenizer_config.json) -> TokenizerData for the two
// families: byte-fallback BPE (SentencePiece-style) and byte-level BPE.
#include "gpu/model/tokenizer_json.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::model;

namespace {

const char* spm_json = R"({
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": null,
  "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "a": 4, "b": 5, "ab": 6, "\u2581": 7, "\u2581ab": 8},
    "merges": ["a b", "\u2581 ab"]}
})";

const char* bpe_json = R"({
  "added_tokens": [
    {"id": 5, "content": "<|begin_of_text|>", "special": true},
    {"id": 6, "content": "<|eot_id|>", "special": true},
    {"id": 7, "content": "<tool>", "special": false}
  ],
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>"}}]},
  "model": {"type": "BPE", "vocab": {"h": 0, "i": 1, "hi": 2, "\u0120": 3, "\u0120hi": 4},
    "merges": [["h", "i"], ["\u0120", "hi"]]}
})";

}  // namespace

TEST_CASE("a byte-fallback BPE tokenizer.json becomes a sentencepiece vocabulary", "[safetensors]") {
  auto tok = parse_tokenizer_json(spm_json, R"({"add_bos_token": true, "add_eos_token": false,
      "bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": "{{ bos_token }}"})", "spm");
  REQUIRE_OK(tok);
  CHECK(tok->kind == TokenizerKind::sentencepiece);
  REQUIRE(tok->tokens.size() == 9);
  CHECK(tok->tokens[8] == "\xe2\x96\x81" "ab");
  CHECK(tok->merges == std::vector<std::string>{"a b", "\xe2\x96\x81 ab"});
  // Merge ranks become scores: the earlier merge has the higher score.
  REQUIRE(tok->scores.size() == 9);
  CHECK(tok->scores[6] == -1.0f);
  CHECK(tok->scores[8] == -2.0f);
  CHECK(tok->scores[4] == 0.0f);
  CHECK(tok->token_types[0] == TokenType::unknown);
  CHECK(tok->token_types[1] == TokenType::control);
  CHECK(tok->token_types[3] == TokenType::byte);
  CHECK(tok->token_types[4] == TokenType::normal);
  CHECK(tok->bos_id == 1);
  CHECK(tok->eos_id == 2);
  CHECK(tok->unk_id == 0);
  CHECK(tok->add_bos);
  CHECK(tok->add_space_prefix);
  CHECK(tok->chat_template == "{{ bos_token }}");
}

TEST_CASE("a byte-level BPE tokenizer.json keeps merges of both forms and its added tokens", "[safetensors]") {
  auto tok = parse_tokenizer_json(bpe_json, "", "bpe");
  REQUIRE_OK(tok);
  CHECK(tok->kind == TokenizerKind::byte_bpe);
  REQUIRE(tok->tokens.size() == 8);
  CHECK(tok->merges == std::vector<std::string>{"h i", "\xc4\xa0 hi"});
  CHECK(tok->token_types[5] == TokenType::control);
  CHECK(tok->token_types[7] == TokenType::user_defined);
  CHECK(tok->token_types[2] == TokenType::normal);
  CHECK(tok->pre == "llama-bpe");
  CHECK(tok->bos_id == 5);
  CHECK(tok->add_bos);
  CHECK(tok->eot_id == 6);
  CHECK_FALSE(bool(tok->add_space_prefix));
  CHECK(tok->scores.empty());
}

TEST_CASE("a chat template list picks the default entry", "[safetensors]") {
  auto tok = parse_tokenizer_json(bpe_json, R"({"chat_template": [{"name": "tool_use", "template": "T"},
      {"name": "default", "template": "D"}], "eos_token": "<|eot_id|>"})", "bpe");
  REQUIRE_OK(tok);
  CHECK(tok->chat_template == "D");
  CHECK(tok->eos_id == 6);
}

TEST_CASE("unsupported or malformed tokenizer.json files are errors", "[safetensors]") {
  auto unigram = parse_tokenizer_json(R"({"model": {"type": "Unigram", "vocab": []}})", "", "t.json");
  REQUIRE_FALSE(bool(unigram));
  CHECK_THAT(unigram.error().message, Catch::Contains("model type 'Unigram' is not supported"));
  CHECK_FALSE(bool(parse_tokenizer_json("{", "", "t.json")));
  CHECK_FALSE(bool(parse_tokenizer_json(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": -1}}})", "", "t")));
  CHECK_FALSE(bool(parse_tokenizer_json(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0},
      "merges": [3]}})", "", "t")));
  CHECK_FALSE(bool(parse_tokenizer_json(spm_json, "[", "t")));
  auto sparse = parse_tokenizer_json(R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 100000}}})", "", "t");
  REQUIRE_FALSE(sparse.has_value());
  CHECK_THAT(sparse.error().message, Catch::Contains("far past the vocabulary size"));
}
