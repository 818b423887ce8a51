// make_test_model with an untied output head (a separate output.weight): it
// loads as untied, its logits differ from the tied twin's (same seed, so every
// other tensor is the same), and its safetensors export (lm_head.weight) gives
// the same logits.
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/hf_export.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/prompt_logits.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

using namespace pensieve::model;
namespace fs = std::filesystem;

namespace {

using pensieve::testing::prompt_logits;
using pensieve::testing::TempDir;

TestModelOptions options(const fs::path& vocab, bool tied) {
  TestModelOptions o;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 96;
  o.dtype = DType::f32;
  o.seed = 5;
  o.vocab_from = vocab;
  o.tied_output = tied;
  return o;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.size_bytes == b.size_bytes && std::memcmp(a.data, b.data, a.size_bytes) == 0;
}

}  // namespace

TEST_CASE("an untied test model loads with its own output head and different logits", "[gguf]") {
  TempDir dir("untied");
  REQUIRE(write_builtin_vocab_gguf(dir.path() / "vocab.gguf").has_value());
  REQUIRE(make_test_model(options(dir.path() / "vocab.gguf", true), dir.path() / "tied.gguf").has_value());
  REQUIRE(make_test_model(options(dir.path() / "vocab.gguf", false), dir.path() / "untied.gguf").has_value());
  auto tied = load_model(dir.path() / "tied.gguf");
  auto untied = load_model(dir.path() / "untied.gguf");
  REQUIRE(tied.has_value());
  REQUIRE(untied.has_value());
  CHECK(tied->config.tied_output);
  CHECK_FALSE(untied->config.tied_output);
  const auto vocab = std::int64_t(builtin_vocab().tokens.size());
  CHECK(untied->output.rows() == vocab);
  CHECK(untied->output.cols() == 64);
  CHECK(untied->output.data != untied->token_embedding.data);
  // The head is drawn last: every shared tensor has the tied model's bytes.
  CHECK(same_bytes(tied->token_embedding, untied->token_embedding));
  CHECK(same_bytes(tied->layers.back().w_down, untied->layers.back().w_down));
  CHECK(same_bytes(tied->output_norm, untied->output_norm));
  CHECK_FALSE(same_bytes(tied->output, untied->output));

  const std::vector<std::int32_t> prompt{1, 40, 77, 200, 13};
  const auto a = prompt_logits(std::move(*tied), prompt);
  const auto b = prompt_logits(std::move(*untied), prompt);
  REQUIRE(a.size() == b.size());
  float differ = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) differ = std::max(differ, std::abs(a[i] - b[i]));
  CHECK(differ > 1.0f);
}

TEST_CASE("an untied test model and its safetensors twin give the same logits", "[forward]") {
  TempDir dir("untied");
  REQUIRE(write_builtin_vocab_gguf(dir.path() / "vocab.gguf").has_value());
  REQUIRE(make_test_model(options(dir.path() / "vocab.gguf", false), dir.path() / "m.gguf").has_value());
  auto gguf = load_model(dir.path() / "m.gguf");
  REQUIRE(gguf.has_value());
  REQUIRE(export_hf_directory(*gguf, dir.path() / "hf").has_value());
  REQUIRE(fs::exists(dir.path() / "hf"));
  auto hf = load_model(dir.path() / "hf");
  REQUIRE(hf.has_value());
  CHECK_FALSE(hf->config.tied_output);
  const std::vector<std::int32_t> prompt{1, 40, 77, 200, 13, 99, 150, 7};
  const auto a = prompt_logits(std::move(*gguf), prompt);
  const auto b = prompt_logits(std::move(*hf), prompt);
  REQUIRE(a.size() == b.size());
  float max_abs = 0.0f, worst = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(a[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  INFO("largest logit " << max_abs << ", largest difference " << worst);
  CHECK(max_abs > 1.0f);
  CHECK(worst <= 1e-5f * std::max(1.0f, max_abs));
}
