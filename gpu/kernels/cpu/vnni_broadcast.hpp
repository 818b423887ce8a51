#pragma once
// acc + the dot products of u's unsigned bytes (vpdpbusd) or signed words
// (vpdpwssd) with the 4 bytes at s4 in every lane, the broadcast embedded in
// the instruction ({1to16}). GCC 12 does not fold a broadcast load into
// either instruction (it does into vpaddd): each took a vpbroadcastd of its
// own, 643 of the 2,499 vector instructions of a block of the Q6_K 8-token
// lane tile. With the broadcasts embedded, M-100's 2048 x 768 K-quant
// batches of 8 tokens ran 1.09-1.18x as fast on AMD Zen 5 (BM_KQuantBatch,
// 2026-12-06). For the kernels built with their own AVX-512 VNNI target
// (attribute or pragma); always inlined into them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace pensieve::kernels::cpu {

#define PENSIEVE_VNNI_BCAST_FN \
  __attribute__((target("avx512f,avx512vnni"), always_inline)) inline

#if defined(__clang__)
inline std::int32_t load4(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
#endif

PENSIEVE_VNNI_BCAST_FN __m512i dpbusd_bcast(__m512i acc, __m512i u, const void* s4) {
#if defined(__clang__)
  return _mm512_dpbusd_epi32(acc, u, _mm512_set1_epi32(load4(s4)));
#else
  asm("vpdpbusd %2%{1to16%}, %1, %0"
      : "+v"(acc)
      : "v"(u), "m"(*static_cast<const std::int32_t*>(s4)));
  return acc;
#endif
}

PENSIEVE_VNNI_BCAST_FN __m512i dpwssd_bcast(__m512i acc, __m512i u, const void* s4) {
#if defined(__clang__)
  return _mm512_dpwssd_epi32(acc, u, _mm512_set1_epi32(load4(s4)));
#else
  asm("vpdpwssd %2%{1to16%}, %1, %0"
      : "+v"(acc)
      : "v"(u), "m"(*static_cast<const std::int32_t*>(s4)));
  return acc;
#endif
}

#undef PENSIEVE_VNNI_BCAST_FN

}  // namespace pensieve::kernels::cpu
