#pragma once
// The CPU backend behind PagedForward: one rank (CpuForward over a host
// KvPool) or N tensor-parallel ranks (TpForward, one KvPool of n_kv_heads/N
// heads per rank, the same block ids in each).
//
// Owns the forward pass and the pools (the one-rank pool is shared with the
// swap engine, whose copies may outlive the worker). Not thread-safe: one
// call at a time.
#include "gpu/backend/paged_forward.hpp"
#include "gpu/model/tp_forward.hpp"

#include <vector>

namespace pensieve::backend {

class CpuPagedForward final : public PagedForward {
 public:
  CpuPagedForward(model::CpuForward forward, const kv::KvPoolConfig& pool)
      : forward_(std::move(forward)), pool_(std::make_shared<kv::KvPool>(pool)) {}

  const model::ModelConfig& config() const override { return forward_.config(); }
  const kv::KvPoolConfig& pool_config() const override { return pool_->config(); }
  std::int32_t ranks() const override { return 1; }
  std::shared_ptr<kv::KvPool> host_pool() const override { return pool_; }
  Result<void> poison(kv::BlockId block) override {
    pool_->poison(block);
    return {};
  }
  Result<void> copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t tokens) override {
    pool_->copy_prefix(src, dst, tokens);
    return {};
  }
  Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                             const model::CpuForward::LayerHook& before_layer) override {
    return forward_.forward_paged(batch, *pool_, before_layer);
  }
  std::size_t host_threads() const override { return forward_.n_threads(); }
  void for_each_host(std::size_t n, const HostBody& body, double cost) override {
    forward_.threads().parallel_for(n, body, 1, cost);
  }

 private:
  model::CpuForward forward_;
  std::shared_ptr<kv::KvPool> pool_;
};

class TpPagedForward final : public PagedForward {
 public:
  // pool: one rank's layout (TpForward::kv_pool_config); one pool per rank.
  TpPagedForward(model::TpForward forward, const kv::KvPoolConfig& pool);

  const model::ModelConfig& config() const override { return forward_.config(); }
  const kv::KvPoolConfig& pool_config() const override { return pools_.front()->config(); }
  std::int32_t ranks() const override { return forward_.ranks(); }
  std::shared_ptr<kv::KvPool> host_pool() const override { return nullptr; }
  Result<void> poison(kv::BlockId block) override;
  Result<void> copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t tokens) override;
  Result<model::ForwardOutput> forward_paged(std::span<const model::PagedSequence> batch,
                                             const model::CpuForward::LayerHook& before_layer) override;

 private:
  model::TpForward forward_;
  std::vector<std::unique_ptr<kv::KvPool>> pools_;
  std::vector<kv::KvPool*> pointers_;  // pools_, as TpForward takes them
};

}  // namespace pensieve::backend
