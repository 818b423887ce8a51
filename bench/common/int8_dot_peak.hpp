#pragma once
// The cores' int8 dot-product peak: each of n_threads threads runs
// independent chains of zmm vpdpbusd (64 u8 x s8 products a lane-summed
// instruction, 2 ops each) at once; the best of `reps` rounds, in GOP/s of
// all threads together. The compute ceiling of the matrices that run integer
// dots (Q8_0 and the block types on llama.cpp's numerics): on AMD Zen 5 it is
// 4x the FMA peak in ops, so holding those matrices against the FMA peak
// overstates how near a quantised batch is to its limit. 0 where the build
// has no AVX-512 VNNI (the AVX2 integer dots take other instructions).
#if defined(__AVX512VNNI__)
#include <immintrin.h>
#endif

#include "bench/common/threads_rate.hpp"

namespace pensieve::bench {

struct Int8DotPeakResult {
  double best_gops = 0.0;
  int threads = 0;
};

namespace int8_peak_detail {

// 12 chains: enough for vpdpbusd's latency on two ports, few enough that
// GCC keeps every accumulator in a register (with 16 it kept two on the
// stack, and their store-to-load round trips halved the rate).
constexpr int chains = 12;

inline int run_chains(long steps) {
#if defined(__AVX512VNNI__)
  __m512i acc[chains];
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (auto& v : acc) v = _mm512_setzero_si512();
  for (long s = 0; s < steps; ++s) {
#pragma GCC unroll 12
    for (int i = 0; i < chains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i sum = acc[0];
  for (int i = 1; i < chains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  return _mm512_reduce_add_epi32(sum);
#else
  (void)steps;
  return 0;
#endif
}

// Ops of one step of run_chains: 64 u8 x s8 products (2 ops each) a chain.
inline constexpr double ops_per_step() {
  return 2.0 * 64 * chains;
}

}  // namespace int8_peak_detail

inline Int8DotPeakResult measure_int8_dot_peak(int n_threads, int reps, long steps = 20'000'000) {
  Int8DotPeakResult r;
  r.threads = n_threads;
#if defined(__AVX512VNNI__)
  const double ops = int8_peak_detail::ops_per_step() * double(steps) * n_threads;
  r.best_gops =
      best_threads_rate(n_threads, reps, ops, [steps] { return int8_peak_detail::run_chains(steps); }) * 1e-9;
#else
  (void)reps;
  (void)steps;
#endif
  return r;
}

}  // namespace pensieve::bench
