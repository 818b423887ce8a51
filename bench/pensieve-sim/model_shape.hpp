#pragma once
// The shape of a model for pensieve-sim: what sets its per-token FLOPs, its
// weight bytes and its KV bytes per token. From a preset (opt-13b,
// llama-2-13b, llama-2-70b, llama-3-8b: their published configurations) or
// a GGUF file's metadata (no tensor is read).
#include "runtime/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::sim {

struct ModelShape {
  std::string name;
  std::int32_t n_layers = 0;
  std::int32_t dim = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  std::int32_t ff_dim = 0;
  std::int32_t vocab = 0;
  std::int32_t max_context = 2048;
  bool gated_mlp = true;          // gate, up and down (Llama); false: up and down (OPT)
  double bytes_per_weight = 2.0;  // FP16/BF16
  double bytes_per_kv = 2.0;      // FP16 KV

  // Parameters of the matrices every token multiplies (the output head included).
  double matrix_params() const;
  double weight_bytes() const { return matrix_params() * bytes_per_weight; }
  // K and V of one token, every layer.
  double kv_bytes_per_token() const { return 2.0 * n_layers * n_kv_heads * head_dim * bytes_per_kv; }
};

Result<ModelShape> model_preset(const std::string& name);
std::vector<std::string> model_presets();
// A preset name or a GGUF path (its <arch>.* shape keys).
Result<ModelShape> load_model_shape(const std::string& name_or_path);

}  // namespace pensieve::sim
