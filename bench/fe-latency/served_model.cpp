#include "bench/fe-latency/served_model.hpp"

#include "bench/common/one_layer_model.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tools/pensieve/default_model.hpp"

#include <filesystem>

namespace pensieve::bench {

Result<model::ModelWeights> load_served_model(const std::string& spec) {
  if (spec == one_layer_model_spec) return model::generate_test_model(one_layer_model_options());
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
