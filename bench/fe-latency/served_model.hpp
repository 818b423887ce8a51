#pragma once
// The model fe-latency serves, chosen by --model: "one-layer" (a generated
// 1-layer, dim-32 model, so the scheduler is fast and the front end is what
// is measured), "builtin" (the generated default model `pensieve` serves
// without --model) or the path of a GGUF file.
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <string>

namespace pensieve::bench {

inline constexpr const char* one_layer_model_spec = "one-layer";
inline constexpr const char* builtin_model_spec = "builtin";

Result<model::ModelWeights> load_served_model(const std::string& spec);

}  // namespace pensieve::bench
