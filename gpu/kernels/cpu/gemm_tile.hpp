#pragma once
// The batched matmul's register tile (internal to matmul.cpp and its tests):
// up to 6 activation rows x 4 weight rows of F32 over a k range, with the
// weights taken from an F32 panel (a stored F32 row, or quantised rows
// dequantised once per panel by the loaders of dot_tile.hpp). Each output
// element keeps its own 16-lane accumulator fed in ascending k exactly as
// dot_tile_fixed feeds it, so a row's bits are the same whichever path
// (decode or batched) and whichever tile computed it.
#include "gpu/kernels/cpu/dot_tile.hpp"
#include "gpu/kernels/cpu/lane_sums.hpp"

#if defined(PENSIEVE_DOT_AVX512)

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

// Widest tile: tokens x weight rows. 24 accumulators + 4 weights + 1
// activation = 29 of the 32 zmm registers.
constexpr int gemm_tile_tokens = 6;
constexpr int gemm_tile_rows = 4;

// panel[0 .. round_up(k1 - k0, 16)) = elements [k0, k1) of a stored row as
// F32, exactly the values L::load gives; lanes past k1 are zero. k0 is a
// multiple of 32.
template <class L>
inline void dequant_panel_row(const std::byte* row, std::int64_t k0, std::int64_t k1, float* panel) {
  std::int64_t k = k0;
  if constexpr (PairedLoader<L>) {
    for (; k + 32 <= k1; k += 32) {
      __m512 lo, hi;
      L::load_pair(row, k, lo, hi);
      _mm512_storeu_ps(panel + (k - k0), lo);
      _mm512_storeu_ps(panel + (k - k0) + 16, hi);
    }
  }
  for (; k + 16 <= k1; k += 16) _mm512_storeu_ps(panel + (k - k0), L::load(row, k));
  if (k < k1) {
    const __mmask16 m = __mmask16((1u << (k1 - k)) - 1u);
    _mm512_storeu_ps(panel + (k - k0), L::load_tail(row, k, m));
  }
}

// y[r * y_stride + c] = hsum16(acc[r][c]), the sums taken 16 and 8 at a
// time (lane_sums.hpp): one at a time they cost a third of a K = 256 tile.
template <int R, int C>
inline void store_tile_sums(const __m512 (&acc)[R][C], float* y, std::int64_t y_stride) {
  constexpr int n = R * C;
  const __m512* flat = &acc[0][0];
  alignas(64) float sums[(n + 15) / 16 * 16];
  int i = 0;
  PENSIEVE_UNROLL
  for (; i + 16 <= n; i += 16) _mm512_store_ps(sums + i, hsum16_many<16>(flat + i));
  if constexpr (n % 16 >= 8) {
    _mm512_mask_storeu_ps(sums + i, 0xff, hsum16_many<8>(flat + i));
    i += 8;
  }
  PENSIEVE_UNROLL
  for (; i < n; ++i) sums[i] = hsum16(flat[i]);
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) y[r * y_stride + c] = sums[r * C + c];
}

// Accumulators of an R x C tile over k in [0, n) of x (rows x_stride apart)
// and w (F32 rows w_stride apart). `first`: start from zero, else from acc
// (R x C x 16 floats, tile order). `last`: write the horizontal sums to
// y[r * y_stride + c], else store the accumulators back to acc.
template <int R, int C>
inline void gemm_tile(const float* x, std::int64_t x_stride, const float* w, std::int64_t w_stride,
                      std::int64_t n, float* acc_io, bool first, bool last, float* y,
                      std::int64_t y_stride) {
  __m512 acc[R][C];
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c)
      acc[r][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_io + (r * C + c) * 16);
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    __m512 wv[C];
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) wv[c] = _mm512_loadu_ps(w + c * w_stride + k);
    PENSIEVE_UNROLL
    for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_loadu_ps(x + r * x_stride + k);
      // Keep the activation in a register: GCC otherwise folds its load into
      // each of the C FMAs, and the tile becomes load-bound.
      __asm__("" : "+v"(xv));
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (k < n) {
    const __mmask16 m = __mmask16((1u << (n - k)) - 1u);
    __m512 wv[C];
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) wv[c] = _mm512_maskz_loadu_ps(m, w + c * w_stride + k);
    PENSIEVE_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + r * x_stride + k);
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if (last) {
    store_tile_sums<R, C>(acc, y, y_stride);
  } else {
    PENSIEVE_UNROLL
    for (int r = 0; r < R; ++r)
      PENSIEVE_UNROLL
      for (int c = 0; c < C; ++c) _mm512_storeu_ps(acc_io + (r * C + c) * 16, acc[r][c]);
  }
}

// Runs gemm_tile for n_tokens (1..gemm_tile_tokens) x n_out (1..gemm_tile_rows).
inline void gemm_tile_any(int n_tokens, int n_out, const float* x, std::int64_t x_stride,
                          const float* w, std::int64_t w_stride, std::int64_t n, float* acc,
                          bool first, bool last, float* y, std::int64_t y_stride) {
  static_assert(gemm_tile_tokens <= 8 && gemm_tile_rows <= 4);
#define PENSIEVE_GEMM_TILE(R, C)                                                        \
  case (R - 1) * 4 + (C - 1):                                                           \
    if constexpr (R <= gemm_tile_tokens && C <= gemm_tile_rows)                         \
      gemm_tile<R, C>(x, x_stride, w, w_stride, n, acc, first, last, y, y_stride);      \
    return;
#define PENSIEVE_GEMM_ROW(R) \
  PENSIEVE_GEMM_TILE(R, 1) PENSIEVE_GEMM_TILE(R, 2) PENSIEVE_GEMM_TILE(R, 3) PENSIEVE_GEMM_TILE(R, 4)
  switch ((n_tokens - 1) * 4 + (n_out - 1)) {
    PENSIEVE_GEMM_ROW(1) PENSIEVE_GEMM_ROW(2) PENSIEVE_GEMM_ROW(3) PENSIEVE_GEMM_ROW(4)
    PENSIEVE_GEMM_ROW(5) PENSIEVE_GEMM_ROW(6) PENSIEVE_GEMM_ROW(7) PENSIEVE_GEMM_ROW(8)
    default: break;
  }
#undef PENSIEVE_GEMM_ROW
#undef PENSIEVE_GEMM_TILE
}

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu

#endif
