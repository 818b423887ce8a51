#pragma once
// Horizontal sums of several 16-lane accumulators at once, bit for bit the
// sums one vector at a time gives. Every CPU dot product here ends in the same
// tree over its 16 lanes: a[l] = x[l] + x[l + 8], then + 4, + 2, + 1
// (hsum16 in dot_tile.hpp, reduce16 in attention_math.cpp). Done per vector
// that costs 4 shuffles and 4 adds for one float; here each stage combines two
// vectors into one with one two-source permute, one blend and one add, so N
// sums cost about N - 1 of each. That reduction was a third of a small-K GEMM
// tile (K = 256) and most of prefill attention's score loop. Internal to
// gpu/kernels/cpu.
#include <cstdint>

#include "gpu/kernels/cpu/kernel_isa.hpp"

#if PENSIEVE_KERNEL_ISA >= 3
#include <immintrin.h>

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

namespace lane_sums_detail {

// One stage at distance d: in each group of 2d lanes, the low d lanes carry
// on a's element, the high d lanes b's: r[l] = a[l] + a[l + d] or
// b[l] + b[l - d] (addition commutes, so these are the tree's own sums).
template <int D>
inline __m512 combine(__m512 a, __m512 b) {
  static_assert(D == 8 || D == 4 || D == 2 || D == 1);
  alignas(64) static constexpr std::int32_t idx[16] = {
#define PENSIEVE_LANE_IDX(l) ((l) % (2 * D) < D ? (l) + D : 16 + (l) - D)
      PENSIEVE_LANE_IDX(0),  PENSIEVE_LANE_IDX(1),  PENSIEVE_LANE_IDX(2),  PENSIEVE_LANE_IDX(3),
      PENSIEVE_LANE_IDX(4),  PENSIEVE_LANE_IDX(5),  PENSIEVE_LANE_IDX(6),  PENSIEVE_LANE_IDX(7),
      PENSIEVE_LANE_IDX(8),  PENSIEVE_LANE_IDX(9),  PENSIEVE_LANE_IDX(10), PENSIEVE_LANE_IDX(11),
      PENSIEVE_LANE_IDX(12), PENSIEVE_LANE_IDX(13), PENSIEVE_LANE_IDX(14), PENSIEVE_LANE_IDX(15),
#undef PENSIEVE_LANE_IDX
  };
  constexpr auto high = [] {
    unsigned m = 0;
    for (int l = 0; l < 16; ++l)
      if (l % (2 * D) >= D) m |= 1u << l;
    return static_cast<__mmask16>(m);
  }();
  const __m512 own = _mm512_mask_blend_ps(high, a, b);
  const __m512 partner = _mm512_permutex2var_ps(a, _mm512_load_si512(idx), b);
  return _mm512_add_ps(own, partner);
}

constexpr int bit_reverse(int v, int bits) {
  int r = 0;
  for (int i = 0; i < bits; ++i) r |= ((v >> i) & 1) << (bits - 1 - i);
  return r;
}

}  // namespace lane_sums_detail

// Lane i of the result = the 16-lane tree sum of v[i], for i < N (N = 8 or
// 16); lanes N.. are unspecified.
template <int N>
inline __m512 hsum16_many(const __m512* v) {
  static_assert(N == 8 || N == 16);
  using lane_sums_detail::bit_reverse;
  using lane_sums_detail::combine;
  // Input j's sum lands in lane bit_reverse(j) (stage 1 decides lane bit 3,
  // stage 2 bit 2, ...), so feed v[bit_reverse(j)] to get lane i = v[i].
  constexpr int bits = N == 16 ? 4 : 3;
  __m512 s1[N / 2];
#pragma GCC unroll 8
  for (int j = 0; j < N / 2; ++j)
    s1[j] = combine<8>(v[bit_reverse(2 * j, bits)], v[bit_reverse(2 * j + 1, bits)]);
  __m512 s2[N / 4];
#pragma GCC unroll 4
  for (int j = 0; j < N / 4; ++j) s2[j] = combine<4>(s1[2 * j], s1[2 * j + 1]);
  __m512 s3[N / 8];
#pragma GCC unroll 2
  for (int j = 0; j < N / 8; ++j) s3[j] = combine<2>(s2[2 * j], s2[2 * j + 1]);
  if constexpr (N == 16) return combine<1>(s3[0], s3[1]);
  // Eight sums: the last stage pairs the vector with itself (each sum lands
  // twice, in lanes 2i and 2i + 1); gather lanes 0, 2, 4, ... to the front.
  const __m512 pairs = combine<1>(s3[0], s3[0]);
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0),
                               pairs);
}

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu

#endif
