#pragma once
// The Llama-family decoder on the CPU (llama, qwen2), over a ragged batch:
// several sequences, each with its new tokens, its start position and its
// KV cache, in one call. Embedding, RMSNorm, RoPE, grouped-query attention,
// SwiGLU MLP, output head; Q/K/V biases when the model has them; tied output.
//
// Batch invariance: a sequence's logits have the same bits whatever else is
// in the batch and however its prompt was chunked, because every kernel keeps
// each output element's reduction order independent of the batch (see
// gpu/kernels/cpu/matmul.hpp and attention.hpp).
//
// Owns its thread pool and scratch buffers; shares the weights' storage.
// Not thread-safe: one forward() at a time, from the owner's thread.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/model/forward_scratch.hpp"
#include "gpu/model/kv_contiguous.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace pensieve::model {

struct CpuForwardOptions {
  std::size_t n_threads = 0;  // 0: the hardware's thread count
  // Round matmul activations to F16 for F16 weights, as llama.cpp's CPU
  // backend does (brings logits within ~0.03 of it instead of ~0.14).
  bool round_f16_activations = true;
  std::int32_t kv_tile_tokens = 32;  // attention's fixed KV tile
  // Kernel loops cheaper than this (about multiply-adds) stay on one thread;
  // 0 sends every loop through the pool (tests of thread invariance).
  double min_parallel_cost = kernels::cpu::ThreadPool::default_min_parallel_cost;
};

// One sequence's part of a batch.
struct ForwardSequence {
  std::span<const std::int32_t> tokens;  // the new tokens, at least one
  std::int32_t start_pos = 0;            // position of tokens[0]; <= kv->size_tokens()
  ContiguousKvCache* kv = nullptr;       // written at [start_pos, start_pos + tokens.size())
  bool all_logits = false;               // logits for every new token, else the last only
};

// Logits rows, {rows, vocab}, in batch order: sequence s owns rows
// [first_row[s], first_row[s + 1]), one per requested position.
struct ForwardOutput {
  std::int32_t vocab_size = 0;
  std::vector<float> logits;
  std::vector<std::size_t> first_row;
  std::vector<std::int32_t> row_position;  // the position each row predicts from

  std::size_t rows() const { return row_position.size(); }
  std::span<const float> row(std::size_t r) const {
    return {logits.data() + r * std::size_t(vocab_size), std::size_t(vocab_size)};
  }
  // The logits after sequence s's last new token.
  std::span<const float> last(std::size_t s) const { return row(first_row[s + 1] - 1); }
};

class CpuForward {
 public:
  // Checks that every tensor has the shape and a type the kernels support.
  static Result<CpuForward> create(ModelWeights weights, CpuForwardOptions options = {});

  const ModelConfig& config() const { return weights_.config; }
  std::size_t n_threads() const { return pool_->size(); }

  // A cache for one sequence of up to max_tokens tokens (<= max_context is
  // not required: the caller decides).
  ContiguousKvCache make_kv_cache(std::int32_t max_tokens) const {
    return ContiguousKvCache(weights_.config, max_tokens);
  }

  // Runs the batch. Errors (bad token id, start past the cached tokens, a
  // cache too small) leave every cache unchanged.
  Result<ForwardOutput> forward(std::span<const ForwardSequence> batch);

 private:
  CpuForward(ModelWeights weights, CpuForwardOptions options, PreparedWeights prepared);
  Result<void> validate(std::span<const ForwardSequence> batch) const;
  void layer(std::int32_t l, std::span<const ForwardSequence> batch);
  void output_head(std::span<const ForwardSequence> batch, ForwardOutput& out);

  ModelWeights weights_;
  CpuForwardOptions options_;
  PreparedWeights prepared_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  ForwardScratch scratch_;
};

}  // namespace pensieve::model
