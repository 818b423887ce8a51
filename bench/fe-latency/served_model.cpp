#include "bench/fe-latency/served_model.hpp"

#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tools/pensieve/default_model.hpp"

#include <filesystem>
#include <system_error>

#include <unistd.h>

namespace pensieve::bench {

namespace {

// The soak test's shape: 1 layer, dim 32, the built-in vocabulary.
Result<model::ModelWeights> one_layer_model() {
  const auto dir = std::filesystem::temp_directory_path() / ("pensieve-fe-latency-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
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
  auto made = [&]() -> Result<model::ModelWeights> {
    if (auto r = model::write_builtin_vocab_gguf(dir / "vocab.gguf"); !r) return r.error();
    o.vocab_from = dir / "vocab.gguf";
    if (auto r = model::make_test_model(o, dir / "model.gguf"); !r) return r.error();
    return model::load_model(dir / "model.gguf");  // stays mapped after the files go
  }();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return made;
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
