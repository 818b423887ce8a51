#pragma once
// GGUF model files (llama.cpp's format) -> ModelWeights, for the `llama`
// (Llama 2/3/3.1/3.2, TinyLlama, Mistral, SmolLM), `qwen2`, `qwen3`, `phi3`,
// `gemma2` and `gemma3` architectures (gguf_architecture.hpp).
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <filesystem>

namespace pensieve::model {

// The hyper-parameters in <arch>.* metadata. Rope style: llama.cpp's converter
// permutes llama's Q/K rows so the "normal" (interleaved) rope is right for
// them; the others use "neox" (half-split). Gemma's norms are used as
// stored: llama.cpp's converter has already added Gemma's 1 to them.
Result<ModelConfig> config_from_gguf(const GgufFile& file);

// Views every tensor in the file's mapping (no copies) and checks each shape
// against the config. Tied output when output.weight is absent. Phi-3's
// fused attn_qkv and gate+up ffn_up become row views of q/k/v and gate/up.
Result<ModelWeights> weights_from_gguf(const GgufFile& file);

Result<ModelWeights> load_gguf(const std::filesystem::path& path);

}  // namespace pensieve::model
