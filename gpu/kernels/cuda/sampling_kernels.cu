// Device sampling: one 1024-thread block per row. Thresholds for top-k and
// top-p are found by binary search over the logits' order-preserving 32-bit
// keys (32 passes each, exact), so nothing is sorted and no row is copied.
#include "gpu/kernels/cuda/device_math.cuh"
#include "gpu/kernels/cuda/sampling_launch.hpp"

#include <cstdint>

namespace pensieve::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

// Monotone map of a float to an unsigned key (larger float, larger key).
__device__ __forceinline__ std::uint32_t order_key(float x) {
  const std::uint32_t b = __float_as_uint(x);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// (value, index) of the largest value, lowest index among ties, over the block.
__device__ void block_argmax(float& value, int& index, float* s_val, int* s_idx) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = 16; o > 0; o /= 2) {
    const float v = __shfl_xor_sync(dev::kFullMask, value, o);
    const int i = __shfl_xor_sync(dev::kFullMask, index, o);
    if (v > value || (v == value && i < index)) {
      value = v;
      index = i;
    }
  }
  __syncthreads();
  if (lane == 0) {
    s_val[warp] = value;
    s_idx[warp] = index;
  }
  __syncthreads();
  value = s_val[lane];  // kThreads / 32 == 32 warps: every lane has one
  index = s_idx[lane];
  for (int o = 16; o > 0; o /= 2) {
    const float v = __shfl_xor_sync(dev::kFullMask, value, o);
    const int i = __shfl_xor_sync(dev::kFullMask, index, o);
    if (v > value || (v == value && i < index)) {
      value = v;
      index = i;
    }
  }
}

// Exclusive prefix sum of x over the block's threads, in thread order.
__device__ float block_exclusive_scan(float x, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float inclusive = x;
  for (int o = 1; o < 32; o *= 2) {
    const float y = __shfl_up_sync(dev::kFullMask, inclusive, o);
    if (lane >= o) inclusive += y;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  float warp_total = scratch[lane];
  float warp_prefix = warp_total;
  for (int o = 1; o < 32; o *= 2) {
    const float y = __shfl_up_sync(dev::kFullMask, warp_prefix, o);
    if (lane >= o) warp_prefix += y;
  }
  // warp_prefix on lane w is the inclusive sum of warps [0, w]; take warp's exclusive one.
  const float before_warp = __shfl_sync(dev::kFullMask, warp_prefix - warp_total, warp);
  return before_warp + inclusive - x;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, std::int64_t stride, std::int32_t vocab,
                  const DeviceSamplingParams* params, std::int32_t* tokens) {
  __shared__ float s_val[32];
  __shared__ int s_idx[32];
  __shared__ int s_pick;
  const float* row = logits + std::int64_t(blockIdx.x) * stride;
  const DeviceSamplingParams p = params[blockIdx.x];

  float best = -INFINITY;
  int best_i = vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    if (row[i] > best) {  // strided ascending: the first max of this thread wins
      best = row[i];
      best_i = i;
    }
  }
  block_argmax(best, best_i, s_val, s_idx);
  if (p.temperature < kGreedyBelowTemperature || p.top_k == 1 || best_i >= vocab) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = best_i < vocab ? best_i : 0;
    return;
  }
  const float inv_t = 1.0f / p.temperature;
  // Top-k: the largest key K with count(key >= K) >= k.
  std::uint32_t k_key = 0;
  if (p.top_k > 0 && p.top_k < vocab) {
    std::uint64_t lo = 0, hi = 0x100000000ull;
    while (hi - lo > 1) {
      const auto mid = std::uint32_t((lo + hi) / 2);
      float count = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) count += order_key(row[i]) >= mid ? 1.0f : 0.0f;
      count = dev::block_sum(count, s_val);
      if (count >= float(p.top_k)) lo = mid; else hi = mid;
    }
    k_key = std::uint32_t(lo);
  }
  auto weight = [&](int i, std::uint32_t key_min) {
    const float l = row[i];
    return order_key(l) >= key_min ? expf((l - best) * inv_t) : 0.0f;
  };
  float mass = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) mass += weight(i, k_key);
  mass = dev::block_sum(mass, s_val);
  // Top-p: the largest key K >= k_key whose head holds at least top_p of the mass.
  std::uint32_t key = k_key;
  if (p.top_p < 1.0f) {
    const float want = p.top_p * mass;
    std::uint64_t lo = k_key, hi = 0x100000000ull;
    float lo_mass = mass;
    while (hi - lo > 1) {
      const auto mid = std::uint32_t((lo + hi) / 2);
      float m = 0.0f;
      for (int i = threadIdx.x; i < vocab; i += kThreads) m += weight(i, mid);
      m = dev::block_sum(m, s_val);
      if (m >= want && m > 0.0f) {
        lo = mid;
        lo_mass = m;
      } else {
        hi = mid;
      }
    }
    key = std::uint32_t(lo);
    mass = lo_mass;
  }
  // Inverse CDF in vocabulary order: each thread owns a contiguous chunk.
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, int(threadIdx.x) * chunk), end = min(vocab, begin + chunk);
  float part = 0.0f;
  int last = -1;
  for (int i = begin; i < end; ++i) {
    const float w = weight(i, key);
    part += w;
    if (w > 0.0f) last = i;
  }
  const float before = block_exclusive_scan(part, s_val);
  if (threadIdx.x == 0) s_pick = -1;
  __syncthreads();
  const float target = p.uniform * mass;
  if (last >= 0 && target >= before && target < before + part) {
    float acc = before;
    int pick = last;  // rounding in the running sum: stay in this chunk
    for (int i = begin; i < end; ++i) {
      acc += weight(i, key);
      if (target < acc) {
        pick = i;
        break;
      }
    }
    atomicMax(&s_pick, pick);
  }
  // The draw fell past the total (rounding): take the last candidate.
  int last_any = last;
  for (int o = 16; o > 0; o /= 2) last_any = max(last_any, __shfl_xor_sync(dev::kFullMask, last_any, o));
  if (threadIdx.x % 32 == 0) s_idx[threadIdx.x / 32] = last_any;
  __syncthreads();
  if (threadIdx.x < 32) {
    int v = s_idx[threadIdx.x];
    for (int o = 16; o > 0; o /= 2) v = max(v, __shfl_xor_sync(dev::kFullMask, v, o));
    if (threadIdx.x == 0) tokens[blockIdx.x] = s_pick >= 0 ? s_pick : (v >= 0 ? v : best_i);
  }
}

}  // namespace

cudaError_t launch_sample(const float* logits, std::int64_t stride, std::int32_t rows,
                          std::int32_t vocab, const DeviceSamplingParams* params,
                          std::int32_t* tokens, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || vocab <= 0 || stride < vocab) return cudaErrorInvalidValue;
  sample_kernel<<<unsigned(rows), kThreads, 0, stream>>>(logits, stride, vocab, params, tokens);
  return cudaGetLastError();
}

}  // namespace pensieve::kernels::cuda
