#pragma once
// A loaded model: its config and views of every weight tensor. The storage
// (an mmap of the file, or a heap buffer) lives as long as any copy of this.
#include "gpu/model/model_config.hpp"
#include "gpu/formats/tensor.hpp"
#include "gpu/text/tokenizer_data.hpp"

#include <memory>
#include <optional>
#include <vector>

namespace pensieve::model {

struct LayerWeights {
  Tensor attn_norm;         // {dim}
  Tensor wq, wk, wv, wo;    // {q_dim, dim}, {kv_dim, dim}, {kv_dim, dim}, {dim, q_dim}
  Tensor bq, bk, bv;        // qwen2 only; absent otherwise
  Tensor q_norm, k_norm;    // {head_dim}, config.qk_norm only (GGUF attn_q_norm, attn_k_norm)
  Tensor post_attn_norm;    // {dim}, config.post_norms only (GGUF post_attention_norm)
  Tensor ffn_norm;          // {dim}
  Tensor w_gate, w_up;      // {ff_dim, dim}
  Tensor w_down;            // {dim, ff_dim}
  Tensor post_ffn_norm;     // {dim}, config.post_norms only (GGUF post_ffw_norm)
};

struct ModelWeights {
  ModelConfig config;
  Tensor token_embedding;  // {vocab, dim}
  std::vector<LayerWeights> layers;
  Tensor output_norm;      // {dim}
  Tensor output;           // {vocab, dim}; the token embedding when tied
  Tensor rope_freqs;       // {rope_dims / 2} F32 divisors of each rope frequency (Llama 3.1
                           // GGUF "rope_freqs.weight"; Phi-3's rope_factors_long or _short,
                           // whichever the loader chose); absent for most models
  std::optional<TokenizerData> tokenizer;  // when the file carries one
  std::shared_ptr<const void> storage;     // keeps `data` pointers valid
};

}  // namespace pensieve::model
