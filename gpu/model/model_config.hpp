#pragma once
// The hyper-parameters of a decoder of the Llama family and its relatives
// (Qwen, Mistral, Phi-3, Gemma), whatever file they came from. The
// architectures differ only in the optional features below; the forward pass
// reads the features, never the architecture's name.
#include "gpu/kernels/rope_scaling.hpp"

#include <cmath>
#include <cstdint>
#include <string>

namespace pensieve::model {

using kernels::RopeScaling;
using kernels::RopeScalingType;
using kernels::RopeStyle;

// The MLP's gate activation: act(gate) * up.
enum class FfnActivation : std::uint8_t {
  silu,       // SwiGLU (llama, qwen, mistral, phi3)
  gelu_tanh,  // GeGLU with GELU's tanh approximation (gemma)
};

struct ModelConfig {
  // The GGUF general.architecture: llama, qwen2, qwen3, phi3, gemma2, gemma3
  // (Mistral files say llama).
  std::string architecture = "llama";
  std::string name;
  std::int32_t n_layers = 0;
  std::int32_t dim = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;  // need not be dim / n_heads (qwen3, gemma)
  std::int32_t ff_dim = 0;
  std::int32_t vocab_size = 0;
  std::int32_t max_context = 2048;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  std::int32_t rope_dims = 0;  // dimensions rotated per head (head_dim unless set)
  RopeStyle rope_style = RopeStyle::interleaved;
  RopeScaling rope_scaling;
  bool tied_output = false;  // the output head reuses the token embedding
  bool qkv_bias = false;     // qwen2

  // RMSNorm over each head of q and of k before RoPE (qwen3, gemma3).
  bool qk_norm = false;
  // RMSNorm of the attention output and of the MLP output before each is
  // added to the residual (gemma2, gemma3).
  bool post_norms = false;
  FfnActivation ffn_activation = FfnActivation::silu;
  float embedding_scale = 1.0f;  // the token embedding is multiplied by it (gemma: sqrt(dim))
  float attention_scale = 0.0f;  // softmax scale of q.k; 0: 1 / sqrt(head_dim)
  float attn_logit_softcap = 0.0f;   // scores become cap * tanh(s / cap); 0: none (gemma2)
  float final_logit_softcap = 0.0f;  // the same on the logits (gemma2)
  // Sliding-window attention: a windowed layer's query at position p sees
  // keys (p - sliding_window, p]. 0: every layer sees the whole context.
  // sliding_window_pattern 0: every layer is windowed (mistral, phi3); n:
  // layer l is windowed unless l % n == n - 1 (gemma2: 2, gemma3: 6).
  std::int32_t sliding_window = 0;
  std::int32_t sliding_window_pattern = 0;
  // RoPE base of the windowed layers, unscaled (gemma3: 10000); 0: the
  // global rope_theta and rope_scaling for every layer.
  float rope_theta_windowed = 0.0f;

  std::int32_t kv_dim() const { return n_kv_heads * head_dim; }
  std::int32_t q_dim() const { return n_heads * head_dim; }
  // The window of layer l, 0 when it attends to everything.
  std::int32_t layer_window(std::int32_t l) const {
    if (sliding_window <= 0) return 0;
    if (sliding_window_pattern <= 0) return sliding_window;
    return l % sliding_window_pattern == sliding_window_pattern - 1 ? 0 : sliding_window;
  }
  float softmax_scale() const {
    return attention_scale > 0.0f ? attention_scale : 1.0f / std::sqrt(float(head_dim));
  }
};

}  // namespace pensieve::model
