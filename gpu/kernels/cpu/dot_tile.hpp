#pragma once
// The matmul micro-kernel (internal to matmul.cpp and its tests): dot
// products of up to 4 activation rows with up to 4 weight rows. Each output
// element keeps its own 16-lane accumulator fed in ascending k, then one
// fixed horizontal sum, so its bits never depend on the tile shape.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/prefetch.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpu/kernels/cpu/kernel_isa.hpp"

#if PENSIEVE_KERNEL_ISA >= 3
#include <immintrin.h>
#define PENSIEVE_DOT_AVX512 1

#include "gpu/kernels/cpu/lane_sums.hpp"
#endif

// The register tile only works when these small loops are fully unrolled
// (GCC leaves them rolled at -O2 and spills the accumulators).
#define PENSIEVE_UNROLL _Pragma("GCC unroll 8")

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

#if defined(PENSIEVE_DOT_AVX512)

inline float load_scale(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Loaders: 16 weights starting at element k of a stored row, as F32 exactly
// as dequantize_row() gives them. load_tail reads only the lanes in `m`.
struct LoadF32 {
  static __m512 load(const std::byte* row, std::int64_t k) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static __m512 load_tail(const std::byte* row, std::int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
};

struct LoadF16 {
  static __m512 load(const std::byte* row, std::int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 load_tail(const std::byte* row, std::int64_t k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};

struct LoadBF16 {
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const std::byte* row, std::int64_t k) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * k)));
  }
  static __m512 load_tail(const std::byte* row, std::int64_t k, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + 2 * k));
  }
};

// Q8_0: blocks of 32 = f16 scale + 32 x int8; the row length is whole blocks.
struct LoadQ8_0 {
  static __m512 load(const std::byte* row, std::int64_t k) {
    const std::byte* blk = row + (k >> 5) * 34;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + (k & 16)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                         _mm512_set1_ps(load_scale(blk)));
  }
  static __m512 load_tail(const std::byte* row, std::int64_t k, __mmask16) { return load(row, k); }
  // Both halves of the block at k (a multiple of 32), converting the scale once.
  // Each half widens straight from memory and the scale converts broadcast
  // (no extract, no scalar round trip): fewer uops on the FP pipes, which
  // bound a Q8_0 GEMV. The values are the same as load()'s.
  static void load_pair(const std::byte* row, std::int64_t k, __m512& lo, __m512& hi) {
    const std::byte* blk = row + (k >> 5) * 34;
    std::uint16_t h;
    std::memcpy(&h, blk, 2);
    const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(std::int16_t(h)));
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
    lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
    hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
  }
  static constexpr bool paired = true;
};

// Q4_0: blocks of 32 = f16 scale + 16 bytes; element i is the low nibble of
// byte i, element 16 + i the high nibble; value (q - 8) * scale.
struct LoadQ4_0 {
  static __m512 load(const std::byte* row, std::int64_t k) {
    const std::byte* blk = row + (k >> 5) * 18;
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    if (k & 16) b = _mm_srli_epi16(b, 4);
    b = _mm_and_si128(b, _mm_set1_epi8(0x0f));
    const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(b), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(load_scale(blk)));
  }
  static __m512 load_tail(const std::byte* row, std::int64_t k, __mmask16) { return load(row, k); }
  static void load_pair(const std::byte* row, std::int64_t k, __m512& lo, __m512& hi) {
    lo = load(row, k);
    hi = load(row, k + 16);
  }
  static constexpr bool paired = true;
};

// Q4_K: super-blocks of 256 (see dequantize_row); k is a multiple of 16 and
// the values are exactly dequantize_row's: (d * scale) * q - dmin * min,
// products rounded separately.
struct LoadQ4_K {
  struct Sub {
    __m512 d1, m1;
    const std::byte* q;  // the 32 bytes whose nibbles hold this sub-block
    bool high;
  };
  static Sub sub(const std::byte* row, std::int64_t k) {
    const std::byte* blk = row + (k >> 8) * 144;
    const int j = int((k & 255) >> 5);
    const Q4KScale s = q4_k_scale(reinterpret_cast<const std::uint8_t*>(blk + 4), j);
    const float d = load_scale(blk), dmin = load_scale(blk + 2);
    return {_mm512_set1_ps(d * float(s.scale)), _mm512_set1_ps(dmin * float(s.min)),
            blk + 16 + 32 * (j >> 1), (j & 1) != 0};
  }
  static __m512 widen(const Sub& s, int half) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.q + 16 * half));
    if (s.high) b = _mm_srli_epi16(b, 4);
    b = _mm_and_si128(b, _mm_set1_epi8(0x0f));
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b));
    return _mm512_sub_ps(_mm512_mul_ps(s.d1, q), s.m1);
  }
  static __m512 load(const std::byte* row, std::int64_t k) { return widen(sub(row, k), int((k >> 4) & 1)); }
  static __m512 load_tail(const std::byte* row, std::int64_t k, __mmask16) { return load(row, k); }
  static void load_pair(const std::byte* row, std::int64_t k, __m512& lo, __m512& hi) {
    const Sub s = sub(row, k);
    lo = widen(s, 0);
    hi = widen(s, 1);
  }
  static constexpr bool paired = true;
};

// Whether a loader reads whole 32-element blocks (load_pair); floats do not.
template <class L>
concept PairedLoader = L::paired;

// The fixed horizontal sum: halves, then quarters, pairs, neighbours.
inline float hsum16(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xb1));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xb1));
  return _mm512_cvtss_f32(v);
}

// The decode tiles (matmul.cpp): 1 or 2 tokens against this many consecutive
// weight rows (16 accumulators, 4 activation registers and a weight pair fit
// the 32 zmm registers). While a tile streams its rows it prefetches as many
// following rows at the same pace: the hardware prefetchers stop at 4 KiB
// page boundaries, and a mapped GGUF's rows sit on 4 KiB pages. The
// prefetches go to the L2, not the L1: 8 rows being read plus 8 being
// fetched, each a multiple of 4 KiB apart (an F32 row of 1024), fall into the
// same L1 sets and evict each other; into the L1 the stream ran at ~11 GB/s
// per core, into the L2 at ~18 (2 MiB pages, single core, BM_MatmulDecode).
// F32 rows prefetch only their heads (below; since 5c8243a); F16 tiles are 4
// rows with a burst of 4 lines per step (f16_tile_rows; since 742f67c).
constexpr int gemv_tile_rows = 8;

// Lines of each following row that an F32 decode tile prefetches (into the
// L2) before it starts: a row is a new stream that the hardware prefetchers
// must first learn, and its head is what they miss; on 2 MiB pages they
// fetch the rest of an F32 row (3-4 KiB) in time, and streaming the whole
// rows in step only costs. Measured at 5c8243a (2026-12-01), one token, 4-8 interleaved
// repetitions, in step / heads: from the L2 97 / 119 GB/s, from DRAM one
// thread 33.4 / 38.3, two 54 / 53-70 (noisy); model-bench F32 decode, %
// of the probes, medians of 3 alternated: M-tiny 107 / 120, M-100 87 / 100,
// M-400 91 / 94. Heads only did not suit F16 rows (1.5-2 KiB): M-100 F16
// fell 89.5 -> 75.5% (medians of 4 alternated), M-400 level; one F16 token
// takes the burst tile below, several the in-step prefetch.
constexpr int row_head_lines = 4;

// Prefetches the first row_head_lines lines of rows [first, last), rows
// row_bytes apart.
inline void prefetch_row_heads(const std::byte* first, const std::byte* last, std::size_t row_bytes) {
  for (const std::byte* r = first; r < last; r += row_bytes) {
    PENSIEVE_UNROLL
    for (int l = 0; l < row_head_lines; ++l) prefetch_l2(r + 64 * l);
  }
}

// F16 decode tiles: 4 rows, each 32-element step prefetching the next 4
// rows' 4 lines (the 256 bytes the step itself reads, one tile ahead) in one
// unrolled burst. Side by side with the probe in the same rounds (2
// threads, 2 MiB pages), probe at 76-81 GB/s: M-400's gate 2816 x 1024, 8
// rows with a line-at-a-time loop 54-59 GB/s, 4 rows with that loop 65-67;
// M-100's gate 2048 x 768, 8 rows 54.7, 4 rows with the loop 62.9, with a
// burst 68.7; probe at ~48: all within a few % of it. Fewer rows are fewer
// streams for the prefetchers, and the loop's compare per line cost about
// as much as the step's conversions.
constexpr int f16_tile_rows = 4;

// Advances the prefetch cursor to `target` (at most `end`), a line at a time.
inline void prefetch_until(const std::byte*& cursor, const std::byte* target, const std::byte* end) {
  if (target > end) target = end;
  for (; cursor < target; cursor += 64) prefetch_l2(cursor);
}

// The dot products' k loop, shared by the two tiles below: acc[r][c] (the
// 16-lane accumulator of x row r (rows x_stride apart) . row c of w) takes
// k in [k0, k1) in ascending order: whole 32-element steps, then 16, then a
// masked tail. [pf, pf_end) is prefetched into the L2 in step with the
// 32-element steps, pf_per_32 bytes per step (pf_end <= pf: none); or, for
// a Burst tile, C lines per step from pf on (pf null: none).
template <class L, int R, int C, bool Burst = false>
inline void dot_tile_k(const float* x, std::int64_t x_stride, const std::byte* w,
                       std::size_t w_row_bytes, std::int64_t k0, std::int64_t k1,
                       __m512 (&acc)[R][C], const std::byte* pf, const std::byte* pf_end,
                       std::size_t pf_per_32) {
  const bool prefetching = Burst ? pf != nullptr : pf_end > pf;
  const std::byte* cursor = pf;
  std::int64_t k = k0;
  for (std::size_t step = 1; k + 32 <= k1; k += 32, ++step) {
    if constexpr (Burst) {
      if (prefetching) prefetch_l2_lines<C>(pf + (step - 1) * 64 * C);
    } else if (prefetching) {
      prefetch_until(cursor, pf + step * pf_per_32, pf_end);
    }
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
  if (!Burst && prefetching) prefetch_until(cursor, pf_end, pf_end);
  for (; k + 16 <= k1; k += 16) {
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) {
      const __m512 wv = L::load(w + c * w_row_bytes, k);
      PENSIEVE_UNROLL
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * x_stride + k), wv, acc[r][c]);
    }
  }
  if (k < k1) {
    const __mmask16 m = __mmask16((1u << (k1 - k)) - 1u);
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) {
      const __m512 wv = L::load_tail(w + c * w_row_bytes, k, m);
      PENSIEVE_UNROLL
      for (int r = 0; r < R; ++r)
        acc[r][c] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + r * x_stride + k), wv, acc[r][c]);
    }
  }
}

// y[r * y_stride + c] = row c of w (c < C) . x row r (r < R) over n
// elements (dot_tile_k's order); [pf, pf_end) is prefetched into the L2 in
// step with the k loop (the decode tiles pass the rows after theirs;
// default: none), for a Burst tile C lines per step from pf on.
template <class L, int R, int C, bool Burst = false>
inline void dot_tile_fixed(const float* x, std::int64_t x_stride, const std::byte* w,
                           std::size_t w_row_bytes, std::int64_t n, float* y, std::int64_t y_stride,
                           const std::byte* pf = nullptr, const std::byte* pf_end = nullptr) {
  __m512 acc[R][C];
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  // Bytes of the next rows to prefetch per 32 elements: the C rows' share.
  const std::size_t pf_per_32 = (C * w_row_bytes * 32 + std::size_t(n) - 1) / std::size_t(n);
  dot_tile_k<L, R, C, Burst>(x, x_stride, w, w_row_bytes, 0, n, acc, pf, pf_end, pf_per_32);
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

// The same dot products over k in [k0, k1) only, continuing from and
// returning to the 16-lane accumulators in acc_out (R x C x 16 floats, tile
// order). A row split into K blocks that are multiples of 32 (but the last)
// performs exactly the FMAs of dot_tile_fixed in the same order, so hsum16
// of the final accumulators equals its result bit for bit.
template <class L, int R, int C>
inline void dot_tile_acc_fixed(const float* x, std::int64_t x_stride, const std::byte* w,
                               std::size_t w_row_bytes, std::int64_t k0, std::int64_t k1,
                               float* acc_out) {
  __m512 acc[R][C];
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_loadu_ps(acc_out + (r * C + c) * 16);
  dot_tile_k<L, R, C>(x, x_stride, w, w_row_bytes, k0, k1, acc, nullptr, nullptr, 0);
  PENSIEVE_UNROLL
  for (int r = 0; r < R; ++r)
    PENSIEVE_UNROLL
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(acc_out + (r * C + c) * 16, acc[r][c]);
}

inline float hsum_lanes(const float* lanes) { return hsum16(_mm512_loadu_ps(lanes)); }

#else  // portable twin: the same 16-lane order in scalar code

template <model::DType T>
struct LoadPortable {
  static constexpr model::DType dtype = T;
};
using LoadF32 = LoadPortable<model::DType::f32>;
using LoadF16 = LoadPortable<model::DType::f16>;
using LoadBF16 = LoadPortable<model::DType::bf16>;
using LoadQ8_0 = LoadPortable<model::DType::q8_0>;
using LoadQ4_0 = LoadPortable<model::DType::q4_0>;
using LoadQ4_K = LoadPortable<model::DType::q4_k>;

constexpr int gemv_tile_rows = 8;
constexpr int f16_tile_rows = 4;

// The AVX-512 decode tiles' prefetches: nothing to do here.
inline void prefetch_row_heads(const std::byte*, const std::byte*, std::size_t) {}

// [pf, pf_end): the AVX-512 tile's prefetch range, nothing to do here.
template <class L, int R, int C, bool Burst = false>
inline void dot_tile_fixed(const float* x, std::int64_t x_stride, const std::byte* w,
                           std::size_t w_row_bytes, std::int64_t n, float* y, std::int64_t y_stride,
                           const std::byte* /*pf*/ = nullptr,
                           const std::byte* /*pf_end*/ = nullptr) {
  std::vector<float> wrow(static_cast<std::size_t>(n));
  PENSIEVE_UNROLL
  for (int c = 0; c < C; ++c) {
    dequantize_row(L::dtype, w + c * w_row_bytes, n, wrow.data());
    PENSIEVE_UNROLL
    for (int r = 0; r < R; ++r) {
      float lanes[16] = {};
      for (std::int64_t k = 0; k < n; ++k) {
        lanes[k % 16] = __builtin_fmaf(x[r * x_stride + k], wrow[std::size_t(k)], lanes[k % 16]);
      }
      for (int width = 8; width >= 1; width /= 2)
        for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
      y[r * y_stride + c] = lanes[0];
    }
  }
}

template <class L, int R, int C>
inline void dot_tile_acc_fixed(const float* x, std::int64_t x_stride, const std::byte* w,
                               std::size_t w_row_bytes, std::int64_t k0, std::int64_t k1,
                               float* acc_out) {
  // Dequantise whole blocks of 32 around [k0, k1) (k0 is a multiple of 32).
  std::vector<float> wrow(static_cast<std::size_t>(k1 - k0));
  PENSIEVE_UNROLL
  for (int c = 0; c < C; ++c) {
    const std::byte* row = w + c * w_row_bytes;
    const std::int64_t block = model::dtype_block_elems(L::dtype);
    dequantize_row(L::dtype, row + model::dtype_row_bytes(L::dtype, k0 / block * block) , k1 - k0, wrow.data());
    PENSIEVE_UNROLL
    for (int r = 0; r < R; ++r) {
      float* lanes = acc_out + (r * C + c) * 16;
      for (std::int64_t k = k0; k < k1; ++k) {
        lanes[k % 16] = __builtin_fmaf(x[r * x_stride + k], wrow[std::size_t(k - k0)], lanes[k % 16]);
      }
    }
  }
}

inline float hsum_lanes(const float* in) {
  float lanes[16];
  std::memcpy(lanes, in, sizeof lanes);
  for (int width = 8; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

#endif

// Runs the accumulating tile for n_tokens x n_out (each 1..4).
template <class L>
inline void dot_tile_acc(int n_tokens, int n_out, const float* x, std::int64_t x_stride,
                         const std::byte* w, std::size_t w_row_bytes, std::int64_t k0,
                         std::int64_t k1, float* acc) {
#define PENSIEVE_TILE(R, C)                                                     \
  case (R - 1) * 4 + (C - 1):                                                   \
    dot_tile_acc_fixed<L, R, C>(x, x_stride, w, w_row_bytes, k0, k1, acc);      \
    return;
  switch ((n_tokens - 1) * 4 + (n_out - 1)) {
    PENSIEVE_TILE(1, 1) PENSIEVE_TILE(1, 2) PENSIEVE_TILE(1, 3) PENSIEVE_TILE(1, 4)
    PENSIEVE_TILE(2, 1) PENSIEVE_TILE(2, 2) PENSIEVE_TILE(2, 3) PENSIEVE_TILE(2, 4)
    PENSIEVE_TILE(3, 1) PENSIEVE_TILE(3, 2) PENSIEVE_TILE(3, 3) PENSIEVE_TILE(3, 4)
    PENSIEVE_TILE(4, 1) PENSIEVE_TILE(4, 2) PENSIEVE_TILE(4, 3) PENSIEVE_TILE(4, 4)
    default: break;
  }
#undef PENSIEVE_TILE
}

// Runs the tile for n_tokens x n_out (each 1..4).
template <class L>
inline void dot_tile(int n_tokens, int n_out, const float* x, std::int64_t x_stride,
                     const std::byte* w, std::size_t w_row_bytes, std::int64_t n, float* y,
                     std::int64_t y_stride) {
#define PENSIEVE_TILE(R, C)                                                     \
  case (R - 1) * 4 + (C - 1):                                                   \
    dot_tile_fixed<L, R, C>(x, x_stride, w, w_row_bytes, n, y, y_stride);       \
    return;
  switch ((n_tokens - 1) * 4 + (n_out - 1)) {
    PENSIEVE_TILE(1, 1) PENSIEVE_TILE(1, 2) PENSIEVE_TILE(1, 3) PENSIEVE_TILE(1, 4)
    PENSIEVE_TILE(2, 1) PENSIEVE_TILE(2, 2) PENSIEVE_TILE(2, 3) PENSIEVE_TILE(2, 4)
    PENSIEVE_TILE(3, 1) PENSIEVE_TILE(3, 2) PENSIEVE_TILE(3, 3) PENSIEVE_TILE(3, 4)
    PENSIEVE_TILE(4, 1) PENSIEVE_TILE(4, 2) PENSIEVE_TILE(4, 3) PENSIEVE_TILE(4, 4)
    default: break;
  }
#undef PENSIEVE_TILE
}

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu
