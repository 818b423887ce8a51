#pragma once
// Hugging Face config.json -> ModelConfig for LlamaForCausalLM,
// MistralForCausalLM and Qwen2ForCausalLM. Hugging Face checkpoints keep Q/K
// in the order of rotate_half, so their rope style is always half_split.
#include "gpu/model/model_config.hpp"
#include "runtime/error.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace pensieve::model {

// `label` names the file in errors.
Result<ModelConfig> parse_hf_config(std::string_view json_text, const std::string& label);
Result<ModelConfig> read_hf_config(const std::filesystem::path& config_json);

// Reads a whole small text file (config.json, tokenizer.json); an Error names it.
Result<std::string> read_text_file(const std::filesystem::path& path);

}  // namespace pensieve::model
