#pragma once
// The Llama-family decoder on the CPU (llama, qwen2/3, mistral, phi3,
// gemma2/3), over a ragged batch: several sequences, each with its new
// tokens, its start position and its KV cache, in one call. Embedding,
// RMSNorm, RoPE, grouped-query attention, SwiGLU or GeGLU MLP, output head;
// and where the config asks (model_config.hpp): Q/K/V biases, per-head q/k
// norms, post-attention and post-MLP norms, embedding scaling, sliding-window
// layers, attention and final logit soft-capping, rope frequency divisors.
//
// Batch invariance: a sequence's logits have the same bits whatever else is
// in the batch and however its prompt was chunked, because every kernel keeps
// each output element's reduction order independent of the batch (see
// gpu/kernels/cpu/matmul.hpp and attention.hpp).
//
// Tensor parallelism: given a shard of the weights (tp_shard.hpp) and a
// Collective, the pass all-reduces the partial sums after attention's O
// projection and after the MLP's down projection, and all-gathers the
// logits slices, so every rank returns the whole logits (TpForward runs the
// ranks together, gpu/model/tp_forward.hpp). Everything else is unchanged.
//
// Owns its thread pool and scratch buffers; shares the weights' storage.
// Not thread-safe: one forward() at a time, from the owner's thread.
#include "gpu/model/collective.hpp"
#include "gpu/kernels/cpu/attention_workspace.hpp"
#include "gpu/kernels/cpu/paged_attention_plan.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kv/block_id.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/forward_scratch.hpp"
#include "gpu/model/kv_contiguous.hpp"
#include "gpu/model/model_weights.hpp"
#include "gpu/model/tp_rank.hpp"
#include "gpu/model/weight_arena.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace pensieve::model {

struct CpuForwardOptions {
  std::size_t n_threads = 0;  // 0: the hardware's thread count
  // Round matmul activations to F16 for F16 weights, as llama.cpp's CPU
  // backend does (brings logits within ~0.03 of it instead of ~0.14).
  bool round_f16_activations = true;
  // Quantised weights on F32 activations (the F32 matmul on their
  // dequantised values) instead of the default, llama.cpp's numerics: the
  // activations quantised as ggml does per weight type (Q8_0, Q8_1 or Q8_K
  // blocks) and integer block dot products (kernels/cpu/matmul.hpp).
  bool float_activations = false;
  std::int32_t kv_tile_tokens = 32;  // attention's fixed KV tile
  // Kernel loops cheaper than this (about multiply-adds) stay on one thread;
  // 0 sends every loop through the pool (tests of thread invariance).
  double min_parallel_cost = kernels::cpu::ThreadPool::default_min_parallel_cost;
  // Copy the weights into anonymous memory on 2 MiB pages at create()
  // (weight_arena.hpp): a decode step streams them much faster than from a
  // file mapping's 4 KiB pages. Without memory for the copy the pass reads
  // the loader's memory instead (never an error). create() prints the
  // placement (weight_placement().describe()) to stderr when logging.
  bool weights_on_huge_pages = true;
  bool log_weight_placement = true;
  // Tensor parallelism: the weights are shard tp.rank of tp.ranks, and
  // `collective` (not owned; required when tp.ranks > 1, its rank and size
  // equal tp's) joins the ranks. Every rank must run the same batches.
  TpRank tp;
  model::Collective* collective = nullptr;
};

// One sequence's part of a batch.
struct ForwardSequence {
  std::span<const std::int32_t> tokens;  // the new tokens, at least one
  std::int32_t start_pos = 0;            // position of tokens[0]; <= kv->size_tokens()
  ContiguousKvCache* kv = nullptr;       // written at [start_pos, start_pos + tokens.size())
  bool all_logits = false;               // logits for every new token, else the last only
};

// One sequence's part of a batch over a paged KV pool (the serving path):
// the blocks hold positions [0, start_pos) already and have room for the new
// tokens, which the pass writes at positions [start_pos, start_pos + n).
struct PagedSequence {
  std::span<const std::int32_t> tokens;  // the new tokens, at least one
  std::int32_t start_pos = 0;
  std::span<const kv::BlockId> blocks;   // logical block j -> physical block
  bool all_logits = false;
};

// What every backend requires of a paged batch: the pool's layout fits the
// model; each sequence has tokens, a position >= 0, blocks enough for its
// end, block ids inside the pool and token ids inside the vocabulary.
Result<void> validate_paged_batch(std::span<const PagedSequence> batch, const ModelConfig& config,
                                  const kv::KvPoolConfig& pool);

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
  // The pass's threads, idle between passes: the owner of the forward may
  // run host work on them then (the GPU worker's sampling), from the thread
  // that runs the passes.
  kernels::cpu::ThreadPool& threads() { return *pool_; }
  // Where the weights live (options.weights_on_huge_pages).
  const WeightPlacement& weight_placement() const { return placement_; }

  // A cache for one sequence of up to max_tokens tokens (<= max_context is
  // not required: the caller decides).
  ContiguousKvCache make_kv_cache(std::int32_t max_tokens) const {
    return ContiguousKvCache(weights_.config, max_tokens);
  }

  // Runs the batch. Errors (bad token id, start past the cached tokens, a
  // cache too small) leave every cache unchanged.
  Result<ForwardOutput> forward(std::span<const ForwardSequence> batch);

  // The same over a paged pool (one KvPool layer per model layer, F32, F16
  // or BF16). With an F32 pool and the same kv tile, a sequence's logits
  // have the same bits as forward() gives with a contiguous cache. Sequences
  // must not share a block they write to (the caller copies on write first).
  //
  // `before_layer` (optional) runs on the calling thread before layer l
  // touches anything: the pipelined swap-in waits there for layer l's
  // chunks to land (the GPU worker; on CUDA a cudaStreamWaitEvent instead).
  using LayerHook = std::function<void(std::int32_t layer)>;
  Result<ForwardOutput> forward_paged(std::span<const PagedSequence> batch, kv::KvPool& pool,
                                      const LayerHook& before_layer = {});

  // The pool layout this model needs (the caller picks blocks and dtype).
  kv::KvPoolConfig kv_pool_config(std::int32_t num_blocks, std::int32_t block_tokens,
                                  kv::KvDType dtype = kv::KvDType::f32) const;

 private:
  CpuForward(ModelWeights weights, CpuForwardOptions options, PreparedWeights prepared,
             WeightPlacement placement);
  Result<void> validate(std::span<const ForwardSequence> batch) const;
  Result<void> validate_paged(std::span<const PagedSequence> batch, const kv::KvPool& pool) const;
  // Stores the new K/V and attends; q, k, v are the batch's rows after RoPE.
  using AttendFn = std::function<void(std::int32_t layer)>;
  template <class Seq>
  void gather_tokens(std::span<const Seq> batch);
  Result<void> layer(std::int32_t l, const AttendFn& attend);
  // Sums a row-parallel projection's partial rows across ranks (no-op at 1).
  Result<void> all_reduce(std::vector<float>& rows, std::size_t n_rows);
  void attend_contiguous(std::int32_t l, std::span<const ForwardSequence> batch);
  void attend_paged(std::int32_t l, std::span<const PagedSequence> batch, kv::KvPool& pool);
  struct OutputRow {
    std::size_t n_tokens;
    std::int32_t start_pos;
    bool all_logits;
  };
  Result<ForwardOutput> output_head(std::span<const OutputRow> seqs);
  // Projects the selected rows onto this rank's vocabulary slice and
  // gathers every rank's slice into out.logits.
  Result<void> sharded_logits(kernels::cpu::ConstRowsView rows, ForwardOutput& out);

  ModelWeights weights_;
  CpuForwardOptions options_;
  PreparedWeights prepared_;
  WeightPlacement placement_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  ForwardScratch scratch_;
  // Paged attention's per-batch inputs and workspace, reused across calls.
  std::vector<std::int32_t> q_start_, context_tokens_, block_table_;
  std::vector<std::int64_t> slots_;
  kernels::cpu::AttentionWorkspace attention_workspace_;
  kernels::AttentionPlan plan_;  // planned at layer 0, shared by every layer
  std::vector<float> slice_logits_, gathered_logits_;  // tensor parallelism's output head
};

}  // namespace pensieve::model
