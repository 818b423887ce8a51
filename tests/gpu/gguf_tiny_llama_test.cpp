// The shared tiny Llama GGUF and the two vocabulary GGUFs, read exactly as
// their READMEs describe them.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/gguf_tokenizer.hpp"
#include "tests/shared_data.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::model;
using pensieve::testing::shared_file;

TEST_CASE("the tiny llama GGUF has the index its README gives", "[gguf]") {
  auto file = read_gguf(shared_file("models/tiny-llama-f16.gguf"));
  REQUIRE_OK(file);
  CHECK(file->version == 3);
  CHECK(file->alignment == 32);
  REQUIRE(file->tensors.size() == 20);
  const GgufTensorInfo* embd = file->find_tensor("token_embd.weight");
  REQUIRE(embd != nullptr);
  CHECK(embd->dtype == DType::f16);
  CHECK(embd->ne == std::vector<std::int64_t>{64, 32000});
  CHECK(embd->shape() == std::vector<std::int64_t>{32000, 64});
  CHECK(embd->size_bytes == 32000u * 64u * 2u);
  CHECK(file->find_tensor("output.weight") == nullptr);
  int f32 = 0, f16 = 0;
  for (const auto& t : file->tensors) {
    if (t.dtype == DType::f32) ++f32;
    if (t.dtype == DType::f16) ++f16;
  }
  CHECK(f32 == 5);
  CHECK(f16 == 15);
  // The last tensor ends inside the file, on the README's byte count.
  const auto& last = file->tensors.back();
  CHECK(file->data_offset + last.offset + last.size_bytes <= 5003808u);
}

TEST_CASE("the tiny llama GGUF loads with the config its README gives", "[gguf]") {
  auto w = load_gguf(shared_file("models/tiny-llama-f16.gguf"));
  REQUIRE_OK(w);
  const ModelConfig& c = w->config;
  CHECK(c.architecture == "llama");
  CHECK(c.n_layers == 2);
  CHECK(c.dim == 64);
  CHECK(c.n_heads == 4);
  CHECK(c.n_kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.ff_dim == 172);
  CHECK(c.vocab_size == 32000);
  CHECK(c.max_context == 2048);
  CHECK(c.rope_theta == 10000.0f);
  CHECK(c.rope_dims == 16);
  CHECK(c.rms_eps == 1e-5f);
  CHECK(c.rope_style == RopeStyle::interleaved);
  CHECK(c.rope_scaling.type == RopeScalingType::none);
  CHECK(c.tied_output);
  CHECK_FALSE(bool(c.qkv_bias));
  CHECK(w->output.data == w->token_embedding.data);
  CHECK(w->output.shape == std::vector<std::int64_t>{32000, 64});
  REQUIRE(w->layers.size() == 2);
  CHECK(w->layers[1].wk.shape == std::vector<std::int64_t>{32, 64});
  CHECK(w->layers[1].w_down.shape == std::vector<std::int64_t>{64, 172});
  CHECK(w->layers[0].attn_norm.dtype == DType::f32);
  CHECK_FALSE(bool(w->layers[0].bq.present()));
  CHECK_FALSE(bool(w->rope_freqs.present()));
  REQUIRE(w->tokenizer.has_value());
  CHECK(w->tokenizer->kind == TokenizerKind::sentencepiece);
  CHECK(w->tokenizer->tokens.size() == 32000);
  CHECK(w->tokenizer->bos_id == 1);
  CHECK(w->tokenizer->eos_id == 2);
  CHECK(w->tokenizer->unk_id == 0);
  CHECK(w->tokenizer->add_bos);
  CHECK(w->tokenizer->chat_template.empty());
}

TEST_CASE("the llama sentencepiece vocabulary is read with scores and byte tokens", "[gguf]") {
  auto tok = read_gguf_tokenizer(shared_file("vocab/ggml-vocab-llama-spm.gguf"));
  REQUIRE_OK(tok);
  CHECK(tok->kind == TokenizerKind::sentencepiece);
  REQUIRE(tok->tokens.size() == 32000);
  REQUIRE(tok->scores.size() == 32000);
  REQUIRE(tok->token_types.size() == 32000);
  CHECK(tok->tokens[1] == "<s>");
  CHECK(tok->token_types[1] == TokenType::control);
  CHECK(tok->tokens[13] == "<0x0A>");
  CHECK(tok->token_types[13] == TokenType::byte);
  CHECK(tok->tokens[450] == "\xe2\x96\x81The");
  CHECK(tok->scores[450] == -191.0f);
  CHECK(tok->bos_id == 1);
  CHECK(tok->eos_id == 2);
  CHECK(tok->unk_id == 0);
  CHECK(tok->add_bos);
  CHECK_FALSE(bool(tok->add_eos));
  CHECK(tok->add_space_prefix);
  CHECK(tok->merges.empty());
}

TEST_CASE("the gpt-2 byte-level vocabulary is read with its merges in rank order", "[gguf]") {
  auto tok = read_gguf_tokenizer(shared_file("vocab/ggml-vocab-gpt-2.gguf"));
  REQUIRE_OK(tok);
  CHECK(tok->kind == TokenizerKind::byte_bpe);
  REQUIRE(tok->tokens.size() == 50257);
  REQUIRE(tok->merges.size() == 50000);
  CHECK(tok->merges.front() == "\xc4\xa0 t");
  CHECK(tok->merges.back() == "\xc4\xa0g azed");
  CHECK(tok->tokens[50256] == "<|endoftext|>");
  CHECK(tok->token_types[50256] == TokenType::control);
  CHECK(tok->bos_id == 50256);
  CHECK(tok->eos_id == 50256);
  CHECK(tok->pre == "gpt-2");
  CHECK_FALSE(bool(tok->add_bos));
  CHECK_FALSE(bool(tok->add_space_prefix));
  CHECK(tok->scores.empty());
}

TEST_CASE("a vocabulary-only GGUF is not mistaken for a model", "[gguf]") {
  auto gpt2 = load_gguf(shared_file("vocab/ggml-vocab-gpt-2.gguf"));
  REQUIRE_FALSE(bool(gpt2));
  CHECK_THAT(gpt2.error().message, Catch::Contains("architecture 'gpt2' is not supported"));
  auto spm = load_gguf(shared_file("vocab/ggml-vocab-llama-spm.gguf"));
  REQUIRE_FALSE(bool(spm));
  CHECK_THAT(spm.error().message, Catch::Contains("missing tensor token_embd.weight"));
  CHECK_THAT(spm.error().message, Catch::Contains("ggml-vocab-llama-spm.gguf"));
}
