#include "gpu/kernels/swap_copy_plan.hpp"

namespace pensieve::kernels {

SwapCopyPlan plan_swap_copies(std::span<const CopySpan> spans, const SwapCopyThresholds& t) {
  SwapCopyPlan plan;
  std::vector<CopySpan> small;
  for (const CopySpan& s : spans) {
    if (s.bytes == 0) continue;
    (s.bytes >= t.min_dma_bytes ? plan.dma : small).push_back(s);
  }
  if (small.size() >= t.min_gather_spans) {
    plan.gather = std::move(small);
  } else {
    // Too few to pay for a launch: DMA them too, keeping the input's order.
    plan.dma.clear();
    for (const CopySpan& s : spans) {
      if (s.bytes > 0) plan.dma.push_back(s);
    }
  }
  return plan;
}

}  // namespace pensieve::kernels
