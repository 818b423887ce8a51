#pragma once
// A small generated Llama model with the built-in vocabulary, for tests that
// need a real engine behind a server (model::generate_test_model). Defaults:
// 2 layers, dim 64, F32, named "tiny".
#include "gpu/model/test_model.hpp"

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

inline model::ModelWeights tiny_model(const model::TestModelOptions& o = tiny_model_options()) {
  auto w = model::generate_test_model(o);
  if (!w) FAIL(w.error().message);
  return std::move(*w);
}

}  // namespace pensieve::testing
