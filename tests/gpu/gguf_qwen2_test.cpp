// A qwen2 GGUF: Q/K/V biases, half-split ("neox") rope, rope scaling and
// untied output, read from a file made with the GGUF writer.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/formats/gguf_writer.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

using namespace pensieve::model;

namespace {

constexpr std::int64_t dim = 32, ff = 64, vocab = 5, kv = 16;

GgufWriter qwen2(bool with_biases) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("qwen2"));
  w.set("qwen2.block_count", GgufValue::of_u32(1));
  w.set("qwen2.embedding_length", GgufValue::of_u32(dim));
  w.set("qwen2.attention.head_count", GgufValue::of_u32(2));
  w.set("qwen2.attention.head_count_kv", GgufValue::of_u32(1));
  w.set("qwen2.feed_forward_length", GgufValue::of_u32(ff));
  w.set("qwen2.context_length", GgufValue::of_u32(32768));
  w.set("qwen2.rope.freq_base", GgufValue::of_f32(1000000.0f));
  w.set("qwen2.attention.layer_norm_rms_epsilon", GgufValue::of_f32(1e-6f));
  w.set("qwen2.rope.scaling.type", GgufValue::of_string("linear"));
  w.set("qwen2.rope.scaling.factor", GgufValue::of_f32(4.0f));
  w.set("qwen2.vocab_size", GgufValue::of_u32(vocab));
  auto add = [&](const std::string& name, std::vector<std::int64_t> ne) {
    std::int64_t n = 1;
    for (auto d : ne) n *= d;
    REQUIRE_OK(w.add_tensor(name, DType::f32, ne, std::vector<std::byte>(std::size_t(n) * 4)));
  };
  add("token_embd.weight", {dim, vocab});
  add("output.weight", {dim, vocab});
  add("output_norm.weight", {dim});
  add("blk.0.attn_norm.weight", {dim});
  add("blk.0.attn_q.weight", {dim, dim});
  add("blk.0.attn_k.weight", {dim, kv});
  add("blk.0.attn_v.weight", {dim, kv});
  if (with_biases) {
    add("blk.0.attn_q.bias", {dim});
    add("blk.0.attn_k.bias", {kv});
    add("blk.0.attn_v.bias", {kv});
  }
  add("blk.0.attn_output.weight", {dim, dim});
  add("blk.0.ffn_norm.weight", {dim});
  add("blk.0.ffn_gate.weight", {dim, ff});
  add("blk.0.ffn_up.weight", {dim, ff});
  add("blk.0.ffn_down.weight", {ff, dim});
  return w;
}

}  // namespace

TEST_CASE("a qwen2 GGUF loads with biases, half-split rope and an untied output", "[gguf]") {
  auto file = parse_gguf(qwen2(true).serialize(), "qwen2.gguf");
  REQUIRE_OK(file);
  auto w = weights_from_gguf(*file);
  REQUIRE_OK(w);
  const ModelConfig& c = w->config;
  CHECK(c.architecture == "qwen2");
  CHECK(c.rope_style == RopeStyle::half_split);
  CHECK(c.qkv_bias);
  CHECK(c.rope_theta == 1000000.0f);
  CHECK(c.rms_eps == 1e-6f);
  CHECK(c.max_context == 32768);
  CHECK(c.vocab_size == 5);
  CHECK(c.rope_scaling.type == RopeScalingType::linear);
  CHECK(c.rope_scaling.factor == 4.0f);
  CHECK_FALSE(c.tied_output);
  CHECK(w->output.data != w->token_embedding.data);
  CHECK(w->output.shape == std::vector<std::int64_t>{5, 32});
  CHECK(w->layers[0].bq.shape == std::vector<std::int64_t>{32});
  CHECK(w->layers[0].bk.shape == std::vector<std::int64_t>{16});
  CHECK(w->layers[0].bv.present());
  CHECK_FALSE(w->tokenizer.has_value());
}

TEST_CASE("a qwen2 GGUF without its biases is an error naming the bias", "[gguf]") {
  auto file = parse_gguf(qwen2(false).serialize(), "nobias.gguf");
  REQUIRE_OK(file);
  auto w = weights_from_gguf(*file);
  REQUIRE_FALSE(w.has_value());
  CHECK(w.error().message == "nobias.gguf: GGUF model: missing tensor blk.0.attn_q.bias");
}

TEST_CASE("an unsupported rope scaling or architecture is named", "[gguf]") {
  GgufWriter yarn = qwen2(true);
  yarn.set("qwen2.rope.scaling.type", GgufValue::of_string("yarn"));
  auto file = parse_gguf(yarn.serialize(), "yarn.gguf");
  REQUIRE_OK(file);
  auto w = weights_from_gguf(*file);
  REQUIRE_FALSE(w.has_value());
  CHECK_THAT(w.error().message, Catch::Contains("rope scaling 'yarn' is not supported"));
  GgufWriter rwkv = qwen2(true);
  rwkv.set("general.architecture", GgufValue::of_string("rwkv6"));
  auto rwkv_file = parse_gguf(rwkv.serialize(), "rwkv.gguf");
  REQUIRE_OK(rwkv_file);
  auto p = weights_from_gguf(*rwkv_file);
  REQUIRE_FALSE(p.has_value());
  CHECK_THAT(p.error().message, Catch::Contains("architecture 'rwkv6' is not supported"));
}
