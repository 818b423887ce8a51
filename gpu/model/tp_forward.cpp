#include "gpu/model/tp_forward.hpp"

#include "gpu/model/tp_shard.hpp"

#include <optional>
#include <string>

namespace pensieve::model {

Result<TpForward> TpForward::create(const ModelWeights& full, std::int32_t ranks, CpuForwardOptions options) {
  if (auto ok = check_tensor_parallel(full.config, ranks); !ok) return ok.error();
  auto group = std::make_unique<model::HostCollectiveGroup>(ranks);
  std::vector<CpuForward> shards;
  for (std::int32_t r = 0; r < ranks; ++r) {
    const TpRank tp{r, ranks};
    auto weights = shard_weights(full, tp);
    if (!weights) return weights.error();
    CpuForwardOptions o = options;
    o.tp = tp;
    o.collective = &group->rank(r);
    auto fwd = CpuForward::create(std::move(*weights), o);
    if (!fwd) return fail("tensor-parallel rank " + std::to_string(r) + ": " + fwd.error().message);
    shards.push_back(std::move(*fwd));
  }
  return TpForward(full.config, std::move(group), std::move(shards));
}

Result<ForwardOutput> TpForward::forward_paged(std::span<const PagedSequence> batch,
                                               std::span<kv::KvPool* const> pools,
                                               const CpuForward::LayerHook& before_layer) {
  // Checked here, before any rank starts: a rank that failed validation
  // while the others passed would leave them waiting in a collective.
  if (pools.size() != shards_.size()) {
    return fail("tensor parallelism over " + std::to_string(ranks()) + " ranks needs as many KV pools, not " +
                std::to_string(pools.size()));
  }
  const kv::KvPoolConfig want = pools[0]->config();
  for (kv::KvPool* pool : pools) {
    const kv::KvPoolConfig& have = pool->config();
    if (have.num_blocks != want.num_blocks || have.block_tokens != want.block_tokens ||
        have.n_layers != want.n_layers || have.n_kv_heads != want.n_kv_heads ||
        have.head_dim != want.head_dim || have.dtype != want.dtype) {
      return fail("the ranks' KV pools differ in layout");
    }
  }
  std::vector<std::optional<Result<ForwardOutput>>> results(shards_.size());
  const CpuForward::LayerHook none;
  threads_->run([&](std::int32_t r) {
    const auto i = std::size_t(r);
    results[i].emplace(shards_[i].forward_paged(batch, *pools[i], r == 0 ? before_layer : none));
  });
  return std::move(*results[0]);
}

}  // namespace pensieve::model
