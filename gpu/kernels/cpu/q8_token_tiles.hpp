#pragma once
// The int8 Q8_0 matmul's token tiles for decode batches (internal to
// q8_matmul.cpp, on AVX-512 VNNI): 16 weight rows x 1 to
// q8_token_tile_tokens_max tokens straight from the stored rows. Each block
// of the 16 rows is loaded once and transposed in registers into VNNI order
// (lane r = row r, one zmm per 4-byte step of the block: 24 shuffles), then
// multiplied into every token's int32 sums with no reduction after it:
// vpdpbusd(w ^ 0x80, x) with x's 4 bytes broadcast from memory
// (vnni_broadcast.hpp), from a bias of -128 * the token's block sum
// (q8_token_bias), which the flip adds. The one-token tile (q8_tiles.hpp)
// instead pays a reduction tree per token and pair of blocks; here a token
// costs 8 vpdpbusd and its F32 step per block of 16 rows, and the loads,
// transposition and scales are shared by the tile's tokens.
// Each (row, token) takes q8_dot_reference's F32 steps in block order, with
// the same operands, so it has the one-token tile's bits: the batch
// invariance of q8_matmul.hpp holds whichever tile a token runs through.
#include "gpu/kernels/cpu/q8_tiles.hpp"
#include "gpu/kernels/cpu/vnni_broadcast.hpp"

#if defined(PENSIEVE_Q8_VNNI)

namespace pensieve::kernels::cpu {
inline namespace PENSIEVE_KERNEL_NS {

constexpr int q8_token_tile_rows = 16;
constexpr int q8_token_tile_tokens_max = 8;

// Rows a and b's 32 quants of one block, a's in the low 256 bits.
inline __m512i q8_row_pair(const std::byte* a, const std::byte* b) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 1);
}

// z[i] = rows (i, i + 4) for i < 4 and (4 + i, 8 + i) for i >= 4 (in the
// 16-row tile: rows 0-3 | 4-7, 8-11 | 12-15), each 256-bit half one row's 8
// dwords. Out: w[j] lane r = dword j of row r. Per 128-bit lane an
// interleave of dwords, then of qwords, gives 4 rows' dword j (lane 0), j + 4
// (lane 1) for the low rows and the same for the high ones (lanes 2-3); one
// 128-bit shuffle per output picks the lanes in row order.
inline void q8_transpose16(const __m512i* z, __m512i* w) {
  __m512i c[2][4];
  PENSIEVE_Q8_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m512i* zh = z + 4 * h;
    const __m512i a0 = _mm512_unpacklo_epi32(zh[0], zh[1]);
    const __m512i a1 = _mm512_unpackhi_epi32(zh[0], zh[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(zh[2], zh[3]);
    const __m512i a3 = _mm512_unpackhi_epi32(zh[2], zh[3]);
    c[h][0] = _mm512_unpacklo_epi64(a0, a2);
    c[h][1] = _mm512_unpackhi_epi64(a0, a2);
    c[h][2] = _mm512_unpacklo_epi64(a1, a3);
    c[h][3] = _mm512_unpackhi_epi64(a1, a3);
  }
  PENSIEVE_Q8_UNROLL
  for (int j = 0; j < 4; ++j) {
    w[j] = _mm512_shuffle_i64x2(c[0][j], c[1][j], _MM_SHUFFLE(2, 0, 2, 0));
    w[j + 4] = _mm512_shuffle_i64x2(c[0][j], c[1][j], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// bias[t * nb + b] = -128 * the sum of token t's quants in block b, as
// 4 bytes each (read back with q8_load_i32) in buf, for tokens [0, x.rows).
inline const std::byte* q8_token_bias(const Q8Rows& x, std::vector<float>& buf) {
  const std::int64_t nb = x.blocks();
  if (buf.size() < std::size_t(x.rows * nb)) buf.resize(std::size_t(x.rows * nb));
  auto* out = reinterpret_cast<std::byte*>(buf.data());
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const std::int8_t* q = x.q_row(t);
    for (std::int64_t b = 0; b < nb; ++b) {
      std::int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += q[b * 32 + i];
      const std::int32_t bias = -128 * sum;
      std::memcpy(out + 4 * (t * nb + b), &bias, 4);
    }
  }
  return out;
}

// y[t * y_stride + r] = row r (r < 16; rows outside store_mask not stored)
// of the 16 rows at w against token t0 + t of x, over nb blocks; bias: from
// q8_token_bias. pf, when not null, is the next 16 rows (right after these),
// prefetched into the L2 in step: each block fetches the next 16 x 34 bytes
// of them (as q8_gemv_tile's pairs do for 8 rows). Each token's sum runs in
// two chains (even and odd steps), so the vpdpbusd latency hides behind
// fewer tokens.
template <int T>
inline void q8_token_tile(const Q8Rows& x, std::int64_t t0, const std::byte* bias,
                          const std::byte* w, std::size_t row_bytes, std::int64_t nb, float* y,
                          std::int64_t y_stride, __mmask16 store_mask, const std::byte* pf) {
  __m512 acc[T];
  const std::int8_t* xq[T];
  const float* xd[T];
  const std::byte* xb[T];
  PENSIEVE_Q8_UNROLL
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_setzero_ps();
    xq[t] = x.q_row(t0 + t);
    xd[t] = x.d_row(t0 + t);
    xb[t] = bias + 4 * (t0 + t) * nb;
  }
  const Q8TileRows rows(row_bytes);
  const std::size_t eight = q8_opaque(8 * row_bytes);
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  for (std::int64_t b = 0; b < nb; ++b) {
    if (pf) prefetch_l2_lines<9>(pf + std::size_t(b) * (q8_token_tile_rows * q8_block_bytes));
    const std::byte* wb = w + b * q8_block_bytes;
    const std::byte* wb8 = wb + eight;
    __m512i z[8];
    PENSIEVE_Q8_UNROLL
    for (int i = 0; i < 4; ++i) {
      z[i] = _mm512_xor_si512(q8_row_pair(rows.at(wb, i) + 2, rows.at(wb, i + 4) + 2), flip);
      z[4 + i] = _mm512_xor_si512(q8_row_pair(rows.at(wb8, i) + 2, rows.at(wb8, i + 4) + 2), flip);
    }
    __m512i wu[8];  // w + 128 as unsigned bytes, in VNNI order
    q8_transpose16(z, wu);
    const __m512 ws = _mm512_cvtph_ps(_mm256_inserti128_si256(
        _mm256_castsi128_si256(q8_scales8([&](int r) { return rows.at(wb, r); })),
        q8_scales8([&](int r) { return rows.at(wb8, r); }), 1));
    PENSIEVE_Q8_UNROLL
    for (int t = 0; t < T; ++t) {
      const std::int8_t* xt = xq[t] + b * 32;
      __m512i even = _mm512_set1_epi32(q8_load_i32(xb[t] + 4 * b));
      __m512i odd = _mm512_setzero_si512();
      PENSIEVE_Q8_UNROLL
      for (int j = 0; j < 8; j += 2) {
        even = dpbusd_bcast(even, wu[j], xt + 4 * j);
        odd = dpbusd_bcast(odd, wu[j + 1], xt + 4 * j + 4);
      }
      const __m512 s = _mm512_mul_ps(ws, _mm512_set1_ps(xd[t][b]));
      acc[t] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), acc[t]);
    }
  }
  PENSIEVE_Q8_UNROLL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * y_stride, store_mask, acc[t]);
}

// The same for 1 to q8_token_tile_tokens_max tokens.
inline void q8_token_tile_any(int n_tokens, const Q8Rows& x, std::int64_t t0, const std::byte* bias,
                              const std::byte* w, std::size_t row_bytes, std::int64_t nb, float* y,
                              std::int64_t y_stride, __mmask16 store_mask, const std::byte* pf) {
  switch (n_tokens) {
#define PENSIEVE_Q8_TOKEN_CASE(T) \
  case T:                         \
    return q8_token_tile<T>(x, t0, bias, w, row_bytes, nb, y, y_stride, store_mask, pf);
    PENSIEVE_Q8_TOKEN_CASE(1)
    PENSIEVE_Q8_TOKEN_CASE(2)
    PENSIEVE_Q8_TOKEN_CASE(3)
    PENSIEVE_Q8_TOKEN_CASE(4)
    PENSIEVE_Q8_TOKEN_CASE(5)
    PENSIEVE_Q8_TOKEN_CASE(6)
    PENSIEVE_Q8_TOKEN_CASE(7)
    PENSIEVE_Q8_TOKEN_CASE(8)
#undef PENSIEVE_Q8_TOKEN_CASE
    default:
      return;
  }
}
static_assert(q8_token_tile_tokens_max == 8);

}  // namespace PENSIEVE_KERNEL_NS
}  // namespace pensieve::kernels::cpu

#endif
