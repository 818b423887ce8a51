#pragma once
// How one layer's swap transfers run on a device: each run of gathered
// chunks (actors/kv_copy_plan.hpp) is one span of bytes; a span large enough
// for the copy engine to reach its bandwidth goes as one DMA transfer
// (cudaMemcpyAsync: vLLM's offload found DMA of large blocks beats custom
// copy kernels), and the small ones, when there are enough of them that one
// launch costs less than their transfers' fixed costs, go together through
// one gather kernel (kernels/cuda/gather_launch.hpp), whose threads read the
// pinned host tier directly. The thresholds come from the device table
// (tests/gpu/device-checks.sh measures BM_CudaSwapGather), not from here.
// Pure: no memory is touched.
#include <cstddef>
#include <span>
#include <vector>

namespace pensieve::kernels {

struct CopySpan {
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t bytes = 0;
  bool operator==(const CopySpan&) const = default;
};

struct SwapCopyThresholds {
  std::size_t min_dma_bytes = std::size_t(512) << 10;  // a span this large is one DMA transfer
  std::size_t min_gather_spans = 4;                     // fewer small spans: one DMA transfer each
};

struct SwapCopyPlan {
  std::vector<CopySpan> dma;     // one cudaMemcpyAsync each, in the input's order
  std::vector<CopySpan> gather;  // one gather kernel for all, in the input's order
};

// The same rule over the spans' sizes alone: the indices of the spans that go
// as DMA and of those that go through the gather kernel, each in the input's
// order (for callers whose spans are pointers, not offsets). Empty spans are
// in neither.
struct SwapCopyRoute {
  std::vector<std::size_t> dma;
  std::vector<std::size_t> gather;
};
SwapCopyRoute route_swap_copies(std::span<const std::size_t> bytes, const SwapCopyThresholds& thresholds = {});

// Empty spans are dropped.
SwapCopyPlan plan_swap_copies(std::span<const CopySpan> spans, const SwapCopyThresholds& thresholds = {});

}  // namespace pensieve::kernels
