#pragma once
// One entry point for every model format, chosen by content, not by name:
// a GGUF file (magic "GGUF"), a Hugging Face directory (config.json with
// safetensors), or a llama2.c checkpoint (any other regular file).
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <filesystem>
#include <string>

namespace pensieve::model {

enum class ModelFormat : std::uint8_t { gguf, hf_directory, llama2c };

const char* model_format_name(ModelFormat f);

// Sniffs the format; an Error when the path is missing or is a directory without config.json.
Result<ModelFormat> detect_model_format(const std::filesystem::path& path);

Result<ModelWeights> load_model(const std::filesystem::path& path);

}  // namespace pensieve::model
