#pragma once
// The one-layer model that the soak test (tests/net/soak_test.cpp) and
// `fe-latency --model one-layer` both serve, one definition so that their
// latencies compare: 1 layer, dim 32, F32, the built-in vocabulary (what
// model::generate_test_model uses when no vocab_from is given). Its compute
// is negligible next to the front end's work.
#include "gpu/model/test_model.hpp"

namespace pensieve::bench {

inline model::TestModelOptions one_layer_model_options() {
  model::TestModelOptions o;
  o.n_layers = 1;
  o.dim = 32;
  o.n_heads = 2;
  o.n_kv_heads = 1;
  o.ff_dim = 64;
  o.max_context = 256;
  o.dtype = model::DType::f32;
  o.seed = 3;
  o.name = "tiny";
  return o;
}

}  // namespace pensieve::bench
