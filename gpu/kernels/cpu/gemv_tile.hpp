#pragma once
// The decode matmul's tile (internal to matmul.cpp): 1 or 2 activation rows
// against 8 consecutive weight rows, each output with its own 16-lane
// accumulator fed in ascending k exactly as dot_tile_fixed feeds it (so the
// bits equal every other path's). While it streams its rows it prefetches
// as many following rows (the bytes after them) at the same pace: the
// hardware prefetchers stop at 4 KiB page boundaries, and a mapped GGUF's
// rows sit on 4 KiB pages. The prefetches go to the L2, not the L1: 8 rows
// being read plus 8 being fetched, each a multiple of 4 KiB apart (an F32
// row of 1024), fall into the same L1 sets and evict each other; into the
// L1 the stream ran at ~11 GB/s per core, into the L2 at ~18 (2 MiB pages,
// single core, /tmp experiment of session 15 and BM_MatmulDecode).
#include "gpu/kernels/cpu/dot_tile.hpp"
#include "gpu/kernels/cpu/lane_sums.hpp"

#if defined(PENSIEVE_DOT_AVX512)

namespace pensieve::kernels::cpu {

// Weight rows per tile (R = 1 or 2 tokens): 16 accumulators, 4 activation
// registers and a weight pair fit the 32 zmm registers.
constexpr int gemv_tile_rows = 8;

// Advances the prefetch cursor to `target` (at most `end`), a line at a time.
inline void prefetch_until(const std::byte*& cursor, const std::byte* target, const std::byte* end) {
  if (target > end) target = end;
  for (; cursor < target; cursor += 64) _mm_prefetch(reinterpret_cast<const char*>(cursor), _MM_HINT_T1);
}

// y[r * y_stride + c] = row c of w (c < C) . x row r (r < R, rows x_stride
// apart) over n elements; [pf, pf_end) is prefetched in step with the k loop
// (pf_end <= pf: no prefetch). R = 2 serves a decode step of several
// sequences two at a time.
template <class L, int R, int C>
inline void gemv_tile(const float* x, std::int64_t x_stride, const std::byte* w, std::size_t w_row_bytes,
                      std::int64_t n, float* y, std::int64_t y_stride, const std::byte* pf,
                      const std::byte* pf_end) {
  __m512 acc[R][C];
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  // Bytes of the next rows to prefetch per 32 elements: the C rows' share.
  const std::size_t pf_per_32 = (C * w_row_bytes * 32 + std::size_t(n) - 1) / std::size_t(n);
  const std::byte* cursor = pf;
  std::int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    prefetch_until(cursor, pf + std::size_t(k + 32) / 32 * pf_per_32, pf_end);
    __m512 xlo[R], xhi[R];
    PENSIEVE_UNROLL
    for (int r = 0; r < R; ++r) {
      xlo[r] = _mm512_loadu_ps(x + r * x_stride + k);
      xhi[r] = _mm512_loadu_ps(x + r * x_stride + k + 16);
    }
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) {
      __m512 wlo, whi;
      if constexpr (PairedLoader<L>) {
        L::load_pair(w + c * w_row_bytes, k, wlo, whi);
      } else {
        wlo = L::load(w + c * w_row_bytes, k);
        whi = L::load(w + c * w_row_bytes, k + 16);
      }
      PENSIEVE_UNROLL
      for (int r = 0; r < R; ++r) {
        acc[r][c] = _mm512_fmadd_ps(xlo[r], wlo, acc[r][c]);
        acc[r][c] = _mm512_fmadd_ps(xhi[r], whi, acc[r][c]);
      }
    }
  }
  prefetch_until(cursor, pf_end, pf_end);
  for (; k + 16 <= n; k += 16) {
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) {
      const __m512 wv = L::load(w + c * w_row_bytes, k);
      PENSIEVE_UNROLL
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * x_stride + k), wv, acc[r][c]);
    }
  }
  if (k < n) {
    const __mmask16 m = __mmask16((1u << (n - k)) - 1u);
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) {
      const __m512 wv = L::load_tail(w + c * w_row_bytes, k, m);
      PENSIEVE_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][c] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + r * x_stride + k), wv, acc[r][c]);
    }
  }
  alignas(64) float sums[16];
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r) {
    if constexpr (C == 8) {
      _mm512_store_ps(sums, hsum16_many<8>(acc[r]));
    } else {
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) sums[c] = hsum16(acc[r][c]);
    }
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) y[r * y_stride + c] = sums[c];
  }
}

}  // namespace pensieve::kernels::cpu

#endif
