#pragma once
// The cores' F32 fused multiply-add peak: each of n_threads threads runs
// independent chains of the widest FMA this build has (zmm, ymm or scalar)
// at once; the best of `reps` rounds, in FLOP/s of all threads together. The
// compute ceiling a decode batch (and a prefill) is held against, where
// OpenBLAS sgemm is not one on every CPU.
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "bench/common/threads_rate.hpp"

namespace pensieve::bench {

struct FmaPeakResult {
  double best_gflops = 0.0;
  int threads = 0;
  const char* isa = "scalar";
};

namespace fma_peak_detail {

// Independent accumulators: enough to cover the FMA latency on both ports.
constexpr int chains = 16;

// 2 x lanes x chains x steps FLOPs; the result feeds a sink so the loop stays.
inline float run_chains(long steps) {
#if defined(__AVX512F__)
  __m512 acc[chains], b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  for (auto& a : acc) a = _mm512_set1_ps(1.0f);
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < chains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < chains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc[chains], b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  for (auto& a : acc) a = _mm256_set1_ps(1.0f);
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < chains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
  }
  alignas(32) float out[8];
  __m256 sum = acc[0];
  for (int i = 1; i < chains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  _mm256_store_ps(out, sum);
  return out[0];
#else
  float acc[chains];
  for (auto& a : acc) a = 1.0f;
  for (long s = 0; s < steps; ++s)
    for (int i = 0; i < chains; ++i) acc[i] = __builtin_fmaf(acc[i], 0.999f, 1e-3f);
  return acc[0];
#endif
}

inline constexpr double lanes() {
#if defined(__AVX512F__)
  return 16;
#elif defined(__AVX2__) && defined(__FMA__)
  return 8;
#else
  return 1;
#endif
}

// FLOPs of one step of run_chains: an FMA (2) a lane of every chain.
inline constexpr double ops_per_step() {
  return 2.0 * lanes() * chains;
}

}  // namespace fma_peak_detail

inline FmaPeakResult measure_fma_peak(int n_threads, int reps, long steps = 20'000'000) {
  FmaPeakResult r;
  r.threads = n_threads;
#if defined(__AVX512F__)
  r.isa = "avx512 zmm";
#elif defined(__AVX2__) && defined(__FMA__)
  r.isa = "avx2 ymm";
#endif
  const double flops = fma_peak_detail::ops_per_step() * double(steps) * n_threads;
  r.best_gflops =
      best_threads_rate(n_threads, reps, flops, [steps] { return fma_peak_detail::run_chains(steps); }) * 1e-9;
  return r;
}

}  // namespace pensieve::bench
