#include "bench/fe-latency/served_model.hpp"

#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tools/pensieve/default_model.hpp"

#include <filesystem>

namespace pensieve::bench {

namespace {

// The soak test's shape: 1 layer, dim 32, the built-in vocabulary.
Result<model::ModelWeights> one_layer_model() {
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
  return model::generate_test_model(o);
}

}  // namespace

Result<model::ModelWeights> load_served_model(const std::string& spec) {
  if (spec == one_layer_model_spec) return one_layer_model();
  if (spec == builtin_model_spec) {
    auto path = server::ensure_default_model(server::default_cache_dir());
    if (!path) return path.error();
    return model::load_model(*path);
  }
  if (!std::filesystem::is_regular_file(spec))
    return fail("--model " + spec + ": not a file (nor one-layer or builtin)");
  return model::load_model(spec);
}

}  // namespace pensieve::bench
