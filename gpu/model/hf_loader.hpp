#pragma once
// A Hugging Face model directory -> ModelWeights: config.json, then
// model.safetensors or the shards named by model.safetensors.index.json
// (F32/F16/BF16), and tokenizer.json + tokenizer_config.json when present.
// Weights are used as stored: Q/K keep the rotate_half row order
// (RopeStyle::half_split), never permuted.
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <filesystem>

namespace pensieve::model {

Result<ModelWeights> load_hf_directory(const std::filesystem::path& dir);

}  // namespace pensieve::model
