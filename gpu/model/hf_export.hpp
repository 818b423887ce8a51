#pragma once
// Writes a loaded model as a Hugging Face directory (config.json,
// model.safetensors and, when the model has a vocabulary, tokenizer.json and
// tokenizer_config.json): the same model in the other layout.
//
// The Q/K row order. llama.cpp's converter permutes each head's Q and K rows
// from Hugging Face's rotate_half order to the interleaved order its "normal"
// rope expects: GGUF row h*d + 2i + j holds HF row h*d + j*(d/2) + i
// (i < d/2, j in {0, 1}). Exporting an interleaved-rope model (a llama GGUF)
// applies the inverse, so the HF directory loaded with half_split rope computes
// exactly the same logits. A half_split model (qwen2) is exported unpermuted.
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <cstddef>
#include <filesystem>
#include <vector>

namespace pensieve::model {

// The rows of a {n_heads * head_dim, ...} tensor (or {n_heads * head_dim}
// vector) reordered from interleaved (GGUF llama) to rotate_half (HF) order.
std::vector<std::byte> interleaved_to_half_split_rows(const Tensor& t, std::int32_t n_heads);

// F32/F16/BF16 tensors are written as they are; Q8_0 ones are dequantised to
// F32. Other quantised types are an Error. Tied models get no lm_head.
Result<void> export_hf_directory(const ModelWeights& weights, const std::filesystem::path& dir);

}  // namespace pensieve::model
