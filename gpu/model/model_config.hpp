#pragma once
// The hyper-parameters of a Llama-family decoder, whatever file they came from.
#include "gpu/kernels/rope_scaling.hpp"

#include <cstdint>
#include <string>

namespace pensieve::model {

using kernels::RopeScaling;
using kernels::RopeScalingType;
using kernels::RopeStyle;

struct ModelConfig {
  std::string architecture = "llama";  // "llama" or "qwen2"
  std::string name;
  std::int32_t n_layers = 0;
  std::int32_t dim = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
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

  std::int32_t kv_dim() const { return n_kv_heads * head_dim; }
  std::int32_t q_dim() const { return n_heads * head_dim; }
};

}  // namespace pensieve::model
