#pragma once
// GGUF model files (llama.cpp's format) -> ModelWeights, for the `llama`
// (Llama 2/3, TinyLlama, Mistral, SmolLM) and `qwen2` architectures.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <filesystem>

namespace pensieve::model {

// The hyper-parameters in <arch>.* metadata. Rope style: llama.cpp's converter
// permutes llama's Q/K rows so the "normal" (interleaved) rope is right for
// them; qwen2 uses "neox" (half-split).
Result<ModelConfig> config_from_gguf(const GgufFile& file);

// Views every tensor in the file's mapping (no copies) and checks each shape
// against the config. Tied output when output.weight is absent.
Result<ModelWeights> weights_from_gguf(const GgufFile& file);

Result<ModelWeights> load_gguf(const std::filesystem::path& path);

}  // namespace pensieve::model
