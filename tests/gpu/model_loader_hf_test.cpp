// A Hugging Face directory written from a generated GGUF loads as the same
// model: every tensor byte-equal, Q/K rows in rotate_half order (the
// documented inverse of llama.cpp's permutation), rope half_split.
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/hf_config.hpp"
#include "gpu/model/hf_export.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/formats/safetensors_file.hpp"
#include "gpu/formats/safetensors_writer.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/shared_data.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace pensieve::model;

namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("pensieve-hf-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

ModelWeights generated(DType dtype, const std::filesystem::path& dir) {
  TestModelOptions o;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 96;
  o.dtype = dtype;
  o.seed = 3;
  o.vocab_from = pensieve::testing::shared_file("vocab/ggml-vocab-llama-spm.gguf");
  REQUIRE_OK(make_test_model(o, dir / "model.gguf"));
  auto w = load_model(dir / "model.gguf");
  REQUIRE_OK(w);
  return std::move(*w);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.size_bytes == b.size_bytes &&
         std::memcmp(a.data, b.data, a.size_bytes) == 0;
}

bool same_bytes(const Tensor& a, const std::vector<std::byte>& b) {
  return a.size_bytes == b.size() && std::memcmp(a.data, b.data(), b.size()) == 0;
}

void require_same_model(const ModelWeights& gguf, const ModelWeights& hf) {
  const ModelConfig &g = gguf.config, &h = hf.config;
  CHECK(h.architecture == g.architecture);
  CHECK(h.n_layers == g.n_layers);
  CHECK(h.dim == g.dim);
  CHECK(h.n_heads == g.n_heads);
  CHECK(h.n_kv_heads == g.n_kv_heads);
  CHECK(h.head_dim == g.head_dim);
  CHECK(h.ff_dim == g.ff_dim);
  CHECK(h.vocab_size == g.vocab_size);
  CHECK(h.max_context == g.max_context);
  CHECK(h.rms_eps == g.rms_eps);
  CHECK(h.rope_theta == g.rope_theta);
  CHECK(h.rope_dims == g.rope_dims);
  CHECK(h.tied_output == g.tied_output);
  CHECK(g.rope_style == RopeStyle::interleaved);
  CHECK(h.rope_style == RopeStyle::half_split);
  CHECK(same_bytes(gguf.token_embedding, hf.token_embedding));
  CHECK(same_bytes(gguf.output_norm, hf.output_norm));
  CHECK(hf.output.data == hf.token_embedding.data);
  for (std::size_t l = 0; l < gguf.layers.size(); ++l) {
    const LayerWeights &a = gguf.layers[l], &b = hf.layers[l];
    CHECK(same_bytes(b.wq, interleaved_to_half_split_rows(a.wq, g.n_heads)));
    CHECK(same_bytes(b.wk, interleaved_to_half_split_rows(a.wk, g.n_kv_heads)));
    for (auto [x, y] : {std::pair{&a.attn_norm, &b.attn_norm}, {&a.wv, &b.wv}, {&a.wo, &b.wo},
                        {&a.ffn_norm, &b.ffn_norm}, {&a.w_gate, &b.w_gate}, {&a.w_up, &b.w_up},
                        {&a.w_down, &b.w_down}}) {
      CHECK(same_bytes(*x, *y));
    }
  }
}

}  // namespace

TEST_CASE("the permutation moves interleaved pair (2i, 2i+1) to rows (i, i + d/2) of each head", "[safetensors]") {
  std::vector<float> rows(8);  // 2 heads of head_dim 4, one column: row r holds r
  for (int r = 0; r < 8; ++r) rows[std::size_t(r)] = float(r);
  Tensor t{"q", DType::f32, {8, 1}, reinterpret_cast<const std::byte*>(rows.data()), 32};
  const auto out = interleaved_to_half_split_rows(t, 2);
  std::vector<float> got(8);
  std::memcpy(got.data(), out.data(), 32);
  CHECK(got == std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7});
}

TEST_CASE("a safetensors export of a generated f32 model loads as the same model", "[safetensors]") {
  const auto dir = temp_dir("f32");
  const ModelWeights gguf = generated(DType::f32, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  auto format = detect_model_format(dir / "hf");
  REQUIRE_OK(format);
  CHECK(*format == ModelFormat::hf_directory);
  auto hf = load_model(dir / "hf");
  REQUIRE_OK(hf);
  require_same_model(gguf, *hf);
}

TEST_CASE("a safetensors export of a generated f16 model loads as the same model", "[safetensors]") {
  const auto dir = temp_dir("f16");
  const ModelWeights gguf = generated(DType::f16, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  auto hf = load_model(dir / "hf");
  REQUIRE_OK(hf);
  require_same_model(gguf, *hf);
}

TEST_CASE("a q8_0 model exports as its dequantised f32 values", "[safetensors]") {
  const auto dir = temp_dir("q8");
  const ModelWeights gguf = generated(DType::q8_0, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  auto hf = load_model(dir / "hf");
  REQUIRE_OK(hf);
  const Tensor& q = gguf.layers[0].w_up;
  const Tensor& f = hf->layers[0].w_up;
  CHECK(f.dtype == DType::f32);
  std::vector<float> expected(std::size_t(q.numel()));
  dequantize_q8_0(q.data, q.numel(), expected.data());
  CHECK(std::memcmp(f.data, expected.data(), f.size_bytes) == 0);
}

TEST_CASE("a sharded checkpoint with an index loads like a single file", "[safetensors]") {
  const auto dir = temp_dir("sharded");
  const ModelWeights gguf = generated(DType::f16, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  auto whole = read_safetensors(dir / "hf" / "model.safetensors");
  REQUIRE_OK(whole);
  std::vector<SafetensorsOut> shard[2];
  std::string weight_map;
  for (std::size_t i = 0; i < whole->tensors.size(); ++i) {
    const auto& t = whole->tensors[i];
    shard[i % 2].push_back({t.name, *t.dtype, t.shape, std::vector<std::byte>(t.data, t.data + t.size_bytes)});
    weight_map += (i ? ",\"" : "\"") + t.name + "\":\"model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors\"";
  }
  const auto sharded = dir / "sharded";
  std::filesystem::create_directories(sharded);
  std::filesystem::copy_file(dir / "hf" / "config.json", sharded / "config.json");
  REQUIRE_OK(write_safetensors(sharded / "model-00001-of-00002.safetensors", shard[0], {}));
  REQUIRE_OK(write_safetensors(sharded / "model-00002-of-00002.safetensors", shard[1], {}));
  std::ofstream(sharded / "model.safetensors.index.json") << "{\"metadata\":{},\"weight_map\":{" << weight_map << "}}";
  auto hf = load_model(sharded);
  REQUIRE_OK(hf);
  require_same_model(gguf, *hf);
}

TEST_CASE("a config that disagrees with the safetensors shapes is named", "[safetensors]") {
  const auto dir = temp_dir("mismatch");
  const ModelWeights gguf = generated(DType::f32, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  std::ofstream(dir / "hf" / "config.json")
      << R"({"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,)"
      << R"("num_attention_heads":4,"num_key_value_heads":2,"vocab_size":32000,"tie_word_embeddings":true})";
  auto hf = load_model(dir / "hf");
  REQUIRE_FALSE(bool(hf));
  CHECK_THAT(hf.error().message,
             Catch::Contains("tensor model.layers.0.mlp.gate_proj.weight has shape {96, 64} but the config needs {128, 64}"));
  std::ofstream(dir / "hf" / "config.json") << R"({"model_type":"gpt_neox"})";
  auto neox = load_model(dir / "hf");
  REQUIRE_FALSE(bool(neox));
  CHECK_THAT(neox.error().message, Catch::Contains("model type 'gpt_neox' is not supported"));
}

TEST_CASE("an untied checkpoint without lm_head is an error naming it", "[safetensors]") {
  const auto dir = temp_dir("untied");
  const ModelWeights gguf = generated(DType::f32, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  std::ofstream(dir / "hf" / "config.json")
      << R"({"model_type":"llama","hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,)"
      << R"("num_attention_heads":4,"num_key_value_heads":2,"vocab_size":32000})";
  auto hf = load_model(dir / "hf");
  REQUIRE_FALSE(bool(hf));
  CHECK_THAT(hf.error().message, Catch::Contains("missing tensor lm_head.weight"));
}

TEST_CASE("load_model tells the formats apart by content", "[safetensors]") {
  const auto dir = temp_dir("dispatch");
  CHECK_FALSE(bool(detect_model_format(dir)));  // a directory without config.json
  CHECK_FALSE(bool(detect_model_format(dir / "absent.gguf")));
  std::ofstream(dir / "renamed.bin") << "GGUF";
  auto gguf = detect_model_format(dir / "renamed.bin");
  REQUIRE_OK(gguf);
  CHECK(*gguf == ModelFormat::gguf);
  auto truncated = load_model(dir / "renamed.bin");
  REQUIRE_FALSE(bool(truncated));
  CHECK_THAT(truncated.error().message, Catch::Contains("renamed.bin: GGUF: truncated"));
  std::ofstream(dir / "tiny.bin") << "xy";
  CHECK_FALSE(bool(detect_model_format(dir / "tiny.bin")));
  // What an interrupted llama-quantize leaves: zeros where the header goes.
  std::ofstream(dir / "unfinished.GGUF", std::ios::binary) << std::string(4096, '\0');
  auto unfinished = load_model(dir / "unfinished.GGUF");
  REQUIRE_FALSE(bool(unfinished));
  CHECK(unfinished.error().message ==
        (dir / "unfinished.GGUF").string() +
            ": not a GGUF file: it begins with the bytes 00 00 00 00, not \"GGUF\" (a "
            "download or a conversion that did not finish?)");
  // Without the name, the same bytes are a llama2.c checkpoint, whose reader refuses them.
  std::ofstream(dir / "zeros.bin", std::ios::binary) << std::string(4096, '\0');
  auto zeros = detect_model_format(dir / "zeros.bin");
  REQUIRE_OK(zeros);
  CHECK(*zeros == ModelFormat::llama2c);
  CHECK_FALSE(bool(load_model(dir / "zeros.bin")));
}

TEST_CASE("the Hugging Face export keeps a sentencepiece vocabulary and its merge order", "[safetensors]") {
  const auto dir = temp_dir("spm_tok");
  const ModelWeights gguf = generated(DType::f16, dir);
  REQUIRE_OK(export_hf_directory(gguf, dir / "hf"));
  auto hf = load_model(dir / "hf");
  REQUIRE_OK(hf);
  REQUIRE(hf->tokenizer.has_value());
  const TokenizerData &a = *gguf.tokenizer, &b = *hf->tokenizer;
  CHECK(b.kind == TokenizerKind::sentencepiece);
  CHECK(b.tokens == a.tokens);
  CHECK(b.bos_id == a.bos_id);
  CHECK(b.eos_id == a.eos_id);
  CHECK(b.unk_id == a.unk_id);
  CHECK(b.add_bos == a.add_bos);
  CHECK(b.add_space_prefix == a.add_space_prefix);
  CHECK(b.token_types[13] == TokenType::byte);
  CHECK(b.token_types[1] == TokenType::control);
  // Merged tokens keep the order of their scores: a higher SentencePiece score
  // is an earlier merge.
  int compared = 0;
  for (std::size_t i = 300; i < 3000; ++i) {
    const std::size_t j = i + 1;
    if (b.scores[i] == 0.0f || b.scores[j] == 0.0f || a.scores[i] == a.scores[j]) continue;
    REQUIRE((a.scores[i] > a.scores[j]) == (b.scores[i] > b.scores[j]));
    ++compared;
  }
  CHECK(compared > 1000);
}

TEST_CASE("the Hugging Face export keeps a byte-level vocabulary with its merges", "[safetensors]") {
  const auto dir = temp_dir("bpe_tok");
  TestModelOptions o;
  o.vocab_from = pensieve::testing::shared_file("vocab/ggml-vocab-gpt-2.gguf");
  o.chat_template = "{{ messages }}";
  REQUIRE_OK(make_test_model(o, dir / "model.gguf"));
  auto gguf = load_model(dir / "model.gguf");
  REQUIRE_OK(gguf);
  REQUIRE_OK(export_hf_directory(*gguf, dir / "hf"));
  auto hf = load_model(dir / "hf");
  REQUIRE_OK(hf);
  REQUIRE(hf->tokenizer.has_value());
  CHECK(hf->tokenizer->kind == TokenizerKind::byte_bpe);
  CHECK(hf->tokenizer->tokens == gguf->tokenizer->tokens);
  CHECK(hf->tokenizer->merges == gguf->tokenizer->merges);
  CHECK(hf->tokenizer->eos_id == 50256);
  CHECK(hf->tokenizer->chat_template == "{{ messages }}");
}

TEST_CASE("a Mistral config.json's sliding window is honoured, a null one and Qwen2's are not", "[safetensors]") {
  const std::string dims =
      R"("hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 96, "vocab_size": 100)";
  auto mistral = parse_hf_config(R"({"model_type": "mistral", "sliding_window": 4096, )" + dims + "}", "m");
  REQUIRE(mistral.has_value());
  CHECK(mistral->architecture == "llama");
  CHECK(mistral->sliding_window == 4096);
  CHECK(mistral->layer_window(1) == 4096);
  auto v02 = parse_hf_config(R"({"model_type": "mistral", "sliding_window": null, )" + dims + "}", "m");
  REQUIRE(v02.has_value());
  CHECK(v02->sliding_window == 0);
  auto qwen = parse_hf_config(R"({"model_type": "qwen2", "sliding_window": 4096, )" + dims + "}", "q");
  REQUIRE(qwen.has_value());
  CHECK(qwen->sliding_window == 0);
}
