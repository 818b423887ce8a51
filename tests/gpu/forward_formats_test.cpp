// The same weights give the same logits whatever file format carried them:
// a generated GGUF (interleaved RoPE) and its Hugging Face safetensors twin
// (rotate_half RoPE, Q/K rows permuted back).
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/hf_export.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/prompt_logits.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <unistd.h>

using namespace pensieve::model;
namespace fs = std::filesystem;

namespace {

using pensieve::testing::prompt_logits;
using pensieve::testing::TempDir;

void check_same_logits(DType dtype) {
  TempDir dir("formats");
  REQUIRE(write_builtin_vocab_gguf(dir.path() / "vocab.gguf").has_value());
  TestModelOptions o;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 96;
  o.dtype = dtype;
  o.seed = 11;
  o.vocab_from = dir.path() / "vocab.gguf";
  REQUIRE(make_test_model(o, dir.path() / "m.gguf").has_value());
  auto gguf = load_model(dir.path() / "m.gguf");
  REQUIRE(gguf.has_value());
  REQUIRE(gguf->config.rope_style == RopeStyle::interleaved);
  REQUIRE(export_hf_directory(*gguf, dir.path() / "hf").has_value());
  auto hf = load_model(dir.path() / "hf");
  REQUIRE(hf.has_value());
  REQUIRE(hf->config.rope_style == RopeStyle::half_split);

  const std::vector<std::int32_t> prompt{1, 40, 77, 200, 13, 99, 150, 7, 300, 41};
  const auto a = prompt_logits(std::move(*gguf), prompt);
  const auto b = prompt_logits(std::move(*hf), prompt);
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() == prompt.size() * std::size_t(builtin_vocab().tokens.size()));
  float max_abs = 0.0f;
  float worst = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(a[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  INFO("largest logit " << max_abs << ", largest difference " << worst);
  CHECK(max_abs > 1.0f);  // the logits are not flat
  CHECK(worst <= 1e-5f * std::max(1.0f, max_abs));
}

}  // namespace

TEST_CASE("a generated GGUF and its safetensors twin give the same logits in f32", "[forward]") {
  check_same_logits(DType::f32);
}

TEST_CASE("a generated GGUF and its safetensors twin give the same logits in f16", "[forward]") {
  check_same_logits(DType::f16);
}
