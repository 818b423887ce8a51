#pragma once
// A small generated Llama model with the built-in vocabulary, for tests that
// need a real engine behind a server: writes the vocabulary and the model to
// a temporary folder and loads it (the weights stay mapped after the files
// go). Defaults: 2 layers, dim 64, F32, named "tiny".
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/temp_dir.hpp"

#include <catch2/catch.hpp>

namespace pensieve::testing {

inline model::TestModelOptions tiny_model_options() {
  model::TestModelOptions o;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 128;
  o.max_context = 256;
  o.dtype = model::DType::f32;
  o.seed = 7;
  o.name = "tiny";
  return o;
}

inline model::ModelWeights tiny_model(model::TestModelOptions o = tiny_model_options()) {
  TempDir dir("tiny-model");
  REQUIRE(model::write_builtin_vocab_gguf(dir / "vocab.gguf").has_value());
  o.vocab_from = dir / "vocab.gguf";
  REQUIRE(model::make_test_model(o, dir / "model.gguf").has_value());
  auto w = model::load_model(dir / "model.gguf");
  REQUIRE(w.has_value());
  return std::move(*w);
}

}  // namespace pensieve::testing
