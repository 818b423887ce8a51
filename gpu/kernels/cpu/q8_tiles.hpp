#pragma once
// The int8 Q8_0 matmul's AVX-512 VNNI tiles (internal to q8_matmul.cpp).
// Both compute, per output element, the block sums and F32 steps that
// q8_dot_reference defines (q8_matmul.hpp); they differ only in how they add
// a block's 32 int8 products, which is exact.
//  - decode: 1 token x 16 weight rows straight from the stored rows; a
//    block's products via vpdpbusd(w ^ 0x80, x) from a bias that undoes the
//    flip (8 int32 lanes per row), the rows' lanes reduced to one int32 per
//    row by a tree of unpacks and adds, 8 rows at a time. All ymm:
//    on Zen 4 a zmm op costs two ymm ops, and the tile is bound by the count
//    of vector ops per byte, not by their width.
//  - batches: 32 weight rows packed once per thread into a panel in VNNI
//    order (per block and 4-k step, 16 rows x 4 bytes), swept by tiles of 6
//    tokens x 32 rows whose int32 lanes are rows, so no reduction is needed:
//    vpdpbusd(x + 128, w) minus 128 * sum(w), the latter packed with the rows.
#include "gpu/kernels/cpu/q8_activations.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__F16C__)
#include <immintrin.h>
#define PENSIEVE_Q8_VNNI 1
#endif

#if defined(PENSIEVE_Q8_VNNI)

#define PENSIEVE_Q8_UNROLL _Pragma("GCC unroll 8")

namespace pensieve::kernels::cpu {

constexpr int q8_gemv_rows = 16;
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

// Lane r of the result = the sum of the 8 lanes of p[r] (exact: int32), by
// the transposing tree: interleave and add pairs of vectors, then pairs of
// those, then the 128-bit halves. All non-destructive ops (no register
// copies); vphaddd, which does the first two steps in one instruction, costs
// three cycles a piece on Zen 4.
inline __m256i q8_reduce8(const __m256i* p) {
  const auto add32 = [](__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
  };
  const auto add64 = [](__m256i a, __m256i b) {
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
  };
  const __m256i u0 = add64(add32(p[0], p[1]), add32(p[2], p[3]));
  const __m256i u1 = add64(add32(p[4], p[5]), add32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}

// The F16 scales of 8 blocks at rows[0..8) as 8 words, from 4-byte loads
// and blends (fewer vector ops than 8 word inserts): the even rows' scale is
// the low word at rows[r], the odd rows' the high word at rows[r] - 2 (the
// previous row's last bytes, so rows[0] - 2 is never read).
inline __m128i q8_scales8(const std::byte* const* rows) {
  const auto at = [](const std::byte* p) { return _mm_set1_epi32(q8_load_i32(p)); };
  const __m128i even = _mm_blend_epi32(_mm_blend_epi32(at(rows[0]), at(rows[2]), 0x2),
                                       _mm_blend_epi32(at(rows[4]), at(rows[6]), 0x8), 0xc);
  const __m128i odd = _mm_blend_epi32(_mm_blend_epi32(at(rows[1] - 2), at(rows[3] - 2), 0x2),
                                      _mm_blend_epi32(at(rows[5] - 2), at(rows[7] - 2), 0x8), 0xc);
  return _mm_blend_epi16(even, odd, 0xaa);
}

// y[r] = row r (r < 16, lanes outside store_mask not stored) of w . the
// quantised row (xq, xd) over nb blocks; [pf, pf_end) is prefetched in step
// with the blocks (pf_end <= pf: none). A block's products come from
// vpdpbusd(w ^ 0x80, x): the flip makes w the unsigned operand w + 128, and
// the accumulator starts at -128 * x's 4-byte sums, so each row's 8 lanes
// add up to the exact sum of w * x (one xor per row instead of two vpsignb).
inline void q8_gemv_tile16(const std::int8_t* xq, const float* xd, const std::byte* w,
                           std::size_t row_bytes, std::int64_t nb, float* y, __mmask16 store_mask,
                           const std::byte* pf, const std::byte* pf_end) {
  const std::size_t pf_per_block =
      pf_end > pf && nb > 0 ? std::size_t(pf_end - pf) / std::size_t(nb) + 1 : 0;
  const std::byte* cursor = pf;
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const std::byte* wb = w;
  for (std::int64_t b = 0; b < nb; ++b, wb += q8_block_bytes) {
    for (const std::byte* target = std::min(pf_end, pf + std::size_t(b + 1) * pf_per_block);
         cursor < target; cursor += 64)
      _mm_prefetch(reinterpret_cast<const char*>(cursor), _MM_HINT_T1);  // L2: see gemv_tile_rows in dot_tile.hpp
    const std::size_t r1 = q8_opaque(row_bytes), r3 = q8_opaque(3 * row_bytes);
    const std::size_t r5 = q8_opaque(5 * row_bytes), r7 = q8_opaque(7 * row_bytes);
    const std::byte* wb8 = wb + 8 * r1;
    const std::byte* rows[q8_gemv_rows] = {
        wb,  wb + r1,  wb + 2 * r1,  wb + r3,  wb + 4 * r1,  wb + r5,  wb + 2 * r3,  wb + r7,
        wb8, wb8 + r1, wb8 + 2 * r1, wb8 + r3, wb8 + 4 * r1, wb8 + r5, wb8 + 2 * r3, wb8 + r7};
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32));
    const __m256i bias = _mm256_sub_epi32(_mm256_setzero_si256(),
                                          _mm256_dpbusd_epi32(_mm256_setzero_si256(), flip, xv));
    __m256i p[q8_gemv_rows];
#pragma GCC unroll 16
    for (int r = 0; r < q8_gemv_rows; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + 2));
      p[r] = _mm256_dpbusd_epi32(bias, _mm256_xor_si256(wv, flip), xv);
    }
    const __m256 xdb = _mm256_set1_ps(xd[b]);
    const __m256 s0 = _mm256_mul_ps(_mm256_cvtph_ps(q8_scales8(rows)), xdb);
    const __m256 s1 = _mm256_mul_ps(_mm256_cvtph_ps(q8_scales8(rows + 8)), xdb);
    acc0 = _mm256_fmadd_ps(s0, _mm256_cvtepi32_ps(q8_reduce8(p)), acc0);
    acc1 = _mm256_fmadd_ps(s1, _mm256_cvtepi32_ps(q8_reduce8(p + 8)), acc1);
  }
  _mm256_mask_storeu_ps(y, __mmask8(store_mask & 0xff), acc0);
  _mm256_mask_storeu_ps(y + 8, __mmask8(store_mask >> 8), acc1);
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

}  // namespace pensieve::kernels::cpu

#endif
