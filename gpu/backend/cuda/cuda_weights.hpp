#pragma once
// A model's weights in device memory, as the CUDA forward pass reads them:
// matrices in the compute dtype (F16 or BF16, converted on load), with Q, K
// and V stacked into one {q_dim + 2 kv_dim, dim} matrix and gate and up into
// one {2 ff_dim, dim} (one product each instead of three and two); norms,
// biases and RoPE frequencies in F32. One allocation (an arena) holds all.
// Immutable after upload; read by the stream the forward pass runs on.
#include "gpu/backend/cuda/device_memory.hpp"
#include "gpu/kv/paged_kv_view.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::backend::cuda {

struct DeviceLayer {
  const void* w_qkv = nullptr;      // {q_dim + 2 kv_dim, dim}
  const void* w_o = nullptr;        // {dim, q_dim}
  const void* w_gate_up = nullptr;  // {2 ff_dim, dim}: gate rows, then up rows
  const void* w_down = nullptr;     // {dim, ff_dim}
  const float* attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* b_qkv = nullptr;  // null without biases
};

struct DeviceWeights {
  model::ModelConfig config;
  kv::KvDType dtype = kv::KvDType::bf16;
  const void* token_embedding = nullptr;  // {vocab, dim}
  const void* output = nullptr;           // {vocab, dim}; token_embedding when tied
  const float* output_norm = nullptr;
  const float* inv_freq = nullptr;  // rope_dims / 2
  std::vector<DeviceLayer> layers;
  // Bytes of every matrix a decode step reads (layers and output head): the
  // numerator of decode's achieved bandwidth.
  std::size_t matrix_bytes_per_token = 0;
  MemoryArena arena;
};

// Checks the weights (shapes, types: as the CPU forward pass does), converts
// them to `dtype` (f16 or bf16) and copies them to the current device.
Result<DeviceWeights> upload_weights(const model::ModelWeights& weights, kv::KvDType dtype);

// Weights of this config drawn on the device (uniform, deterministic per
// seed), with no host copy: for benchmarks of models too big to generate on
// the host quickly. Untied output head unless config.tied_output.
Result<DeviceWeights> random_weights(const model::ModelConfig& config, kv::KvDType dtype,
                                     std::uint64_t seed);

}  // namespace pensieve::backend::cuda
