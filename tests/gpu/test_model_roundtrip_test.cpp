// make_test_model writes what it promises: the config asked for, weights from
// the documented recipe and seed, the vocabulary of the vocab GGUF.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/gguf_loader.hpp"
#include "gpu/model/gguf_tokenizer.hpp"
#include "gpu/model/test_model.hpp"
#include "gpu/formats/half.hpp"
#include "tests/shared_data.hpp"
#include "tests/result_checks.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unistd.h>

using namespace pensieve::model;

namespace {

std::filesystem::path temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("pensieve-test-model-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::vector<char> file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TestModelOptions small_options(DType dtype) {
  TestModelOptions o;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 96;
  o.dtype = dtype;
  o.seed = 7;
  o.vocab_from = pensieve::testing::shared_file("vocab/ggml-vocab-llama-spm.gguf");
  return o;
}

float f32_at(const Tensor& t, std::size_t i) {
  float v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}

}  // namespace

TEST_CASE("a generated model loads back with the config it was asked for", "[gguf]") {
  auto o = small_options(DType::f16);
  o.max_context = 512;
  o.rope_theta = 500000.0f;
  const auto path = temp_path("config.gguf");
  REQUIRE_OK(make_test_model(o, path));
  auto w = load_gguf(path);
  REQUIRE_OK(w);
  const ModelConfig& c = w->config;
  CHECK(c.architecture == "llama");
  CHECK(c.n_layers == 2);
  CHECK(c.dim == 64);
  CHECK(c.n_heads == 4);
  CHECK(c.n_kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.ff_dim == 96);
  CHECK(c.vocab_size == 32000);
  CHECK(c.max_context == 512);
  CHECK(c.rope_theta == 500000.0f);
  CHECK(c.rope_dims == 16);
  CHECK(c.rms_eps == 1e-5f);
  CHECK(c.rope_style == RopeStyle::interleaved);
  CHECK(c.tied_output);
  CHECK(w->token_embedding.dtype == DType::f16);
  CHECK(w->layers[1].w_down.dtype == DType::f16);
  CHECK(w->layers[1].ffn_norm.dtype == DType::f32);
  auto file = read_gguf(path);
  REQUIRE_OK(file);
  CHECK(file->tensors.size() == 2 + 9 * 2);
  CHECK_THAT(*file->get_string("general.description").value(), Catch::Contains("random weights"));
}

TEST_CASE("generated weights follow the seeded recipe exactly in f32", "[gguf]") {
  auto o = small_options(DType::f32);
  const auto path = temp_path("recipe.gguf");
  REQUIRE_OK(make_test_model(o, path));
  auto w = load_gguf(path);
  REQUIRE_OK(w);
  // The embedding comes first: each row is gain * N(0,1) with gain = exp(0.3 N(0,1)).
  TestModelRng rng(o.seed);
  for (std::size_t row = 0; row < 3; ++row) {
    const double gain = std::exp(0.3 * rng.normal());
    for (std::size_t c = 0; c < 64; ++c) {
      REQUIRE(f32_at(w->token_embedding, row * 64 + c) == float(rng.normal() * gain));
    }
  }
  // Norm weights are U(0.5, 1.5); matrices have the README's gains.
  const Tensor& norm = w->layers[0].attn_norm;
  for (std::size_t i = 0; i < 64; ++i) {
    CHECK(f32_at(norm, i) >= 0.5f);
    CHECK(f32_at(norm, i) < 1.5f);
  }
  double sum_sq = 0;
  const Tensor& down = w->layers[0].w_down;  // N(0,1) * 8 / sqrt(96)
  for (std::int64_t i = 0; i < down.numel(); ++i) sum_sq += double(f32_at(down, std::size_t(i))) * f32_at(down, std::size_t(i));
  CHECK(std::sqrt(sum_sq / double(down.numel())) == Approx(8.0 / std::sqrt(96.0)).epsilon(0.05));
}

TEST_CASE("the same seed writes the same bytes and another seed different ones", "[gguf]") {
  auto o = small_options(DType::q8_0);
  const auto a = temp_path("a.gguf"), b = temp_path("b.gguf"), c = temp_path("c.gguf");
  REQUIRE_OK(make_test_model(o, a));
  REQUIRE_OK(make_test_model(o, b));
  o.seed = 8;
  REQUIRE_OK(make_test_model(o, c));
  CHECK(file_bytes(a) == file_bytes(b));
  CHECK(file_bytes(a) != file_bytes(c));
}

TEST_CASE("q8_0 weights dequantise to the f32 weights within half a quantisation step", "[gguf]") {
  const auto pf = temp_path("q_f32.gguf"), pq = temp_path("q_q8.gguf");
  REQUIRE_OK(make_test_model(small_options(DType::f32), pf));
  REQUIRE_OK(make_test_model(small_options(DType::q8_0), pq));
  auto wf = load_gguf(pf);
  auto wq = load_gguf(pq);
  REQUIRE_OK(wf);
  REQUIRE_OK(wq);
  const Tensor& f = wf->layers[1].wq;
  const Tensor& q = wq->layers[1].wq;
  REQUIRE(q.dtype == DType::q8_0);
  REQUIRE(q.size_bytes == std::size_t(f.numel() / 32 * 34));
  std::vector<float> deq(std::size_t(f.numel()));
  dequantize_q8_0(q.data, f.numel(), deq.data());
  for (std::int64_t b = 0; b < f.numel() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(f32_at(f, std::size_t(b * 32 + j))));
    const float step = pensieve::f16_to_f32(pensieve::f32_to_f16(amax / 127.0f));
    for (int j = 0; j < 32; ++j) {
      const auto i = std::size_t(b * 32 + j);
      REQUIRE(std::fabs(deq[i] - f32_at(f, i)) <= step * 0.5f + 1e-3f * amax);
    }
  }
}

TEST_CASE("q8_0 quantisation rounds like ggml's reference", "[gguf]") {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[std::size_t(i)] = float(i - 16) / 4.0f;  // amax 4 at i = 0
  const auto blocks = quantize_q8_0(x.data(), 32);
  REQUIRE(blocks.size() == 34);
  std::uint16_t d;
  std::memcpy(&d, blocks.data(), 2);
  CHECK(d == pensieve::f32_to_f16(4.0f / 127.0f));
  CHECK(std::int8_t(blocks[2]) == -127);
  CHECK(std::int8_t(blocks[2 + 16]) == 0);
  CHECK(std::int8_t(blocks[2 + 17]) == 8);     // 0.25 * 127 / 4 = 7.94
  CHECK(std::int8_t(blocks[2 + 31]) == 119);   // 3.75 * 127 / 4 = 119.06
}

TEST_CASE("the vocabulary is copied whole and a chat template can be set", "[gguf]") {
  auto o = small_options(DType::f16);
  o.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  const auto path = temp_path("vocab.gguf");
  REQUIRE_OK(make_test_model(o, path));
  auto mine = read_gguf_tokenizer(path);
  auto source = read_gguf_tokenizer(*o.vocab_from);
  REQUIRE_OK(mine);
  REQUIRE_OK(source);
  CHECK(mine->tokens == source->tokens);
  CHECK(mine->scores == source->scores);
  CHECK(mine->token_types == source->token_types);
  CHECK(mine->bos_id == source->bos_id);
  CHECK(mine->eos_id == source->eos_id);
  CHECK(mine->add_bos == source->add_bos);
  CHECK(mine->chat_template == *o.chat_template);
  o.vocab_from = pensieve::testing::shared_file("vocab/ggml-vocab-gpt-2.gguf");
  o.chat_template.reset();
  REQUIRE_OK(make_test_model(o, path));
  auto gpt2 = load_gguf(path);
  REQUIRE_OK(gpt2);
  CHECK(gpt2->config.vocab_size == 50257);
  REQUIRE(gpt2->tokenizer.has_value());
  CHECK(gpt2->tokenizer->merges.size() == 50000);
  CHECK(gpt2->tokenizer->chat_template.empty());
}

TEST_CASE("impossible test model options are refused with a reason", "[gguf]") {
  auto o = small_options(DType::q8_0);
  o.ff_dim = 100;
  auto r = make_test_model(o, temp_path("bad.gguf"));
  REQUIRE_FALSE(bool(r));
  CHECK_THAT(r.error().message, Catch::Contains("q8_0 needs dim and ff to be multiples of 32"));
  o = small_options(DType::f16);
  o.n_kv_heads = 3;
  CHECK_FALSE(bool(make_test_model(o, temp_path("bad.gguf"))));
  o = small_options(DType::bf16);
  CHECK_FALSE(bool(make_test_model(o, temp_path("bad.gguf"))));
  o = small_options(DType::f16);
  o.vocab_from = "/nonexistent/vocab.gguf";
  auto missing = make_test_model(o, temp_path("bad.gguf"));
  REQUIRE_FALSE(bool(missing));
  CHECK_THAT(missing.error().message, Catch::Contains("/nonexistent/vocab.gguf"));
}
