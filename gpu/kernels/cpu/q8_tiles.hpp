#pragma once
// The int8 Q8_0 matmul's AVX-512 VNNI tiles (internal to q8_matmul.cpp).
// Both compute, per output element, the block sums and F32 steps that
// q8_dot_reference defines (q8_matmul.hpp); they differ only in how they add
// a block's 32 int8 products, which is exact.
//  - decode: 1 token x 8 weight rows straight from the stored rows, two
//    blocks at a time (one per 256-bit half); a block's products via
//    vpdpbusd(w ^ 0x80, x) from a bias that undoes the flip (8 int32 lanes
//    per row and block), the lanes reduced to one int32 per row and block by
//    a tree of unpacks and adds. Its cost is the count of vector ops per
//    byte, not their width (Zen 5 runs a zmm op at a ymm op's rate), so two
//    blocks per op; and 8 rows, not 16: 16 rows are 16 streams that the
//    prefetchers follow worse (408caeb, 2026-12-01: 8 rows read 2 MiB-page DRAM at
//    the probe's rate, 16 at 85-90% of it).
//  - batches: 32 weight rows packed once per thread into a panel in VNNI
//    order (per block and 4-k step, 16 rows x 4 bytes), swept by tiles of 6
//    tokens x 32 rows whose int32 lanes are rows, so no reduction is needed:
//    vpdpbusd(x + 128, w) minus 128 * sum(w), the latter packed with the rows.
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/q8_activations.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/kernels/cpu/kernel_isa.hpp"

// VNNI on top of level 3: the file including this says so (PENSIEVE_KERNEL_VNNI)
// or its flags do.
#if PENSIEVE_KERNEL_ISA >= 3 && (defined(PENSIEVE_KERNEL_VNNI) || defined(__AVX512VNNI__))
#include <immintrin.h>
#define PENSIEVE_Q8_VNNI 1
#endif

#if defined(PENSIEVE_Q8_VNNI)

#define PENSIEVE_Q8_UNROLL _Pragma("GCC unroll 8")

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

constexpr int q8_gemv_rows = 8;
constexpr int q8_panel_rows = 32;  // two groups of 16 (one zmm of int32 each)
constexpr int q8_tile_tokens = 6;
constexpr std::size_t q8_block_bytes = 34;

inline std::uint16_t q8_load_u16(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

inline std::int32_t q8_load_i32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// An opaque copy of v: the decode tile's row offsets stay in a few
// registers (base + k * offset addressing) instead of GCC turning each of the
// 16 row addresses into its own induction pointer and spilling them.
template <class T>
inline T q8_opaque(T v) {
  asm("" : "+r"(v));
  return v;
}

// The F16 scales of 8 blocks at rows[0..8) as 8 words, from 4-byte loads
// and blends (fewer vector ops than 8 word inserts): the even rows' scale is
// the low word at rows[r], the odd rows' the high word at rows[r] - 2 (the
// previous row's last bytes, so rows[0] - 2 is never read).
// `row(r)` gives row r's block address.
template <class RowAt>
inline __m128i q8_scales8(RowAt row) {
  const auto at = [](const std::byte* p) { return _mm_set1_epi32(q8_load_i32(p)); };
  const __m128i even = _mm_blend_epi32(_mm_blend_epi32(at(row(0)), at(row(2)), 0x2),
                                       _mm_blend_epi32(at(row(4)), at(row(6)), 0x8), 0xc);
  const __m128i odd = _mm_blend_epi32(_mm_blend_epi32(at(row(1) - 2), at(row(3) - 2), 0x2),
                                      _mm_blend_epi32(at(row(5) - 2), at(row(7) - 2), 0x8), 0xc);
  return _mm_blend_epi16(even, odd, 0xaa);
}

// Lane r of the result (r < 8) = the sum of the low 8 lanes of p[r], lane
// 8 + r the sum of its high 8 lanes (exact: int32): two blocks of 8 rows in
// one pass of a transposing tree (interleave and add pairs of vectors, then
// pairs of those, then the 128-bit lanes). All non-destructive ops (no
// register copies); vphaddd, which does the first two steps in one
// instruction, costs three cycles a piece on Zen 4.
// (Functions, not lambdas: a lambda's function-pointer conversion does not
// carry the AVX-512 target of a file that sets it by pragma.)
inline __m512i q8_add32(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
inline __m512i q8_add64(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
inline __m512i q8_reduce8x2(const __m512i* p) {
  // Each 128-bit lane j of u0 (u1) holds rows 0-3 (4-7) summed over lane j of
  // the inputs; lanes 0-1 come from the low halves, 2-3 from the high ones.
  const __m512i u0 = q8_add64(q8_add32(p[0], p[1]), q8_add32(p[2], p[3]));
  const __m512i u1 = q8_add64(q8_add32(p[4], p[5]), q8_add32(p[6], p[7]));
  // [u0.0 + u0.1, u1.0 + u1.1, u0.2 + u0.3, u1.2 + u1.3]
  return _mm512_add_epi32(
      _mm512_permutex2var_epi64(u0, _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), u1),
      _mm512_permutex2var_epi64(u0, _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15), u1));
}

// Row r of a tile whose first row is at wb, as wb + index * scale from the
// offsets of rows 1, 3, 5 and 7 (made opaque so they stay in registers:
// left to itself GCC keeps the 8 row pointers in an array on the stack).
struct Q8TileRows {
  std::size_t r1, r3, r5, r7;
  explicit Q8TileRows(std::size_t row_bytes)
      : r1(q8_opaque(row_bytes)),
        r3(q8_opaque(3 * row_bytes)),
        r5(q8_opaque(5 * row_bytes)),
        r7(q8_opaque(7 * row_bytes)) {}
  const std::byte* at(const std::byte* wb, int r) const {
    switch (r) {
      case 0:
        return wb;
      case 1:
        return wb + r1;
      case 2:
        return wb + 2 * r1;
      case 3:
        return wb + r3;
      case 4:
        return wb + 4 * r1;
      case 5:
        return wb + r5;
      case 6:
        return wb + 2 * r3;
      default:
        return wb + r7;
    }
  }
};

// Prefetches (into the L2: see gemv_tile_rows in dot_tile.hpp) pair b / 2's
// share of the 8 rows at pf: its 2 x 8 x 34 bytes, which 9 lines cover from
// any start; consecutive pairs' lines leave no gap between them.
inline void q8_prefetch_pair(const std::byte* pf, std::int64_t b) {
  prefetch_l2_lines<9>(pf + std::size_t(b / 2) * (2 * q8_gemv_rows * q8_block_bytes));
}

// y[r] = row r (r < 8, rows outside store_mask not stored) of w . the
// quantised row (xq, xd) over nb blocks. pf, when not null, is the next 8
// rows (right after these), prefetched into the L2 in step: each pair of
// blocks fetches the next 2 x 8 x 34 bytes of them (9 lines cover those from
// any start, and consecutive pairs' lines leave no gap), in one unrolled
// burst (a loop with a bound per line cost about as much as the pair's
// products). A block's products come from vpdpbusd(w ^ 0x80, x): the flip
// makes w the unsigned operand w + 128, and the accumulator starts at
// -128 * x's 4-byte sums, so each row's 8 lanes add up to the exact sum of
// w * x (one xor per row instead of two vpsignb). Each row's F32 steps take
// the blocks one by one in ascending order, whether they came two at a time
// or alone.
inline void q8_gemv_tile(const std::int8_t* xq, const float* xd, const std::byte* w,
                         std::size_t row_bytes, std::int64_t nb, float* y, __mmask8 store_mask,
                         const std::byte* pf) {
  __m256 acc = _mm256_setzero_ps();
  const Q8TileRows rows(row_bytes);
  std::int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    if (pf) q8_prefetch_pair(pf, b);
    const std::byte* wb = w + b * q8_block_bytes;
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    const __m512i xv = _mm512_loadu_si512(xq + b * 32);  // blocks b and b + 1
    const __m512i bias = _mm512_sub_epi32(_mm512_setzero_si512(),
                                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, xv));
    __m512i p[q8_gemv_rows];
    PENSIEVE_Q8_UNROLL
    for (int r = 0; r < q8_gemv_rows; ++r) {
      const std::byte* row = rows.at(wb, r);
      const __m512i wv = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 + q8_block_bytes)), 1);
      p[r] = _mm512_dpbusd_epi32(bias, _mm512_xor_si512(wv, flip), xv);
    }
    // Lanes 0-7: rows 0-7 of block b; lanes 8-15: of block b + 1.
    const __m512 sums = _mm512_cvtepi32_ps(q8_reduce8x2(p));
    const __m512 xdb = _mm512_insertf32x8(_mm512_set1_ps(xd[b]), _mm256_set1_ps(xd[b + 1]), 1);
    const __m512 s =
        _mm512_mul_ps(_mm512_cvtph_ps(_mm256_inserti128_si256(
                          _mm256_castsi128_si256(q8_scales8([&](int r) { return rows.at(wb, r); })),
                          q8_scales8([&](int r) { return rows.at(wb + q8_block_bytes, r); }), 1)),
                      xdb);
    acc = _mm256_fmadd_ps(_mm512_castps512_ps256(s), _mm512_castps512_ps256(sums), acc);
    acc = _mm256_fmadd_ps(_mm512_extractf32x8_ps(s, 1), _mm512_extractf32x8_ps(sums, 1), acc);
  }
  if (b < nb) {  // an odd last block, alone in the low halves (the high ones zero)
    if (pf) q8_prefetch_pair(pf, b);
    const std::byte* wb = w + b * q8_block_bytes;
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32));
    const __m256i bias = _mm256_sub_epi32(_mm256_setzero_si256(),
                                          _mm256_dpbusd_epi32(_mm256_setzero_si256(), flip, xv));
    __m512i p[q8_gemv_rows];
    PENSIEVE_Q8_UNROLL
    for (int r = 0; r < q8_gemv_rows; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.at(wb, r) + 2));
      p[r] = _mm512_zextsi256_si512(_mm256_dpbusd_epi32(bias, _mm256_xor_si256(wv, flip), xv));
    }
    const __m256 s = _mm256_mul_ps(
        _mm256_cvtph_ps(q8_scales8([&](int r) { return rows.at(wb, r); })), _mm256_set1_ps(xd[b]));
    acc = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(_mm512_castsi512_si256(q8_reduce8x2(p))), acc);
  }
  _mm256_mask_storeu_ps(y, store_mask, acc);
}

// 32 weight rows over all nb blocks in VNNI order, for one thread.
struct Q8Panel {
  std::int8_t* quants;  // [group 2][block nb][step 8][row 16][4 bytes]
  float* scales;        // [group 2][block nb][row 16]
  std::int32_t* bias;   // [group 2][block nb][row 16]: -128 * sum of the block's quants
};

inline Q8Panel q8_panel(std::vector<float>& buf, std::int64_t nb) {
  const std::size_t per_group_blocks = std::size_t(nb) * 16;
  const std::size_t quant_floats = 2 * per_group_blocks * 32 / 4;
  if (buf.size() < quant_floats + 4 * per_group_blocks) buf.resize(quant_floats + 4 * per_group_blocks);
  float* base = buf.data();
  return {reinterpret_cast<std::int8_t*>(base), base + quant_floats,
          reinterpret_cast<std::int32_t*>(base + quant_floats + 2 * per_group_blocks)};
}

// Packs rows [o, o + n_rows) (n_rows <= 32; missing rows as zeros).
inline void q8_pack_panel(const WeightView& w, std::int64_t o, int n_rows, std::int64_t nb,
                          const Q8Panel& p) {
  for (int r = 0; r < q8_panel_rows; ++r) {
    const std::size_t g = std::size_t(r / 16), lane = std::size_t(r % 16);
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::size_t gb = g * std::size_t(nb) + std::size_t(b);
      std::int8_t* dst = p.quants + gb * 512 + lane * 4;
      if (r >= n_rows) {
        for (int j = 0; j < 8; ++j) std::memset(dst + j * 64, 0, 4);
        p.scales[gb * 16 + lane] = 0.0f;
        p.bias[gb * 16 + lane] = 0;
        continue;
      }
      const std::byte* src = w.row(o + r) + std::size_t(b) * q8_block_bytes;
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2));
      // Sum of the 32 signed quants: |q| . sign(1, q) with vpdpbusd, then 8 lanes.
      const __m256i sums =
          _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(q, q),
                              _mm256_sign_epi8(_mm256_set1_epi8(1), q));
      alignas(32) std::int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sums);
      std::int32_t total = 0;
      for (int i = 0; i < 8; ++i) total += lanes[i];
      for (int j = 0; j < 8; ++j) std::memcpy(dst + j * 64, src + 2 + 4 * j, 4);
      p.scales[gb * 16 + lane] = _cvtsh_ss(q8_load_u16(src));
      p.bias[gb * 16 + lane] = -128 * total;
    }
  }
}

// Tokens [t, t + T) x rows [o, o + n_rows) of y from a packed panel.
template <int T>
inline void q8_gemm_tile(const Q8Rows& x, std::int64_t t, const Q8Panel& p, std::int64_t nb,
                         const RowsView& y, std::int64_t o, int n_rows) {
  __m512 acc[T][2];
  PENSIEVE_Q8_UNROLL
  for (int i = 0; i < T; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const std::uint8_t* xu[T];
  const float* xd[T];
  PENSIEVE_Q8_UNROLL
  for (int i = 0; i < T; ++i) {
    xu[i] = x.u_row(t + i);
    xd[i] = x.d_row(t + i);
  }
  const std::int8_t* q1 = p.quants + std::size_t(nb) * 512;
  for (std::int64_t b = 0; b < nb; ++b) {
    const __m512i bias0 = _mm512_loadu_si512(p.bias + b * 16);
    const __m512i bias1 = _mm512_loadu_si512(p.bias + (nb + b) * 16);
    __m512i isum[T][2];
    PENSIEVE_Q8_UNROLL
    for (int i = 0; i < T; ++i) {
      isum[i][0] = bias0;
      isum[i][1] = bias1;
    }
    PENSIEVE_Q8_UNROLL
    for (int j = 0; j < 8; ++j) {
      const __m512i w0 = _mm512_loadu_si512(p.quants + (b * 8 + j) * 64);
      const __m512i w1 = _mm512_loadu_si512(q1 + (b * 8 + j) * 64);
      PENSIEVE_Q8_UNROLL
      for (int i = 0; i < T; ++i) {
        const __m512i xv = _mm512_set1_epi32(q8_load_i32(xu[i] + b * 32 + 4 * j));
        isum[i][0] = _mm512_dpbusd_epi32(isum[i][0], xv, w0);
        isum[i][1] = _mm512_dpbusd_epi32(isum[i][1], xv, w1);
      }
    }
    const __m512 s0 = _mm512_loadu_ps(p.scales + b * 16);
    const __m512 s1 = _mm512_loadu_ps(p.scales + (nb + b) * 16);
    PENSIEVE_Q8_UNROLL
    for (int i = 0; i < T; ++i) {
      const __m512 dx = _mm512_set1_ps(xd[i][b]);
      acc[i][0] = _mm512_fmadd_ps(_mm512_mul_ps(s0, dx), _mm512_cvtepi32_ps(isum[i][0]), acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(_mm512_mul_ps(s1, dx), _mm512_cvtepi32_ps(isum[i][1]), acc[i][1]);
    }
  }
  const __mmask16 m0 = __mmask16(n_rows >= 16 ? 0xffffu : (1u << n_rows) - 1u);
  const __mmask16 m1 = __mmask16(n_rows >= 32 ? 0xffffu : n_rows <= 16 ? 0u : (1u << (n_rows - 16)) - 1u);
  PENSIEVE_Q8_UNROLL
  for (int i = 0; i < T; ++i) {
    _mm512_mask_storeu_ps(y.row(t + i) + o, m0, acc[i][0]);
    _mm512_mask_storeu_ps(y.row(t + i) + o + 16, m1, acc[i][1]);
  }
}

// The same for a remainder of 0 to q8_tile_tokens - 1 tokens.
inline void q8_gemm_tile_any(int n_tokens, const Q8Rows& x, std::int64_t t, const Q8Panel& p,
                             std::int64_t nb, const RowsView& y, std::int64_t o, int n_rows) {
  switch (n_tokens) {
    case 1: return q8_gemm_tile<1>(x, t, p, nb, y, o, n_rows);
    case 2: return q8_gemm_tile<2>(x, t, p, nb, y, o, n_rows);
    case 3: return q8_gemm_tile<3>(x, t, p, nb, y, o, n_rows);
    case 4: return q8_gemm_tile<4>(x, t, p, nb, y, o, n_rows);
    case 5: return q8_gemm_tile<5>(x, t, p, nb, y, o, n_rows);
    default: return;
  }
}

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu

#endif
