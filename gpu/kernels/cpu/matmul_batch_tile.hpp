#pragma once
// The small-batch register tile (internal to matmul.cpp and its tests): up to
// 8 tokens x up to 8 weight rows of F32, F16 or BF16 over the whole k range,
// for decode batches of a few sequences. The decode tiles of dot_tile.hpp take
// two tokens per pass, so each weight vector is converted once per pair of
// tokens and re-read from the L1 by every later pair; here it is loaded and
// converted once per 16-element step and used by every token of the tile,
// whose activation vector is loaded once per step and multiplied into all the
// tile's rows. 8 tokens x 3 rows keep 24 accumulators, 3 weights and one
// activation in the 32 zmm registers: 3 conversions (2 uops each on the FMA
// ports of Intel cores) per 24 FMAs, where the 2 x 8 decode tile pays 16 per
// 32.
//
// Each output element keeps its own 16-lane accumulator fed in ascending k,
// then the fixed horizontal sum (store_tile_sums), exactly the FMA sequence
// of dot_tile_fixed, so a token's row has the same bits here, alone, or in a
// batch of any size.
#include "gpu/kernels/cpu/gemm_tile.hpp"
#include "gpu/kernels/cpu/views.hpp"

#include <algorithm>

#if defined(PENSIEVE_DOT_AVX512)

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

// Most tokens per small-batch tile; a batch takes them 8 at a time.
constexpr int batch_tile_tokens = 8;

// Weight rows per tile for T tokens: as many as leave T x C accumulators, C
// weights and one activation within the 32 registers, and divide
// batch_block_rows (the rows every token group of a batch sweeps before the
// next block).
template <int T>
constexpr int batch_tile_rows() {
  static_assert(T >= 1 && T <= batch_tile_tokens);
  if constexpr (T >= 7) return 3;
  if constexpr (T >= 5) return 4;
  if constexpr (T >= 3) return 6;
  return 8;
}
constexpr std::int64_t batch_block_rows = 24;

// y[t * y_stride + c] = row c of w (c < C) . x row t (t < T) over n elements.
// [pf, pf_end) is prefetched into the L2 in step with the k loop (the rows
// the next block will read; pf_end <= pf: none).
template <class L, int T, int C>
inline void batch_tile(const float* x, std::int64_t x_stride, const std::byte* w,
                       std::size_t w_row_bytes, std::int64_t n, float* y, std::int64_t y_stride,
                       const std::byte* pf, const std::byte* pf_end) {
  __m512 acc[T][C];
  PENSIEVE_UNROLL
  for (int t = 0; t < T; ++t)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) acc[t][c] = _mm512_setzero_ps();
  const bool prefetching = pf_end > pf;
  // Bytes of the next rows to prefetch per 16 elements: the C rows' share.
  const std::size_t pf_per_16 = (C * w_row_bytes * 16 + std::size_t(n) - 1) / std::size_t(n);
  const std::byte* cursor = pf;
  std::int64_t k = 0;
  for (std::size_t step = 1; k + 16 <= n; k += 16, ++step) {
    if (prefetching) prefetch_until(cursor, pf + step * pf_per_16, pf_end);
    __m512 wv[C];
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) wv[c] = L::load(w + c * w_row_bytes, k);
    PENSIEVE_UNROLL
    for (int t = 0; t < T; ++t) {
      __m512 xv = _mm512_loadu_ps(x + t * x_stride + k);
      // One load per token and step: GCC otherwise folds it into each of the
      // C FMAs, and the tile becomes load-bound (as gemm_tile).
      __asm__("" : "+v"(xv));
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) acc[t][c] = _mm512_fmadd_ps(xv, wv[c], acc[t][c]);
    }
  }
  if (prefetching) prefetch_until(cursor, pf_end, pf_end);
  if (k < n) {
    const __mmask16 m = __mmask16((1u << (n - k)) - 1u);
    __m512 wv[C];
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) wv[c] = L::load_tail(w + c * w_row_bytes, k, m);
    PENSIEVE_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * x_stride + k);
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) acc[t][c] = _mm512_fmadd_ps(xv, wv[c], acc[t][c]);
    }
  }
  store_tile_sums<T, C>(acc, y, y_stride);
}

// Rows [o0, o1) of w (a block of at most batch_block_rows) for T tokens from
// x row t0 on: tiles of batch_tile_rows<T>() rows, single rows for what is
// left. With `prefetch`, each tile fetches the rows `ahead` rows after its
// own (clipped to `end`).
template <class L, int T>
inline void batch_tile_rows_sweep(const ConstRowsView& x, std::int64_t t0, const WeightView& w,
                                  const RowsView& y, std::int64_t o0, std::int64_t o1,
                                  bool prefetch, std::int64_t ahead, std::int64_t end) {
  constexpr int C = batch_tile_rows<T>();
  auto pf_range = [&](std::int64_t o, std::int64_t rows, const std::byte*& pf, const std::byte*& pf_end) {
    pf = pf_end = nullptr;
    if (!prefetch || o + ahead >= end) return;
    pf = w.row(o + ahead);
    pf_end = w.row(std::min(end, o + ahead + rows));
  };
  const std::byte *pf, *pf_end;
  std::int64_t o = o0;
  for (; o + C <= o1; o += C) {
    pf_range(o, C, pf, pf_end);
    batch_tile<L, T, C>(x.row(t0), x.stride, w.row(o), w.row_bytes, w.cols, y.row(t0) + o,
                        y.stride, pf, pf_end);
  }
  for (; o < o1; ++o) {
    pf_range(o, 1, pf, pf_end);
    batch_tile<L, T, 1>(x.row(t0), x.stride, w.row(o), w.row_bytes, w.cols, y.row(t0) + o,
                        y.stride, pf, pf_end);
  }
}

// The sweep for n_tokens (1..batch_tile_tokens) tokens from x row t0.
template <class L>
inline void batch_tile_rows_any(int n_tokens, const ConstRowsView& x, std::int64_t t0,
                                const WeightView& w, const RowsView& y, std::int64_t o0,
                                std::int64_t o1, bool prefetch, std::int64_t ahead,
                                std::int64_t end) {
  switch (n_tokens) {
#define PENSIEVE_BATCH_TILE(T) \
  case T: return batch_tile_rows_sweep<L, T>(x, t0, w, y, o0, o1, prefetch, ahead, end);
    PENSIEVE_BATCH_TILE(1) PENSIEVE_BATCH_TILE(2) PENSIEVE_BATCH_TILE(3) PENSIEVE_BATCH_TILE(4)
    PENSIEVE_BATCH_TILE(5) PENSIEVE_BATCH_TILE(6) PENSIEVE_BATCH_TILE(7) PENSIEVE_BATCH_TILE(8)
#undef PENSIEVE_BATCH_TILE
    default: break;
  }
}

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu

#endif
