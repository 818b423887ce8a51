#pragma once
// What each GGUF general.architecture means for the decoder: the features of
// ModelConfig it turns on and the <arch>.* keys beyond the common shape keys
// (llama.cpp's src/llama-arch.cpp names them). Internal to the GGUF loader.
#include "gpu/formats/gguf_file.hpp"
#include "gpu/model/model_config.hpp"
#include "runtime/error.hpp"

#include <string>

namespace pensieve::model {

// The architectures this engine runs, for error messages.
inline constexpr const char* supported_gguf_architectures = "llama, qwen2, qwen3, phi3, gemma2, gemma3";

// Sets the features of c.architecture before the shape keys are read; an
// unknown architecture is an error that names it.
Result<void> architecture_features(const GgufFile& file, ModelConfig& c);

// Reads the architecture's own keys (sliding window, soft-capping, longrope
// attention factor) once the shape keys are in c.
Result<void> architecture_keys(const GgufFile& file, ModelConfig& c);

}  // namespace pensieve::model
