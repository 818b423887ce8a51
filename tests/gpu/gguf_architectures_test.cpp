// The architectures beyond llama and qwen2, from files make_test_model
// writes with llama.cpp's metadata keys and tensor names: each file carries
// those names, and the loader turns them into the config and weights the
// forward pass reads. An unknown architecture is an error naming it.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/formats/gguf_writer.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/result_checks.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

using namespace pensieve::model;
using pensieve::testing::TempDir;

namespace {

struct Generated {
  GgufFile file;
  ModelWeights weights;
};

TestModelOptions arch_options(const std::string& arch) {
  TestModelOptions o;
  o.arch = arch;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 96;
  o.max_context = 512;
  o.dtype = DType::f32;
  o.seed = 3;
  return o;
}

Generated generate(TempDir& dir, TestModelOptions o) {
  const auto vocab = dir.path() / "vocab.gguf";
  if (!std::filesystem::exists(vocab)) REQUIRE_OK(write_builtin_vocab_gguf(vocab));
  o.vocab_from = vocab;
  const auto path = dir.path() / (o.arch + ".gguf");
  REQUIRE_OK(make_test_model(o, path));
  auto file = read_gguf(path);
  REQUIRE_OK(file);
  auto w = weights_from_gguf(*file);
  REQUIRE_OK(w);
  return {std::move(*file), std::move(*w)};
}

bool has_tensor(const GgufFile& f, const std::string& name) { return f.find_tensor(name) != nullptr; }

std::int64_t int_key(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  REQUIRE_OK(v);
  REQUIRE(v->has_value());
  return **v;
}

double number_key(const GgufFile& f, const std::string& key) {
  auto v = f.get_number(key);
  REQUIRE_OK(v);
  REQUIRE(v->has_value());
  return **v;
}

// The view's bytes are `rows` rows of the file tensor from row `first`.
bool views_rows(const Tensor& view, const GgufFile& f, const std::string& name, std::int64_t first) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return false;
  const std::size_t row_bytes = dtype_row_bytes(t->dtype, t->ne[0]);
  return view.data == t->data + std::size_t(first) * row_bytes && view.size_bytes == std::size_t(view.rows()) * row_bytes;
}

}  // namespace

TEST_CASE("a Llama 3.1 file loads its rope_freqs divisors and stays untied, Llama 3.2 is tied", "[gguf]") {
  TempDir dir("arch");
  auto o = arch_options("llama3");
  o.rope_theta = 500000.0f;
  auto g = generate(dir, o);
  CHECK(g.file.get_string("general.architecture")->value_or("") == "llama");
  REQUIRE(has_tensor(g.file, "rope_freqs.weight"));
  CHECK(has_tensor(g.file, "output.weight"));
  const ModelConfig& c = g.weights.config;
  CHECK(c.architecture == "llama");
  CHECK(c.rope_theta == 500000.0f);
  CHECK(c.rope_style == RopeStyle::interleaved);
  CHECK_FALSE(c.tied_output);
  REQUIRE(g.weights.rope_freqs.present());
  CHECK(g.weights.rope_freqs.shape == std::vector<std::int64_t>{8});
  CHECK(g.weights.rope_freqs.data == g.file.find_tensor("rope_freqs.weight")->data);
  // The llama3 recipe: high frequencies kept (1), low ones divided by 8.
  float first, last;
  std::memcpy(&first, g.weights.rope_freqs.data, 4);
  std::memcpy(&last, g.weights.rope_freqs.data + 28, 4);
  CHECK(first == 1.0f);
  CHECK(last == 8.0f);
  auto g32 = generate(dir, arch_options("llama3.2"));
  CHECK_FALSE(has_tensor(g32.file, "output.weight"));
  CHECK(g32.weights.config.tied_output);
  CHECK(g32.weights.output.data == g32.weights.token_embedding.data);
  CHECK(g32.weights.rope_freqs.present());
}

TEST_CASE("a qwen3 file loads its per-head q/k norms and a head dim apart from dim / heads", "[gguf]") {
  TempDir dir("arch");
  auto o = arch_options("qwen3");
  o.head_dim = 32;
  auto g = generate(dir, o);
  CHECK(int_key(g.file, "qwen3.attention.key_length") == 32);
  CHECK(has_tensor(g.file, "blk.1.attn_q_norm.weight"));
  CHECK(has_tensor(g.file, "blk.1.attn_k_norm.weight"));
  CHECK_FALSE(has_tensor(g.file, "blk.0.attn_q.bias"));
  const ModelConfig& c = g.weights.config;
  CHECK(c.architecture == "qwen3");
  CHECK(c.qk_norm);
  CHECK_FALSE(c.qkv_bias);
  CHECK(c.rope_style == RopeStyle::half_split);
  CHECK(c.head_dim == 32);
  CHECK(c.q_dim() == 128);
  CHECK(c.rope_dims == 32);
  const LayerWeights& L = g.weights.layers[1];
  CHECK(L.q_norm.shape == std::vector<std::int64_t>{32});
  CHECK(L.k_norm.data == g.file.find_tensor("blk.1.attn_k_norm.weight")->data);
  CHECK(L.wq.shape == std::vector<std::int64_t>{128, 64});
  CHECK(L.wo.shape == std::vector<std::int64_t>{64, 128});
}

TEST_CASE("a mistral file is a llama file whose sliding window covers every layer", "[gguf]") {
  TempDir dir("arch");
  auto g = generate(dir, arch_options("mistral"));
  CHECK(g.file.get_string("general.architecture")->value_or("") == "llama");
  CHECK(int_key(g.file, "llama.attention.sliding_window") == 8);
  const ModelConfig& c = g.weights.config;
  CHECK(c.sliding_window == 8);
  CHECK(c.layer_window(0) == 8);
  CHECK(c.layer_window(1) == 8);
  // A plain llama file has none.
  auto plain = generate(dir, arch_options("llama"));
  CHECK(plain.weights.config.sliding_window == 0);
  CHECK(plain.weights.config.layer_window(0) == 0);
}

TEST_CASE("a phi3 file's fused qkv and gate+up become row views and its long rope factors apply",
          "[gguf]") {
  TempDir dir("arch");
  auto g = generate(dir, arch_options("phi3"));
  for (const char* name : {"blk.0.attn_qkv.weight", "blk.0.ffn_up.weight", "rope_factors_long.weight",
                           "rope_factors_short.weight", "output.weight"}) {
    CHECK(has_tensor(g.file, name));
  }
  CHECK_FALSE(has_tensor(g.file, "blk.0.attn_q.weight"));
  CHECK_FALSE(has_tensor(g.file, "blk.0.ffn_gate.weight"));
  CHECK(g.file.find_tensor("blk.0.ffn_up.weight")->ne[1] == 2 * 96);
  CHECK(int_key(g.file, "phi3.rope.scaling.original_context_length") == 128);
  const ModelConfig& c = g.weights.config;
  CHECK(c.architecture == "phi3");
  CHECK(c.rope_style == RopeStyle::half_split);
  CHECK(c.sliding_window == 8);
  CHECK(c.sliding_window_pattern == 0);
  CHECK_FALSE(c.tied_output);
  // sqrt(1 + ln(512 / 128) / ln(128)), llama.cpp's converter's attn_factor.
  CHECK(c.rope_scaling.attn_factor == Approx(std::sqrt(1.0 + std::log(4.0) / std::log(128.0))));
  CHECK(number_key(g.file, "phi3.rope.scaling.attn_factor") == Approx(c.rope_scaling.attn_factor));
  const LayerWeights& L = g.weights.layers[0];
  CHECK(views_rows(L.wq, g.file, "blk.0.attn_qkv.weight", 0));
  CHECK(views_rows(L.wk, g.file, "blk.0.attn_qkv.weight", 64));
  CHECK(views_rows(L.wv, g.file, "blk.0.attn_qkv.weight", 64 + 32));
  CHECK(L.wk.shape == std::vector<std::int64_t>{32, 64});
  CHECK(views_rows(L.w_gate, g.file, "blk.0.ffn_up.weight", 0));
  CHECK(views_rows(L.w_up, g.file, "blk.0.ffn_up.weight", 96));
  CHECK(L.w_up.shape == std::vector<std::int64_t>{96, 64});
  // Served at 512 tokens, past the 128 it was trained at: the long factors.
  CHECK(g.weights.rope_freqs.data == g.file.find_tensor("rope_factors_long.weight")->data);
}

TEST_CASE("a phi3 file served within its original context uses the short rope factors", "[gguf]") {
  TempDir dir("arch");
  auto g = generate(dir, arch_options("phi3"));
  // The same file with context_length 128 = the original context.
  GgufWriter w;
  for (const auto& [key, value] : g.file.metadata) w.set(key, value);
  w.set("phi3.context_length", GgufValue::of_u32(128));
  for (const auto& t : g.file.tensors) {
    REQUIRE_OK(w.add_tensor(t.name, t.dtype, t.ne, std::vector<std::byte>(t.data, t.data + t.size_bytes)));
  }
  auto file = parse_gguf(w.serialize(), "short.gguf");
  REQUIRE_OK(file);
  auto weights = weights_from_gguf(*file);
  REQUIRE_OK(weights);
  CHECK(weights->rope_freqs.data == file->find_tensor("rope_factors_short.weight")->data);
}

TEST_CASE("a gemma2 file loads post-norms, GELU, soft-capping and every other layer windowed", "[gguf]") {
  TempDir dir("arch");
  auto o = arch_options("gemma2");
  o.head_dim = 32;
  auto g = generate(dir, o);
  CHECK(number_key(g.file, "gemma2.attn_logit_softcapping") == 50.0);
  CHECK(number_key(g.file, "gemma2.final_logit_softcapping") == 30.0);
  CHECK(int_key(g.file, "gemma2.attention.sliding_window") == 8);
  CHECK(has_tensor(g.file, "blk.1.post_attention_norm.weight"));
  CHECK(has_tensor(g.file, "blk.1.post_ffw_norm.weight"));
  CHECK_FALSE(has_tensor(g.file, "output.weight"));
  const ModelConfig& c = g.weights.config;
  CHECK(c.architecture == "gemma2");
  CHECK(c.post_norms);
  CHECK_FALSE(c.qk_norm);
  CHECK(c.ffn_activation == FfnActivation::gelu_tanh);
  CHECK(c.embedding_scale == std::sqrt(64.0f));
  CHECK(c.attn_logit_softcap == 50.0f);
  CHECK(c.final_logit_softcap == 30.0f);
  CHECK(c.softmax_scale() == 1.0f / std::sqrt(32.0f));
  CHECK(c.tied_output);
  CHECK(c.layer_window(0) == 8);
  CHECK(c.layer_window(1) == 0);
  CHECK(c.layer_window(2) == 8);
  CHECK(g.weights.layers[1].post_ffn_norm.data == g.file.find_tensor("blk.1.post_ffw_norm.weight")->data);
}

TEST_CASE("a gemma3 file loads q/k norms, five windowed layers in six and their own rope base", "[gguf]") {
  TempDir dir("arch");
  auto o = arch_options("gemma3");
  o.n_layers = 6;
  o.head_dim = 32;
  o.rope_theta = 1000000.0f;
  auto g = generate(dir, o);
  CHECK(has_tensor(g.file, "blk.5.attn_q_norm.weight"));
  CHECK(has_tensor(g.file, "blk.5.post_attention_norm.weight"));
  const ModelConfig& c = g.weights.config;
  CHECK(c.architecture == "gemma3");
  CHECK(c.qk_norm);
  CHECK(c.post_norms);
  CHECK(c.attn_logit_softcap == 0.0f);
  CHECK(c.final_logit_softcap == 0.0f);
  CHECK(c.rope_theta == 1000000.0f);
  CHECK(c.rope_theta_windowed == 10000.0f);
  CHECK(c.rope_scaling.type == RopeScalingType::linear);
  CHECK(c.rope_scaling.factor == 8.0f);
  for (std::int32_t l = 0; l < 5; ++l) CHECK(c.layer_window(l) == 8);
  CHECK(c.layer_window(5) == 0);
  CHECK(c.layer_window(11) == 0);
}

TEST_CASE("an unknown architecture is an error that names it and the supported ones", "[gguf]") {
  GgufWriter w;
  w.set("general.architecture", GgufValue::of_string("mamba"));
  w.set("mamba.block_count", GgufValue::of_u32(1));
  auto file = parse_gguf(w.serialize(), "mamba.gguf");
  REQUIRE_OK(file);
  auto weights = weights_from_gguf(*file);
  REQUIRE_FALSE(weights.has_value());
  CHECK(weights.error().message ==
        "mamba.gguf: GGUF model: architecture 'mamba' is not supported (llama, qwen2, qwen3, phi3, gemma2, gemma3)");
  TestModelOptions o = arch_options("gpt2");
  o.vocab_size = 10;
  auto made = make_test_model(o, "/nonexistent/never-written.gguf");
  REQUIRE_FALSE(made.has_value());
  CHECK_THAT(made.error().message, Catch::Contains("unknown --arch 'gpt2'"));
}

TEST_CASE("a gemma3 file's final soft-cap applies only without windows, as llama.cpp's graphs do", "[gguf]") {
  TempDir dir("arch");
  auto g = generate(dir, arch_options("gemma3"));
  auto with_cap = [&](std::uint32_t window) {
    GgufWriter w;
    for (const auto& [key, value] : g.file.metadata) w.set(key, value);
    w.set("gemma3.final_logit_softcapping", GgufValue::of_f32(30.0f));
    w.set("gemma3.attention.sliding_window", GgufValue::of_u32(window));
    for (const auto& t : g.file.tensors) {
      REQUIRE_OK(w.add_tensor(t.name, t.dtype, t.ne, std::vector<std::byte>(t.data, t.data + t.size_bytes)));
    }
    auto file = parse_gguf(w.serialize(), "gemma3.gguf");
    REQUIRE_OK(file);
    auto c = config_from_gguf(*file);
    REQUIRE_OK(c);
    return *c;
  };
  const ModelConfig windowed = with_cap(8), global = with_cap(0);
  CHECK(windowed.final_logit_softcap == 0.0f);
  CHECK(windowed.rope_theta_windowed == 10000.0f);
  CHECK(global.final_logit_softcap == 30.0f);
  CHECK(global.layer_window(0) == 0);
  CHECK(global.rope_theta_windowed == 0.0f);
}
