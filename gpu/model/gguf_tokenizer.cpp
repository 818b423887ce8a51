#include "gpu/model/gguf_tokenizer.hpp"

#include "gpu/text/pre_tokenizer.hpp"

#include <array>
#include <string_view>

namespace pensieve::model {

namespace {

Error tok_error(const GgufFile& file, const std::string& what) {
  return fail(file.label + ": GGUF tokenizer: " + what);
}

// Special ids: present keys must be integers inside the vocabulary.
Result<void> read_id(const GgufFile& file, std::string_view key, std::int32_t& id) {
  auto v = file.get_int(key);
  if (!v) return v.error();
  if (!*v) return {};
  const std::int64_t n = **v;
  // llama.cpp writes -1 (as u32 0xffffffff in some files) for "none".
  if (n == -1 || n == 0xffffffffLL) {
    id = -1;
    return {};
  }
  if (n < 0 || n >= INT32_MAX) return tok_error(file, std::string(key) + " = " + std::to_string(n) + " is out of range");
  id = std::int32_t(n);
  return {};
}

Result<void> read_flag(const GgufFile& file, std::string_view key, bool& flag) {
  auto v = file.get_bool(key);
  if (!v) return v.error();
  if (*v) flag = **v;
  return {};
}

Result<void> read_token_arrays(const GgufFile& file, TokenizerData& tok) {
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return tok_error(file, "tokenizer.ggml.tokens is missing");
  if (tokens->type != GgufType::array || tokens->elem_type != GgufType::string) {
    return tok_error(file, "tokenizer.ggml.tokens is not an array of strings");
  }
  if (tokens->strings.empty() || tokens->strings.size() >= std::size_t(INT32_MAX)) {
    return tok_error(file, "tokenizer.ggml.tokens has " + std::to_string(tokens->strings.size()) + " entries");
  }
  tok.tokens = tokens->strings;
  const std::size_t n = tok.tokens.size();
  if (const GgufValue* scores = file.find("tokenizer.ggml.scores")) {
    auto values = scores->as_floats();
    if (!values || values->size() != n) {
      return tok_error(file, "tokenizer.ggml.scores must be " + std::to_string(n) + " numbers");
    }
    tok.scores = std::move(*values);
  }
  if (const GgufValue* types = file.find("tokenizer.ggml.token_type")) {
    auto values = types->as_ints();
    if (!values || values->size() != n) {
      return tok_error(file, "tokenizer.ggml.token_type must be " + std::to_string(n) + " integers");
    }
    tok.token_types.reserve(n);
    for (auto t : *values) {
      if (t < 0 || t > 6) return tok_error(file, "unknown token type " + std::to_string(t));
      tok.token_types.push_back(TokenType(std::int32_t(t)));
    }
  }
  if (const GgufValue* merges = file.find("tokenizer.ggml.merges")) {
    if (merges->type != GgufType::array || merges->elem_type != GgufType::string) {
      return tok_error(file, "tokenizer.ggml.merges is not an array of strings");
    }
    tok.merges = merges->strings;
  }
  return {};
}

}  // namespace

std::int32_t find_end_of_turn_token(const TokenizerData& tok) {
  constexpr std::array<std::string_view, 4> names = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>"};
  for (auto name : names) {
    for (std::size_t i = 0; i < tok.tokens.size(); ++i) {
      if (tok.tokens[i] == name) return std::int32_t(i);
    }
  }
  return -1;
}

namespace {

Result<void> read_specials(const GgufFile& file, TokenizerData& tok) {
  const std::pair<std::string_view, std::int32_t*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &tok.bos_id},     {"tokenizer.ggml.eos_token_id", &tok.eos_id},
      {"tokenizer.ggml.unknown_token_id", &tok.unk_id}, {"tokenizer.ggml.padding_token_id", &tok.pad_id},
      {"tokenizer.ggml.eot_token_id", &tok.eot_id},
  };
  for (auto [key, id] : ids) {
    if (auto ok = read_id(file, key, *id); !ok) return ok.error();
    if (*id >= std::int32_t(tok.tokens.size())) {
      return tok_error(file, std::string(key) + " = " + std::to_string(*id) + " is past the vocabulary (" +
                                 std::to_string(tok.tokens.size()) + " tokens)");
    }
  }
  if (file.find("tokenizer.ggml.eot_token_id") == nullptr) tok.eot_id = find_end_of_turn_token(tok);
  if (auto ok = read_flag(file, "tokenizer.ggml.add_bos_token", tok.add_bos); !ok) return ok.error();
  if (auto ok = read_flag(file, "tokenizer.ggml.add_eos_token", tok.add_eos); !ok) return ok.error();
  if (auto ok = read_flag(file, "tokenizer.ggml.add_space_prefix", tok.add_space_prefix); !ok) return ok.error();
  return {};
}

}  // namespace

bool gguf_has_tokenizer(const GgufFile& file) {
  return file.find("tokenizer.ggml.model") != nullptr && file.find("tokenizer.ggml.tokens") != nullptr;
}

Result<TokenizerData> tokenizer_from_gguf(const GgufFile& file) {
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model) return model.error();
  if (!*model) return tok_error(file, "tokenizer.ggml.model is missing (the file has no vocabulary)");
  TokenizerData tok;
  if (**model == "llama") {
    // llama.cpp's SentencePiece defaults.
    tok.kind = TokenizerKind::sentencepiece;
    tok.bos_id = 1;
    tok.eos_id = 2;
    tok.unk_id = 0;
    tok.add_bos = true;
    tok.add_space_prefix = true;
  } else if (**model == "gpt2") {
    tok.kind = TokenizerKind::byte_bpe;
    tok.add_bos = false;
    tok.add_space_prefix = false;
  } else {
    return tok_error(file, "tokenizer model '" + **model + "' is not supported (llama and gpt2 are)");
  }
  if (auto ok = read_token_arrays(file, tok); !ok) return ok.error();
  if (tok.kind == TokenizerKind::byte_bpe && tok.merges.empty()) {
    return tok_error(file, "a gpt2 (byte-level BPE) vocabulary needs tokenizer.ggml.merges");
  }
  if (tok.kind == TokenizerKind::byte_bpe) {
    // gpt2's defaults name <|endoftext|> (id 11 in llama.cpp's table is model specific):
    // leave bos/eos unset unless the file says.
    tok.bos_id = -1;
    tok.eos_id = -1;
  }
  if (auto ok = read_specials(file, tok); !ok) return ok.error();
  auto pre = file.get_string("tokenizer.ggml.pre");
  if (!pre) return pre.error();
  // llama.cpp reads a byte-level file without the key as its "default".
  tok.pre = pre->value_or(tok.kind == TokenizerKind::byte_bpe ? "default" : "");
  if (tok.kind == TokenizerKind::byte_bpe) {
    if (auto kind = pre_tokenizer_from_name(tok.pre); !kind) {
      return tok_error(file, "tokenizer.ggml.pre: " + kind.error().message);
    }
  }
  auto tmpl = file.get_string("tokenizer.chat_template");
  if (!tmpl) return tmpl.error();
  tok.chat_template = tmpl->value_or("");
  return tok;
}

Result<TokenizerData> read_gguf_tokenizer(const std::filesystem::path& path) {
  auto file = read_gguf(path);
  if (!file) return file.error();
  return tokenizer_from_gguf(*file);
}

}  // namespace pensieve::model
