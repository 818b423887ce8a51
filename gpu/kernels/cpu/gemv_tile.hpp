#pragma once
// The decode matmul's tile (internal to matmul.cpp): one activation row
// against 8 consecutive weight rows, each output with its own 16-lane
// accumulator fed in ascending k exactly as dot_tile_fixed feeds it (so the
// bits equal every other path's). While it streams these 8 rows it
// prefetches the next 8 (the bytes that follow them) at the same pace: the
// hardware prefetchers stop at 4 KiB page boundaries, and a mapped GGUF's
// rows sit on 4 KiB pages. The prefetches go to the L2, not the L1: 8 rows
// being read plus 8 being fetched, each a multiple of 4 KiB apart (an F32
// row of 1024), fall into the same L1 sets and evict each other; into the
// L1 the stream ran at ~11 GB/s per core, into the L2 at ~18 (2 MiB pages,
// single core, /tmp experiment of session 15 and BM_MatmulDecode).
#include "gpu/kernels/cpu/dot_tile.hpp"

#if defined(PENSIEVE_DOT_AVX512)

namespace pensieve::kernels::cpu {

constexpr int gemv_tile_rows = 8;

// Advances the prefetch cursor to `target` (at most `end`), a line at a time.
inline void prefetch_until(const std::byte*& cursor, const std::byte* target, const std::byte* end) {
  if (target > end) target = end;
  for (; cursor < target; cursor += 64) _mm_prefetch(reinterpret_cast<const char*>(cursor), _MM_HINT_T1);
}

// y[c] = row c of w (c < 8) . x over n elements; [pf, pf_end) is prefetched
// in step with the k loop (pf_end <= pf: no prefetch).
template <class L>
inline void gemv_tile8(const float* x, const std::byte* w, std::size_t w_row_bytes, std::int64_t n,
                       float* y, const std::byte* pf, const std::byte* pf_end) {
  constexpr int C = gemv_tile_rows;
  __m512 acc[C];
  PENSIEVE_UNROLL
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_ps();
  // Bytes of the next rows to prefetch per 32 elements: the 8 rows' share.
  const std::size_t pf_per_32 = (C * w_row_bytes * 32 + std::size_t(n) - 1) / std::size_t(n);
  const std::byte* cursor = pf;
  std::int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    prefetch_until(cursor, pf + std::size_t(k + 32) / 32 * pf_per_32, pf_end);
    const __m512 xlo = _mm512_loadu_ps(x + k), xhi = _mm512_loadu_ps(x + k + 16);
    if constexpr (PairedLoader<L>) {
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) {
        __m512 wlo, whi;
        L::load_pair(w + c * w_row_bytes, k, wlo, whi);
        acc[c] = _mm512_fmadd_ps(xlo, wlo, acc[c]);
        acc[c] = _mm512_fmadd_ps(xhi, whi, acc[c]);
      }
    } else {
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) {
        acc[c] = _mm512_fmadd_ps(xlo, L::load(w + c * w_row_bytes, k), acc[c]);
        acc[c] = _mm512_fmadd_ps(xhi, L::load(w + c * w_row_bytes, k + 16), acc[c]);
      }
    }
  }
  prefetch_until(cursor, pf_end, pf_end);
  for (; k + 16 <= n; k += 16) {
    const __m512 xv = _mm512_loadu_ps(x + k);
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(xv, L::load(w + c * w_row_bytes, k), acc[c]);
  }
  if (k < n) {
    const __mmask16 m = __mmask16((1u << (n - k)) - 1u);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + k);
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c)
      acc[c] = _mm512_fmadd_ps(xv, L::load_tail(w + c * w_row_bytes, k, m), acc[c]);
  }
  PENSIEVE_UNROLL
  for (int c = 0; c < C; ++c) y[c] = hsum16(acc[c]);
}

}  // namespace pensieve::kernels::cpu

#endif
