#include "gpu/backend/cuda/cuda_tier_gather.hpp"

#include "gpu/kernels/cuda/gather_launch.hpp"
#include "runtime/cuda/cuda_stream.hpp"

#include <stdexcept>
#include <vector>

namespace pensieve::backend::cuda {

void CudaTierGather::launch(rt::Stream& stream, TierDirection direction, std::span<const TierRun> runs,
                            std::string_view /*op*/) {
  // Another stream here is the links built wrong: a fault.
  if (stream.backend() != rt::StreamBackend::cuda) throw std::logic_error("CudaTierGather: not a CUDA stream");
  const cudaStream_t native = static_cast<rt::CudaStream&>(stream).native();
  std::vector<kernels::cuda::GatherCopy> copies;
  copies.reserve(runs.size());
  for (const TierRun& r : runs) {
    if (direction == TierDirection::to_device) {
      copies.push_back({r.host, r.device, r.bytes});
    } else {
      copies.push_back({r.device, r.host, r.bytes});
    }
  }
  const cudaError_t e =
      kernels::cuda::launch_gather_copies_by_value(copies.data(), std::int32_t(copies.size()), native);
  // As a failing cudaMemcpyAsync on the stream: a device fault.
  if (e != cudaSuccess) throw rt::CudaError(rt::cuda_error_message("swap gather launch", e));
}

}  // namespace pensieve::backend::cuda
