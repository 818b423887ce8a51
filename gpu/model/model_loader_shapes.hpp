#pragma once
// The shape every tensor of a Llama-family model must have, given its config;
// shared by the GGUF and Hugging Face loaders so both reject the same files.
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

namespace pensieve::model {

// Checks the config for consistency and every present tensor's shape and
// type against it; the Error names the tensor, its shape and the expected one.
Result<void> check_shapes(const ModelWeights& weights);

}  // namespace pensieve::model
