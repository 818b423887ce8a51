#pragma once
// Tensor parallelism on CUDA behind PagedForward (`--tp N --backend cuda`):
// N ranks, rank r on device r, each owning its device's stream, its
// NcclCollective on that stream, its CudaForward over shard r of the model
// (model/tp_shard.hpp: the CPU TP path's sharding) and its CudaKvPool of its
// KV heads with the scheduler's block ids. A pass runs every rank at once,
// one persistent thread per rank (TpRankThreads; rank 0 on the caller's
// thread), each setting its device first; the ranks meet in the NCCL
// all-reduces after the O and down products and the logits all-gather
// (model/tp_plan.hpp). Rank 0's logits are returned.
//
// No host KV tier yet (the swap engine moves one pool's chunks), so the KV
// stays on the devices. Multi-GPU runs are untested until a multi-GPU
// machine is available; one rank runs through NCCL in tests/gpu/cuda_tp_test.cpp.
//
// Not thread-safe: one call at a time, from the thread that drives rank 0.
#include "gpu/backend/cuda/cuda_forward.hpp"
#include "gpu/backend/cuda/cuda_kv_pool.hpp"
#include "gpu/backend/cuda/nccl_collective.hpp"
#include "gpu/backend/paged_forward.hpp"
#include "gpu/model/tp_rank_threads.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace pensieve::backend::cuda {

class CudaTpPagedForward final : public PagedForward {
 public:
  // Errors: fewer devices than ranks, a model that does not split N ways,
  // NCCL or device errors, a budget under one block.
  static Result<std::unique_ptr<CudaTpPagedForward>> create(const model::ModelWeights& weights,
                                                            const PagedForwardOptions& options);
  ~CudaTpPagedForward() override;

  const model::ModelConfig& config() const override { return config_; }
  const kv::KvPoolConfig& pool_config() const override { return ranks_.front().pool->config(); }
  std::int32_t ranks() const override { return std::int32_t(ranks_.size()); }
  std::shared_ptr<kv::KvPool> host_pool() const override { return nullptr; }
  bool supports_host_tier() const override { return false; }
  Result<void> poison(kv::BlockId block) override;
  Result<void> copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t tokens) override;
  Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                             const model::CpuForward::LayerHook& before_layer) override;

 private:
  struct Rank {
    int device = 0;
    cudaStream_t stream = nullptr;
    std::unique_ptr<NcclCollective> nccl;
    std::unique_ptr<CudaForward> forward;  // before the stream's destruction, after nccl's
    std::optional<CudaKvPool> pool;
  };
  explicit CudaTpPagedForward(model::ModelConfig config) : config_(std::move(config)) {}
  // Runs part(rank) on every rank's thread with its device current.
  Result<void> on_every_rank(const std::function<Result<void>(Rank&)>& part);

  model::ModelConfig config_;
  std::vector<Rank> ranks_;
  std::unique_ptr<model::TpRankThreads> threads_;
};

}  // namespace pensieve::backend::cuda
