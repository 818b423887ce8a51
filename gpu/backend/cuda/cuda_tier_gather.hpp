#pragma once
// The CUDA backend's TierGather (kv_tier_links.hpp): the swap gather kernel
// (kernels/cuda/gather_launch.hpp) on a CUDA copy stream, its spans passed
// by value in the launch parameters, so nothing the launch reads has to be
// kept alive until the kernel has run. Host runs are pinned (the host
// tier's cudaHostAlloc'd pool), which the kernel's threads read and write
// directly: the same kernel gathers a swap-out and scatters a swap-in.
#include "gpu/backend/kv_tier_links.hpp"

namespace pensieve::backend::cuda {

class CudaTierGather final : public TierGather {
 public:
  // `stream` must be a CUDA stream (rt::CudaStream): the links' copy streams.
  void launch(rt::Stream& stream, TierDirection direction, std::span<const TierRun> runs,
              std::string_view op) override;
};

}  // namespace pensieve::backend::cuda
