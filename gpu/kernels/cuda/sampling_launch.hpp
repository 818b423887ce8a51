#pragma once
// Token sampling on the device (defined in sampling_kernels.cu), so that a
// large vocabulary's logits never travel to the host. Per row: greedy
// (temperature below 1e-5 or top_k == 1: the first index of the largest
// logit), else temperature, top-k, top-p over the remaining mass, and an
// inverse-CDF draw in vocabulary order with the caller's uniform number (the
// host owns the random stream, so runs are reproducible). Filters keep ties
// at their threshold: top-k may keep more than k tokens when the k-th logit
// is tied. Same order of operations as model::Sampler (without penalties).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace pensieve::kernels::cuda {

struct DeviceSamplingParams {
  float temperature = 1.0f;
  std::int32_t top_k = 0;  // <= 0: off
  float top_p = 1.0f;      // >= 1: off
  float uniform = 0.5f;    // in [0, 1)
};

inline constexpr float kGreedyBelowTemperature = 1e-5f;

// logits: [rows][stride] F32 (device); params: [rows] (device); tokens: [rows] (device).
cudaError_t launch_sample(const float* logits, std::int64_t stride, std::int32_t rows,
                          std::int32_t vocab, const DeviceSamplingParams* params,
                          std::int32_t* tokens, cudaStream_t stream);

}  // namespace pensieve::kernels::cuda
