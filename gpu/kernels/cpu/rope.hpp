#pragma once
// Rotary position embedding, in place, over the heads of each token's row.
// Interleaved rotates (x[2i], x[2i+1]) (llama2.c, GGUF llama); half-split
// rotates (x[i], x[i + rope_dims/2]) (Hugging Face rotate_half, qwen2).
// Only the first rope_dims dimensions of a head rotate.
#include "gpu/kernels/cpu/views.hpp"
#include "gpu/kernels/rope_scaling.hpp"

#include <span>
#include <vector>

namespace pensieve::kernels::cpu {

struct RopeParams {
  std::int32_t n_heads = 0;    // heads in each row
  std::int32_t head_dim = 0;
  std::int32_t rope_dims = 0;  // <= head_dim, even
  float theta = 10000.0f;
  RopeStyle style = RopeStyle::interleaved;
  RopeScaling scaling;
};

// The rope_dims/2 inverse frequencies theta^(-2i/rope_dims), with linear or
// llama3 scaling applied, each divided by divisors[i] where given (GGUF
// rope_freqs of Llama 3.1+, rope_factors_long/short of Phi-3: ggml's
// freq_factors).
std::vector<float> rope_inv_freq(const RopeParams& params, std::span<const float> divisors = {});

// rows: {n_tokens, n_heads * head_dim}; positions[t] is row t's position.
void rope(const RopeParams& params, std::span<const float> inv_freq, RowsView rows,
          std::span<const std::int32_t> positions);

}  // namespace pensieve::kernels::cpu
