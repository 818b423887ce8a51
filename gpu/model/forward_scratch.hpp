#pragma once
// Internal to the CPU forward pass: the weights as the kernels take them
// (views, F32 copies of norms and biases, rope frequencies) and the
// activation buffers reused between calls.
#include "gpu/kernels/cpu/attention.hpp"
#include "gpu/kernels/cpu/rope.hpp"
#include "gpu/kernels/cpu/views.hpp"
#include "gpu/model/model_weights.hpp"
#include "gpu/model/tp_rank.hpp"
#include "runtime/error.hpp"

#include <vector>

namespace pensieve::model {

struct PreparedLayer {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> bq, bk, bv;  // empty without biases
  std::vector<float> q_norm, k_norm;                 // empty without config.qk_norm
  std::vector<float> post_attn_norm, post_ffn_norm;  // empty without config.post_norms
  std::int32_t window = 0;                           // config.layer_window(l)
  bool windowed_rope = false;                        // rope with inv_freq_windowed
  kernels::cpu::WeightView wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct PreparedWeights {
  kernels::cpu::WeightView token_embedding, output;
  std::vector<float> output_norm;
  std::vector<PreparedLayer> layers;
  kernels::cpu::RopeParams rope_q, rope_k;
  std::vector<float> inv_freq;
  // The windowed layers' own rope (config.rope_theta_windowed: gemma3).
  kernels::cpu::RopeParams rope_q_windowed, rope_k_windowed;
  std::vector<float> inv_freq_windowed;
  kernels::cpu::AttentionParams attention;
};

// Checks shapes and types against the config, naming the first bad tensor.
// A tensor-parallel shard's output head holds tp.vocab_rows() rows.
Result<PreparedWeights> prepare_weights(const ModelWeights& w, TpRank tp = {});

struct ForwardScratch {
  std::vector<std::int32_t> tokens, positions;
  std::vector<float> x, xn, q, k, v, att, tmp, gate, up, rounded;

  void resize(std::size_t n_tokens, const ModelConfig& c);
};

}  // namespace pensieve::model
