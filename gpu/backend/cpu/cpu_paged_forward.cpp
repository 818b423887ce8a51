#include "gpu/backend/cpu/cpu_paged_forward.hpp"

namespace pensieve::backend {

TpPagedForward::TpPagedForward(model::TpForward forward, const kv::KvPoolConfig& pool)
    : forward_(std::move(forward)) {
  for (std::int32_t r = 0; r < forward_.ranks(); ++r) {
    pools_.push_back(std::make_unique<kv::KvPool>(pool));
    pointers_.push_back(pools_.back().get());
  }
}

Result<void> TpPagedForward::poison(kv::BlockId block) {
  for (auto& pool : pools_) pool->poison(block);
  return {};
}

Result<void> TpPagedForward::copy_prefix(kv::BlockId src, kv::BlockId dst, std::int32_t tokens) {
  for (auto& pool : pools_) pool->copy_prefix(src, dst, tokens);
  return {};
}

Result<model::ForwardOutput> TpPagedForward::forward_paged(std::span<const model::PagedSequence> batch,
                                                           const model::CpuForward::LayerHook& before_layer) {
  return forward_.forward_paged(batch, pointers_, before_layer);
}

}  // namespace pensieve::backend
