#pragma once
// Tensor parallelism on the CPU backend: N CpuForward shards of one model
// (tp_shard.hpp) joined by a HostCollectiveGroup, run together, one thread
// per rank, for each batch. The arithmetic is the sharded forward pass a
// multi-GPU worker set runs with NCCL; here it is exercised without a GPU.
//
// Each rank has its own KV pool holding only its KV heads (kv_pool_config()
// gives that layout); the caller allocates the same block ids in every pool
// (one BlockAllocator can serve them all). Every rank returns the gathered
// logits; rank 0's are returned.
//
// Owns the shards, the collective group and one persistent thread per rank
// beyond the caller's (TpRankThreads; rank 0 runs on the calling thread).
// Not thread-safe: one call at a time, from the owner's thread.
#include "gpu/model/host_collective.hpp"
#include "gpu/model/cpu_forward.hpp"
#include "gpu/model/tp_rank_threads.hpp"

#include <memory>
#include <span>
#include <vector>

namespace pensieve::model {

class TpForward {
 public:
  // Shards `full` `ranks` ways (errors: ranks not dividing the heads, the KV
  // heads or ff_dim); options apply to every rank (n_threads is per rank).
  static Result<TpForward> create(const ModelWeights& full, std::int32_t ranks,
                                  CpuForwardOptions options = {});

  std::int32_t ranks() const { return std::int32_t(shards_.size()); }
  const ModelConfig& config() const { return config_; }  // the whole model's
  const ModelConfig& shard_config() const { return shards_.front().config(); }
  CpuForward& shard(std::int32_t rank) { return shards_[std::size_t(rank)]; }

  // One rank's pool layout: n_kv_heads / ranks heads per layer.
  kv::KvPoolConfig kv_pool_config(std::int32_t num_blocks, std::int32_t block_tokens,
                                  kv::KvDType dtype = kv::KvDType::f32) const {
    return shards_.front().kv_pool_config(num_blocks, block_tokens, dtype);
  }

  // Runs the batch on every rank; pools[r] is rank r's pool, all of the
  // same layout. Errors (a bad batch, a pool of the wrong layout) leave
  // every pool unchanged. `before_layer` runs on rank 0 only (the calling
  // thread) before its layer l; the other ranks meet rank 0 at layer l's
  // first all-reduce, after their attention has read their own pools.
  Result<ForwardOutput> forward_paged(std::span<const PagedSequence> batch,
                                      std::span<kv::KvPool* const> pools,
                                      const CpuForward::LayerHook& before_layer = {});

 private:
  TpForward(ModelConfig config, std::unique_ptr<model::HostCollectiveGroup> group,
            std::vector<CpuForward> shards)
      : config_(std::move(config)),
        group_(std::move(group)),
        shards_(std::move(shards)),
        threads_(std::make_unique<TpRankThreads>(std::int32_t(shards_.size()))) {}

  ModelConfig config_;
  std::unique_ptr<model::HostCollectiveGroup> group_;  // shards_ point into it
  std::vector<CpuForward> shards_;
  std::unique_ptr<TpRankThreads> threads_;  // idle between calls
};

}  // namespace pensieve::model
