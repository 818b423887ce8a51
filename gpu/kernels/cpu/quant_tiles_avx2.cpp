// The AVX2 token tile of quant_dot.hpp for Q8_0 (QuantDotTokenTileFn): 8
// weight rows x 1 to quant_dot_tile_tokens_max tokens, for the decode
// batches of a CPU without AVX-512 VNNI (with it, matmul() takes
// q8_token_tiles.hpp instead). Each block of the 8 rows is loaded once and
// transposed in registers (lane r = row r, one ymm per 4-byte step of the
// block), so every token's products land in its rows' int32 lanes with no
// reduction: per step |w| x (x with w's sign) by vpmaddubsw (at most
// 2 x 128 x 127, below its saturation) and vpmaddwd, as dot_q8_0 of
// quant_dot_avx2.cpp computes them. Row r of token t then takes that
// kernel's F32 steps in lane r of t's vector chain, in block order with the
// same operands, so it has that kernel's bits. Built with any -march: the
// functions carry their own target attribute.
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"

#include <cassert>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PENSIEVE_QUANT_TILES_AVX2 1
#endif

namespace pensieve::kernels::cpu {

using model::DType;

#if defined(PENSIEVE_QUANT_TILES_AVX2)

#define PENSIEVE_AVX2_TILE_FN __attribute__((target("avx2,fma,f16c")))
#define PENSIEVE_AVX2_TILE_UNROLL _Pragma("GCC unroll 8")

namespace {

constexpr std::size_t q8_0_block_bytes = 34;

PENSIEVE_AVX2_TILE_FN inline std::int32_t load_i32(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

PENSIEVE_AVX2_TILE_FN inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// r[i]: row i's 8 dwords. Out: w[j] lane i = dword j of row i (an 8 x 8
// transpose: dwords, then qwords within 128-bit lanes, then the lanes).
PENSIEVE_AVX2_TILE_FN inline void transpose8(const __m256i* r, __m256i* w) {
  __m256i c[2][4];
  PENSIEVE_AVX2_TILE_UNROLL
  for (int h = 0; h < 2; ++h) {
    const __m256i* rh = r + 4 * h;
    const __m256i a0 = _mm256_unpacklo_epi32(rh[0], rh[1]);
    const __m256i a1 = _mm256_unpackhi_epi32(rh[0], rh[1]);
    const __m256i a2 = _mm256_unpacklo_epi32(rh[2], rh[3]);
    const __m256i a3 = _mm256_unpackhi_epi32(rh[2], rh[3]);
    // Lane 0 (1): rows 4h..4h+3's dword k (k + 4).
    c[h][0] = _mm256_unpacklo_epi64(a0, a2);
    c[h][1] = _mm256_unpackhi_epi64(a0, a2);
    c[h][2] = _mm256_unpacklo_epi64(a1, a3);
    c[h][3] = _mm256_unpackhi_epi64(a1, a3);
  }
  PENSIEVE_AVX2_TILE_UNROLL
  for (int k = 0; k < 4; ++k) {
    w[k] = _mm256_permute2x128_si256(c[0][k], c[1][k], 0x20);
    w[k + 4] = _mm256_permute2x128_si256(c[0][k], c[1][k], 0x31);
  }
}

// The 8 rows' F16 block scales at rows w + i * row_bytes as F32 lanes.
PENSIEVE_AVX2_TILE_FN inline __m256 scales8(const std::byte* w, std::size_t row_bytes) {
  std::uint16_t h[8];
  PENSIEVE_AVX2_TILE_UNROLL
  for (int i = 0; i < 8; ++i) std::memcpy(&h[i], w + std::size_t(i) * row_bytes, 2);
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
}

// Q8_0, 8 rows x T tokens: dot_q8_0 (quant_dot_avx2.cpp) of each (row,
// token). pf: the next tile's rows, prefetched in step with the blocks.
template <int T>
PENSIEVE_AVX2_TILE_FN void q8_0_tile(const std::byte* w, std::size_t row_bytes,
                                     const QuantActRow* x, std::int64_t nb, float* y,
                                     std::int64_t y_stride, unsigned store, const std::byte* pf,
                                     std::size_t pf_bytes) {
  __m256 acc[T];
  PENSIEVE_AVX2_TILE_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  StepPrefetch<PrefetchInto::l2> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.step();
    const std::byte* blk = w + b * q8_0_block_bytes;
    __m256i r[8], wq[8], wabs[8];
    PENSIEVE_AVX2_TILE_UNROLL
    for (int i = 0; i < 8; ++i) r[i] = load256(blk + std::size_t(i) * row_bytes + 2);
    transpose8(r, wq);
    PENSIEVE_AVX2_TILE_UNROLL
    for (int k = 0; k < 8; ++k) wabs[k] = _mm256_abs_epi8(wq[k]);
    const __m256 ws = scales8(blk, row_bytes);
    PENSIEVE_AVX2_TILE_UNROLL
    for (int t = 0; t < T; ++t) {
      const std::int8_t* xb = x[t].q + b * 32;
      __m256i isum = _mm256_setzero_si256();
      PENSIEVE_AVX2_TILE_UNROLL
      for (int k = 0; k < 8; ++k) {
        const __m256i xk = _mm256_set1_epi32(load_i32(xb + 4 * k));
        const __m256i p = _mm256_maddubs_epi16(wabs[k], _mm256_sign_epi8(xk, wq[k]));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
      }
      const __m256 s = _mm256_mul_ps(ws, _mm256_set1_ps(x[t].d[b]));
      acc[t] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(isum), acc[t]);
    }
  }
  // + 0.0f: dot_q8_0's result() (acc + accm, accm zero for Q8_0).
  PENSIEVE_AVX2_TILE_UNROLL
  for (int t = 0; t < T; ++t)
    _mm256_maskstore_ps(
        y + t * y_stride,
        _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_set1_epi32(int(store)),
                                            _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)),
                           _mm256_setzero_si256()),
        _mm256_add_ps(acc[t], _mm256_setzero_ps()));
}

PENSIEVE_AVX2_TILE_FN void q8_0_token_tile(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                           int n_tokens, std::int64_t nb, float* y,
                                           std::int64_t y_stride, unsigned store,
                                           const std::byte* pf, std::size_t pf_bytes) {
  switch (n_tokens) {
    case 1:
      return q8_0_tile<1>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 2:
      return q8_0_tile<2>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 3:
      return q8_0_tile<3>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 4:
      return q8_0_tile<4>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    default:
      assert(false && "quant token tile: 1 to quant_dot_tile_tokens_max tokens");
  }
}
static_assert(quant_dot_tile_tokens_max == 4);

}  // namespace

QuantDotTokenTileFn quant_dot_avx2_token_tile_fn(DType t) {
  return t == DType::q8_0 ? q8_0_token_tile : nullptr;
}

#else

QuantDotTokenTileFn quant_dot_avx2_token_tile_fn(DType) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
