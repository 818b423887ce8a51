#include "gpu/kernels/swap_copy_plan.hpp"

namespace pensieve::kernels {

SwapCopyRoute route_swap_copies(std::span<const std::size_t> bytes, const SwapCopyThresholds& t) {
  SwapCopyRoute route;
  std::vector<std::size_t> small;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == 0) continue;
    (bytes[i] >= t.min_dma_bytes ? route.dma : small).push_back(i);
  }
  if (small.size() >= t.min_gather_spans) {
    route.gather = std::move(small);
  } else {
    // Too few to pay for a launch: DMA them too, keeping the input's order.
    route.dma.clear();
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] > 0) route.dma.push_back(i);
    }
  }
  return route;
}

SwapCopyPlan plan_swap_copies(std::span<const CopySpan> spans, const SwapCopyThresholds& t) {
  std::vector<std::size_t> bytes;
  bytes.reserve(spans.size());
  for (const CopySpan& s : spans) bytes.push_back(s.bytes);
  const SwapCopyRoute route = route_swap_copies(bytes, t);
  SwapCopyPlan plan;
  for (const std::size_t i : route.dma) plan.dma.push_back(spans[i]);
  for (const std::size_t i : route.gather) plan.gather.push_back(spans[i]);
  return plan;
}

}  // namespace pensieve::kernels
