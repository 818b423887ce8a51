#pragma once
// The CUDA backend behind PagedForward: CudaForward over a device-memory
// CudaKvPool (in the compute dtype), logits copied to the host for the GPU
// worker's samplers. Block copies and poisoning are enqueued on the forward
// pass's stream, so they are ordered with the passes around them.
//
// The host tier: a kv::KvPool in pinned memory beside the device pool, with
// a CUDA copy stream per direction (device_tier_links); the swap engine
// moves chunks over them and the pass waits, on the device, for each layer's
// swap-in (gate_next_pass), never blocking the host.
//
// One rank; --tp N > 1 takes CudaTpPagedForward (cuda_tp_paged_forward.hpp:
// one GPU per rank over NCCL).
//
// Owns the forward pass (its stream, cuBLAS handle, weights) and the pool.
// Not thread-safe: one call at a time, from the thread that drives the stream.
#include "gpu/backend/cuda/cuda_forward.hpp"
#include "gpu/backend/cuda/cuda_kv_pool.hpp"
#include "gpu/backend/paged_forward.hpp"

namespace pensieve::backend::cuda {

class CudaPagedForward final : public PagedForward {
 public:
  CudaPagedForward(std::unique_ptr<CudaForward> forward, CudaKvPool pool)
      : forward_(std::move(forward)), pool_(std::move(pool)) {}

  const model::ModelConfig& config() const override { return forward_->config(); }
  const kv::KvPoolConfig& pool_config() const override { return pool_.config(); }
  std::int32_t ranks() const override { return 1; }
  std::shared_ptr<kv::KvPool> host_pool() const override { return nullptr; }
  bool supports_host_tier() const override { return true; }
  // The device pool's memory, a host tier in pinned memory (cudaHostAlloc,
  // so copies run asynchronously), a CUDA copy stream per direction.
  Result<std::optional<KvTierLinks>> device_tier_links(std::int32_t host_slots) override;
  bool gates_on_device() const override { return true; }
  void gate_next_pass(std::vector<rt::Event> layer_ready) override { forward_->gate_next_pass(std::move(layer_ready)); }
  Result<void> wait_on_device(const rt::Event& event) override;
  Result<void> poison(kv::BlockId block) override;
  Result<void> copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t tokens) override;
  Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                             const model::CpuForward::LayerHook& before_layer) override;

 private:
  std::unique_ptr<CudaForward> forward_;
  CudaKvPool pool_;
};

// Errors: no CUDA device, fewer devices than --tp ranks, a budget under one block, device errors.
Result<std::unique_ptr<PagedForward>> make_cuda_paged_forward(const model::ModelWeights& weights,
                                                              const PagedForwardOptions& options);

}  // namespace pensieve::backend::cuda
