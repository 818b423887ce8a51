#pragma once
// The AVX-512 helpers that the quant dot kernels (quant_dot_avx512.cpp) and
// the K-quant 8-row tiles (quant_tiles_avx512.cpp) share: loads, the K-quant
// scale unpacking (and IQ4_XS's) and the target attribute. Every function carries that
// attribute, so a file including this builds with any -march; the callers
// run them only on a CPU with AVX-512 F/BW/VL/DQ and VNNI.
#include "gpu/kernels/cpu/quant_blocks.hpp"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PENSIEVE_QUANT_AVX512 1
#endif

#if defined(PENSIEVE_QUANT_AVX512)

#define PENSIEVE_AVX512_FN \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
// The K-quant loops over a block's 64-value groups, unrolled with two
// accumulators: one chain of vpdpwssd would wait on its latency.
#define PENSIEVE_UNROLL_ALL _Pragma("GCC unroll 4")

namespace pensieve::kernels::cpu::quant_avx512 {

// run.template operator()<T>() for the T in [1, Max] equal to n: the tiles
// take their token count as a template parameter (their accumulators are
// arrays of that size, kept in registers).
template <int Max, class Run>
inline void with_token_count(int n, const Run& run) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    const bool ran = ((n == I + 1 && (run.template operator()<I + 1>(), true)) || ...);
    assert(ran && "a token count from 1 to Max");
    (void)ran;
  }(std::make_integer_sequence<int, Max>{});
}

PENSIEVE_AVX512_FN inline __m128i load128(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
PENSIEVE_AVX512_FN inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
PENSIEVE_AVX512_FN inline __m512i load512(const void* p) {
  return _mm512_loadu_si512(p);
}

// 32 bytes in both 256-bit halves.
PENSIEVE_AVX512_FN inline __m512i twice(const std::byte* p) {
  return _mm512_broadcast_i64x4(load256(p));
}

// Word lanes: 0 in the low half, `hi` in the high half (shift counts).
PENSIEVE_AVX512_FN inline __m512i halves16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(std::int16_t(lo)),
                            _mm256_set1_epi16(std::int16_t(hi)), 1);
}
PENSIEVE_AVX512_FN inline __m512i halves8(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi8(char(lo)), _mm256_set1_epi8(char(hi)), 1);
}

// Q6_K's values 128 n .. 128 n + 127 of the block at blk, unsigned (0..63,
// the weights stored + 32): q[0] the first 64, q[1] the last 64. Value
// 128 n + 32 k + l is nibble k >> 1 of ql[64 n + 32 (k & 1) + l] with bits
// 2k of qh[32 n + l] above it.
PENSIEVE_AVX512_FN inline void q6_k_quants128(const std::byte* blk, int n, __m512i* q) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  const __m512i ql = _mm512_loadu_si512(blk + 64 * n);
  // Low half: qh, high half: qh >> 2, so bits 0-1 hold k = 0, 1's high bits
  // and bits 4-5 k = 2, 3's.
  const __m512i qh = _mm512_srlv_epi16(twice(blk + 128 + 32 * n), halves16(0, 2));
  q[0] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
  q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(qh, m30));
}

// The i16 scales of 64 values covering 16-value sub-blocks first..first+3
// (Q2_K, Q3_K, Q6_K) from the block's 16 i16 scales: word m is scale
// first + m / 8.
PENSIEVE_AVX512_FN inline __m512i scales_by16(__m512i scales16, int first) {
  const __m512i idx = _mm512_add_epi16(
      _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0,
                       0, 0, 0, 0, 0, 0, 0),
      _mm512_set1_epi16(std::int16_t(first)));
  return _mm512_permutexvar_epi16(idx, scales16);
}

// The same for 32-value sub-blocks first, first + 1 (Q4_K, Q5_K): word m
// is scale first + m / 16.
PENSIEVE_AVX512_FN inline __m512i scales_by32(__m512i scales8, int first) {
  return _mm512_permutexvar_epi16(halves16(first, first + 1), scales8);
}

// IQ4_NL's grid (also IQ4_XS's) + 128, 1..241: vpdpbusd's unsigned operand,
// the 128 taken off afterwards.
PENSIEVE_AVX512_FN inline __m128i iq4nl_grid_plus128() {
  return _mm_add_epi8(load128(iq4nl_values), _mm_set1_epi8(char(0x80)));
}

// IQ4_XS's 8 sub-block scales (-32..31) as i16, iq4_xs_scale for every j at
// once: the low 4 bits nibble j % 2 of scales_l[j / 2], the high 2 bits
// bits 2j of scales_h.
PENSIEVE_AVX512_FN inline __m128i iq4_xs_scales(const std::byte* blk) {
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m128i lo4 = _mm_cvtsi32_si128(std::int32_t(block_u32(blk + 4)));
  const __m128i low = _mm_cvtepu8_epi16(
      _mm_unpacklo_epi8(_mm_and_si128(lo4, m4), _mm_and_si128(_mm_srli_epi16(lo4, 4), m4)));
  std::uint16_t h;
  std::memcpy(&h, blk + 2, 2);
  const __m128i high =
      _mm_srlv_epi16(_mm_set1_epi16(std::int16_t(h)), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14));
  const __m128i high2 = _mm_slli_epi16(_mm_and_si128(high, _mm_set1_epi16(3)), 4);
  return _mm_sub_epi16(_mm_or_si128(low, high2), _mm_set1_epi16(32));
}

// Q4_K/Q5_K's 8 6-bit scales and 8 mins, each as 8 bytes (ggml's
// get_scale_min_k4 for all j at once): j < 4 in the low 6 bits of bytes j
// and j + 4; j >= 4 in a nibble of byte j + 4 plus the top 2 bits of byte
// j - 4 (scale) or j (min).
struct ScalesMins {
  std::uint64_t scales, mins;
};
inline ScalesMins k4_scales_mins(const std::byte* p) {
  std::uint32_t w[3];
  std::memcpy(w, p, 12);
  const std::uint32_t m6 = 0x3f3f3f3f, m4 = 0x0f0f0f0f, m2 = 0x03030303;
  const std::uint32_t s_hi = (w[2] & m4) | (((w[0] >> 6) & m2) << 4);
  const std::uint32_t m_hi = ((w[2] >> 4) & m4) | (((w[1] >> 6) & m2) << 4);
  return {(w[0] & m6) | (std::uint64_t(s_hi) << 32), (w[1] & m6) | (std::uint64_t(m_hi) << 32)};
}

}  // namespace pensieve::kernels::cpu::quant_avx512

#endif
