#pragma once
// The int8 Q8_0 matmul's AVX-512 VNNI tiles (internal to q8_matmul.cpp).
// Both compute, per output element, the block sums and F32 steps that
// q8_dot_reference defines (q8_matmul.hpp); they differ only in how they add
// a block's 32 int8 products, which is exact.
//  - decode: 1 token x 8 weight rows straight from the stored rows; a
//    block's products via vpdpbusd(|w|, sign(x, w)) (8 int32 lanes per row),
//    the 8 rows' lanes reduced to one int32 per row together.
//  - batches: 32 weight rows packed once per thread into a panel in VNNI
//    order (per block and 4-k step, 16 rows x 4 bytes), swept by tiles of 6
//    tokens x 32 rows whose int32 lanes are rows, so no reduction is needed:
//    vpdpbusd(x + 128, w) minus 128 * sum(w), the latter packed with the rows.
#include "gpu/kernels/cpu/q8_activations.hpp"

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

// Lane r of the result = the sum of the 8 lanes of p[r].
inline __m256i q8_reduce8(const __m256i* p) {
  const __m256i t0 = _mm256_hadd_epi32(p[0], p[1]), t1 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i t2 = _mm256_hadd_epi32(p[4], p[5]), t3 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}

// y[r] = row r (r < 8) of w . the quantised row (xq, xd) over nb blocks;
// [pf, pf_end) is prefetched in step with the blocks (pf_end <= pf: none).
inline void q8_gemv_tile8(const std::int8_t* xq, const float* xd, const std::byte* w,
                          std::size_t row_bytes, std::int64_t nb, float* y, const std::byte* pf,
                          const std::byte* pf_end) {
  const std::size_t pf_per_block = pf_end > pf ? std::size_t(pf_end - pf) / std::size_t(nb) + 1 : 0;
  const std::byte* cursor = pf;
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    for (const std::byte* target = std::min(pf_end, pf + std::size_t(b + 1) * pf_per_block);
         cursor < target; cursor += 64)
      _mm_prefetch(reinterpret_cast<const char*>(cursor), _MM_HINT_T1);  // L2: see gemv_tile_rows in dot_tile.hpp
    const std::byte* wb = w + std::size_t(b) * q8_block_bytes;
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32));
    __m256i p[q8_gemv_rows];
    PENSIEVE_Q8_UNROLL
    for (int r = 0; r < q8_gemv_rows; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + r * row_bytes + 2));
      p[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(wv, wv),
                                 _mm256_sign_epi8(xv, wv));
    }
    const __m256i isum = q8_reduce8(p);
    const __m128i h = _mm_setr_epi16(
        short(q8_load_u16(wb)), short(q8_load_u16(wb + row_bytes)), short(q8_load_u16(wb + 2 * row_bytes)),
        short(q8_load_u16(wb + 3 * row_bytes)), short(q8_load_u16(wb + 4 * row_bytes)),
        short(q8_load_u16(wb + 5 * row_bytes)), short(q8_load_u16(wb + 6 * row_bytes)),
        short(q8_load_u16(wb + 7 * row_bytes)));
    const __m256 s = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(xd[b]));
    acc = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(isum), acc);
  }
  _mm256_storeu_ps(y, acc);
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
