#include "gpu/backend/kv_tier_links.hpp"

namespace pensieve::backend {

kv::KvPoolConfig host_tier_config(const kv::KvPoolConfig& device, std::int32_t slots) {
  kv::KvPoolConfig c = device;
  c.num_blocks = slots;
  c.tier = kv::Tier::host;
  c.poison_freed = false;  // the host tier never runs kernels over its slots
  return c;
}

TierCopyCount copy_tier_runs(rt::Stream& stream, TierGather* gather, const kernels::SwapCopyThresholds& thresholds,
                             TierDirection direction, std::span<const TierRun> runs, std::string_view op) {
  TierCopyCount count;
  const auto one_copy = [&](const TierRun& r) {
    if (direction == TierDirection::to_device) {
      stream.copy(r.device, r.host, r.bytes, op);
    } else {
      stream.copy(r.host, r.device, r.bytes, op);
    }
    ++count.copies;
  };
  if (gather == nullptr) {
    for (const TierRun& r : runs) {
      if (r.bytes > 0) one_copy(r);
    }
    return count;
  }
  std::vector<std::size_t> bytes;
  bytes.reserve(runs.size());
  for (const TierRun& r : runs) bytes.push_back(r.bytes);
  const kernels::SwapCopyRoute route = kernels::route_swap_copies(bytes, thresholds);
  for (const std::size_t i : route.dma) one_copy(runs[i]);
  if (!route.gather.empty()) {
    std::vector<TierRun> small;
    small.reserve(route.gather.size());
    for (const std::size_t i : route.gather) small.push_back(runs[i]);
    gather->launch(stream, direction, small, op);
    ++count.launches;
    count.gathered = small.size();
  }
  return count;
}

TierCopyCount copy_tier_runs(KvTierLinks& links, TierDirection direction, std::span<const TierRun> runs,
                             std::string_view op) {
  rt::Stream& stream = direction == TierDirection::to_device ? *links.copy_in : *links.copy_out;
  return copy_tier_runs(stream, links.gather.get(), links.thresholds, direction, runs, op);
}

}  // namespace pensieve::backend
