#include "gpu/model/builtin_vocab.hpp"

#include "gpu/formats/gguf_writer.hpp"

#include <cstdio>

namespace pensieve::model {

namespace {

constexpr const char* chatml_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

void add(TokenizerData& d, std::string piece, TokenType type, float score) {
  d.tokens.push_back(std::move(piece));
  d.token_types.push_back(type);
  d.scores.push_back(score);
}

}  // namespace

TokenizerData builtin_vocab() {
  TokenizerData d;
  d.kind = TokenizerKind::sentencepiece;
  d.pre = "default";
  add(d, "<unk>", TokenType::unknown, 0.0f);
  add(d, "<s>", TokenType::control, 0.0f);
  add(d, "</s>", TokenType::control, 0.0f);
  add(d, "<|im_start|>", TokenType::control, 0.0f);
  add(d, "<|im_end|>", TokenType::control, 0.0f);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(d, name, TokenType::byte, 0.0f);
  }
  // Whole-character pieces score above byte fallback; "▁x" (a word start)
  // scores above "x" so spaces merge into the following character.
  const std::string space = "\xe2\x96\x81";
  add(d, space, TokenType::normal, -1.0f);
  for (char c = 33; c < 127; ++c) {
    add(d, std::string(1, c), TokenType::normal, -2.0f);
    add(d, space + c, TokenType::normal, -1.5f);
  }
  d.unk_id = 0;
  d.bos_id = 1;
  d.eos_id = 2;
  d.eot_id = 4;
  d.add_bos = true;
  d.add_space_prefix = true;
  d.chat_template = chatml_template;
  return d;
}

Result<void> write_builtin_vocab_gguf(const std::filesystem::path& path) {
  const TokenizerData d = builtin_vocab();
  std::vector<std::int32_t> types;
  for (TokenType t : d.token_types) types.push_back(std::int32_t(t));
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("llama"));
  w.set("general.name", GgufValue::of_string("pensieve-builtin-vocab"));
  w.set("tokenizer.ggml.model", GgufValue::of_string("llama"));
  w.set("tokenizer.ggml.pre", GgufValue::of_string(d.pre));
  w.set("tokenizer.ggml.tokens", GgufValue::of_strings(d.tokens));
  w.set("tokenizer.ggml.scores", GgufValue::of_f32_array(d.scores));
  w.set("tokenizer.ggml.token_type", GgufValue::of_i32_array(types));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::of_u32(std::uint32_t(d.bos_id)));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::of_u32(std::uint32_t(d.eos_id)));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::of_u32(std::uint32_t(d.unk_id)));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::of_bool(d.add_bos));
  w.set("tokenizer.ggml.add_eos_token", GgufValue::of_bool(d.add_eos));
  w.set("tokenizer.ggml.add_space_prefix", GgufValue::of_bool(d.add_space_prefix));
  w.set("tokenizer.chat_template", GgufValue::of_string(d.chat_template));
  return w.write(path);
}

}  // namespace pensieve::model
