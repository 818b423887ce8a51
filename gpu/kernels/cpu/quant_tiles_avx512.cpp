// The K-quant 8-row tiles of quant_dot.hpp on AVX-512 VNNI (Q4_K, Q5_K,
// Q6_K, and IQ4_XS for one token): one token against 8 weight rows (QuantDotTileFn, a decode step
// of one sequence) and 1 to quant_dot_tile_tokens_max tokens against 8 rows (QuantDotTokenTileFn,
// decode batches where the lane tiles do not run). Each gives the single-row kernels' bits
// (quant_dot_avx512.cpp), whose helpers it shares through quant_avx512_common.hpp; like that file
// it builds with any -march, its functions carrying their own target attribute.
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/quant_avx512_common.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"

#include <algorithm>

namespace pensieve::kernels::cpu {

using model::DType;

#if defined(PENSIEVE_QUANT_AVX512)

namespace {

using namespace quant_avx512;

// ---- One activation row against 8 weight rows (a decode step) ----
// The activation's 64-value vectors are loaded once per block for all 8
// rows, the rows' integer sums reduced together (sums8: about 2 shuffles a
// row where reduce() takes 4), and the F32 steps of row r run in lane r of
// one vector chain: the same fma, with the same operands, in the same block
// order as the single-row kernel, so each lane has that kernel's bits.

// The int32 sums of v[0..7], lane r = the sum of v[r]'s 16 lanes (exact).
PENSIEVE_AVX512_FN inline __m256i sums8_of_pairs(const __m512i* p) {
  // p[i]: row 2i's partial sums in 128-bit lanes 0-1, row 2i + 1's in 2-3.
  __m512i q[2];
  PENSIEVE_UNROLL_ALL
  for (int h = 0; h < 2; ++h) {
    // 128-bit lane k: row 4h + k's four partial sums.
    q[h] = _mm512_add_epi32(_mm512_shuffle_i64x2(p[2 * h], p[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(p[2 * h], p[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  const __m512i u =
      _mm512_add_epi32(_mm512_unpacklo_epi32(q[0], q[1]), _mm512_unpackhi_epi32(q[0], q[1]));
  // Per 128-bit lane k: (row k, row k + 4) twice.
  const __m512i t = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, t));
}

PENSIEVE_AVX512_FN inline __m256i sums8(const __m512i* v) {
  __m512i p[4];
  PENSIEVE_UNROLL_ALL
  for (int i = 0; i < 4; ++i)
    p[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return sums8_of_pairs(p);
}

// The same for 8 ymm of 8 lanes each.
PENSIEVE_AVX512_FN inline __m256i sums8(const __m256i* v) {
  __m512i p[4];
  PENSIEVE_UNROLL_ALL
  for (int i = 0; i < 4; ++i)
    p[i] = _mm512_inserti64x4(_mm512_castsi256_si512(v[2 * i]), v[2 * i + 1], 1);
  return sums8_of_pairs(p);
}

// The 8 rows' F16 fields at byte `at` of block b (low half) and at + 2
// (high half), one gather.
PENSIEVE_AVX512_FN inline __m256i tile_heads(const std::byte* w, __m256i row_offsets,
                                             std::int64_t at) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(w + at), row_offsets, 1);
}
PENSIEVE_AVX512_FN inline __m256 low_f16(__m256i head) {
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(head));
}
PENSIEVE_AVX512_FN inline __m256 high_f16(__m256i head) {
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(head, 16)));
}

// The prefetches of an 8-row tile over nb blocks, `pass` blocks a pass: one
// step a pass and row (the rows of a pass one after another), into the L2.
PENSIEVE_AVX512_FN inline StepPrefetch<PrefetchInto::l2> tile_prefetch(const std::byte* pf,
                                                                       std::size_t pf_bytes,
                                                                       std::int64_t nb,
                                                                       std::int64_t pass) {
  return {pf, pf_bytes, (nb + pass - 1) / pass * 8};
}

PENSIEVE_AVX512_FN inline void tile_store(__m256 acc, __m256 accm, float* y, unsigned store) {
  _mm256_mask_storeu_ps(y, __mmask8(store), _mm256_add_ps(acc, accm));
}

PENSIEVE_AVX512_FN inline __m256i tile_row_offsets(std::size_t row_bytes) {
  return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                            _mm256_set1_epi32(std::int32_t(row_bytes)));
}

// Blocks per pass of a tile: the 8 rows are read one after another over
// this many blocks (each row's bytes in address order, as the hardware
// prefetchers follow best), their integer sums parked in the L1, then the
// F32 steps run block by block over the 8 lanes. With several tokens the
// parked sums grow with them: fewer blocks a pass keep the sums, the rows'
// bytes and the activations within Zen 5's and Sapphire Rapids' 48 KiB L1.
template <int T>
constexpr std::int64_t tile_pass_blocks = T <= 2 ? 8 : 4;

// Q4_K / Q5_K, 8 rows x T tokens: k4_dot_rows<..., 1> of each (row, token),
// row r of token t in lane r of token t's vector chain. Each block of each
// row is unpacked once (its nibbles, fifth bits and scales) and multiplied
// into every token's integer sums, so a decode batch reads and unpacks the
// tile's weights once for all its tokens.
template <int Bytes, int Nibbles, bool Fifth, int T>
PENSIEVE_AVX512_FN void k4_dot_tile(const std::byte* w, std::size_t row_bytes,
                                    const QuantActRow* x, std::int64_t nb, float* y,
                                    std::int64_t y_stride, unsigned store, const std::byte* pf,
                                    std::size_t pf_bytes) {
  constexpr std::int64_t pass = tile_pass_blocks<T>;
  const __m512i m4 = _mm512_set1_epi8(0x0f), by4 = halves16(0, 4);
  const __m256i offsets = tile_row_offsets(row_bytes);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 acc[T], accm[T];
  PENSIEVE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  __m512i isum[pass][T][8];
  __m256i mins[pass][T][8];
  auto prefetch = tile_prefetch(pf, pf_bytes, nb, pass);
  for (std::int64_t b0 = 0; b0 < nb; b0 += pass) {
    const std::int64_t n = std::min(pass, nb - b0);
    for (int r = 0; r < 8; ++r) {
      prefetch.step();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t b = b0 + i;
        const std::byte* blk = w + r * row_bytes + b * Bytes;
        const ScalesMins sm = k4_scales_mins(blk + 4);
        const __m512i sc8 =
            _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(std::int64_t(sm.scales))));
        __m512i a[T][2];
        PENSIEVE_UNROLL_ALL
        for (int t = 0; t < T; ++t) a[t][0] = a[t][1] = _mm512_setzero_si512();
        PENSIEVE_UNROLL_ALL
        for (int g = 0; g < 4; ++g) {
          // Low half: the 32 bytes' low nibbles, high half: their high ones
          // (a broadcast load and a shift, no shuffle).
          __m512i q = _mm512_and_si512(_mm512_srlv_epi16(twice(blk + Nibbles + 32 * g), by4), m4);
          if constexpr (Fifth) {
            const __mmask64 set =
                _mm512_test_epi8_mask(twice(blk + 16), halves8(1 << (2 * g), 2 << (2 * g)));
            q = _mm512_mask_add_epi8(q, set, q, _mm512_set1_epi8(16));
          }
          const __m512i sc = scales_by32(sc8, 2 * g);
          PENSIEVE_UNROLL_ALL
          for (int t = 0; t < T; ++t)
            a[t][g & 1] = _mm512_dpwssd_epi32(
                a[t][g & 1], _mm512_maddubs_epi16(q, load512(x[t].q + b * 256 + 64 * g)), sc);
        }
        const __m128i m = _mm_cvtsi64_si128(std::int64_t(sm.mins));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
        PENSIEVE_UNROLL_ALL
        for (int t = 0; t < T; ++t) {
          isum[i][t][r] = _mm512_add_epi32(a[t][0], a[t][1]);
          mins[i][t][r] = _mm256_madd_epi16(m16, load256(x[t].bsums + b * 16));
        }
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t b = b0 + i;
      const __m256i head = tile_heads(w + b * Bytes, offsets, 0);
      const __m256 d = low_f16(head), dmin = high_f16(head);
      PENSIEVE_UNROLL_ALL
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_set1_ps(x[t].d[b]);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(sums8(isum[i][t])),
                                 acc[t]);
        const __m256 mscale = _mm256_xor_ps(_mm256_mul_ps(dx, dmin), sign);
        accm[t] = _mm256_fmadd_ps(mscale, _mm256_cvtepi32_ps(sums8(mins[i][t])), accm[t]);
      }
    }
  }
  PENSIEVE_UNROLL_ALL
  for (int t = 0; t < T; ++t) tile_store(acc[t], accm[t], y + t * y_stride, store);
}

// Q6_K, 8 rows x T tokens (the decode batches; one token keeps the
// single-row dots, see quant_dot_tile_fn): q6_k_dot_rows<1> of each (row,
// token) in lanes as k4_dot_tile, the bias sums (scale_j * bsum_j) reduced
// with the quant sums and taken off in int32 as the single-row kernel does.
template <int T>
PENSIEVE_AVX512_FN void q6_k_dot_tile(const std::byte* w, std::size_t row_bytes,
                                      const QuantActRow* x, std::int64_t nb, float* y,
                                      std::int64_t y_stride, unsigned store, const std::byte* pf,
                                      std::size_t pf_bytes) {
  constexpr std::int64_t pass = tile_pass_blocks<T>;
  const __m256i offsets = tile_row_offsets(row_bytes);
  __m256 acc[T];
  PENSIEVE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  __m512i isum[pass][T][8];
  __m256i bias[pass][T][8];
  auto prefetch = tile_prefetch(pf, pf_bytes, nb, pass);
  for (std::int64_t b0 = 0; b0 < nb; b0 += pass) {
    const std::int64_t n = std::min(pass, nb - b0);
    for (int r = 0; r < 8; ++r) {
      prefetch.step();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t b = b0 + i;
        const std::byte* blk = w + r * row_bytes + b * 210;
        const __m256i sc16 = _mm256_cvtepi8_epi16(load128(blk + 192));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i a[T][2];
        PENSIEVE_UNROLL_ALL
        for (int t = 0; t < T; ++t) a[t][0] = a[t][1] = _mm512_setzero_si512();
        PENSIEVE_UNROLL_ALL
        for (int n2 = 0; n2 < 2; ++n2) {
          __m512i q[2];
          q6_k_quants128(blk, n2, q);
          const __m512i s0 = scales_by16(sc, 8 * n2), s1 = scales_by16(sc, 8 * n2 + 4);
          PENSIEVE_UNROLL_ALL
          for (int t = 0; t < T; ++t) {
            const std::int8_t* xq = x[t].q + b * 256 + 128 * n2;
            a[t][0] = _mm512_dpwssd_epi32(a[t][0], _mm512_maddubs_epi16(q[0], load512(xq)), s0);
            a[t][1] =
                _mm512_dpwssd_epi32(a[t][1], _mm512_maddubs_epi16(q[1], load512(xq + 64)), s1);
          }
        }
        PENSIEVE_UNROLL_ALL
        for (int t = 0; t < T; ++t) {
          isum[i][t][r] = _mm512_add_epi32(a[t][0], a[t][1]);
          bias[i][t][r] = _mm256_madd_epi16(sc16, load256(x[t].bsums + b * 16));
        }
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t b = b0 + i;
      // d is the F16 at byte 208, the high word at 206 (a 4-byte gather
      // at 208 would read past the weight's last block).
      const __m256 d = high_f16(tile_heads(w + b * 210, offsets, 206));
      PENSIEVE_UNROLL_ALL
      for (int t = 0; t < T; ++t) {
        const __m256 dx = _mm256_set1_ps(x[t].d[b]);
        const __m256i s = _mm256_sub_epi32(sums8(isum[i][t]), _mm256_slli_epi32(sums8(bias[i][t]), 5));
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, d), _mm256_cvtepi32_ps(s), acc[t]);
      }
    }
  }
  PENSIEVE_UNROLL_ALL
  for (int t = 0; t < T; ++t) tile_store(acc[t], _mm256_setzero_ps(), y + t * y_stride, store);
}

// ---- One token against 8 rows: the integer products first, the scales after ----
// A decode step of one sequence. Each 64 weights take one vpdpbusd (the
// token tiles above take a vpmaddubsw and a vpdpwssd, both in the
// multiplier's slot); its 32-bit sums (|sum| < 2^15 for every type here)
// are packed to words and multiplied by their sub-blocks' scales, one
// vpmaddwd per two of them. The rows are read as the token tiles read them,
// each row's blocks of a pass in address order (from DRAM, reading the 8
// rows block by block instead was 1.2-1.3x as slow on AMD Zen 4).

// Lane r = the sum of v[r]'s 4 lanes, for 8 xmm (exact).
PENSIEVE_AVX512_FN inline __m256i sums8(const __m128i* v) {
  __m256i p[4];
  PENSIEVE_UNROLL_ALL
  for (int i = 0; i < 4; ++i)
    p[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(v[i]), v[i + 4], 1);
  // 128-bit lane h of p[i]: row 4h + i's four sums.
  const __m256i u0 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
  const __m256i u1 =
      _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(u0, u1), _mm256_unpackhi_epi64(u0, u1));
}

// The byte shuffle of a block's 8 scale bytes (broadcast to every 64-bit
// lane) into the words that multiply packs_epi32(d[a], d[b]): in 128-bit
// lane k, four words of scale lo (k < 2) or lo + 2, then four of scale hi
// or hi + 2, zero-extended.
PENSIEVE_AVX512_FN inline __m512i k4_scale_words(int lo, int hi) {
  alignas(64) std::int8_t idx[64];
  for (int k = 0; k < 4; ++k)
    for (int wd = 0; wd < 8; ++wd) {
      idx[16 * k + 2 * wd] = std::int8_t((wd < 4 ? lo : hi) + (k < 2 ? 0 : 2));
      idx[16 * k + 2 * wd + 1] = std::int8_t(0x80);
    }
  return _mm512_load_si512(idx);
}

// Q4_K / Q5_K. A 64-byte load of nibbles holds sub-blocks (4h, 4h + 2) in
// its low nibbles and (4h + 1, 4h + 3) in its high ones, so each pass's
// activation blocks are first copied with their 32-value quarters in that
// order, once for the 8 rows; the mins multiply the activation's sums per
// 32 values, packed to words once a pass.
template <int Bytes, int Nibbles, bool Fifth>
PENSIEVE_AVX512_FN void k4_dot_tile_one(const std::byte* w, std::size_t row_bytes,
                                        const QuantActRow& x, std::int64_t nb, float* y,
                                        unsigned store, const std::byte* pf, std::size_t pf_bytes) {
  constexpr std::int64_t pass = 8;
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i words01 = k4_scale_words(0, 1), words45 = k4_scale_words(4, 5);
  const __m256i offsets = tile_row_offsets(row_bytes);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
  alignas(64) std::int8_t xs[pass * 256];
  __m128i bsum32[pass];
  __m512i isum[pass][8];
  __m128i mins[pass][8];
  auto prefetch = tile_prefetch(pf, pf_bytes, nb, pass);
  for (std::int64_t b0 = 0; b0 < nb; b0 += pass) {
    const std::int64_t n = std::min(pass, nb - b0);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int8_t* from = x.q + (b0 + i) * 256;
      PENSIEVE_UNROLL_ALL
      for (int h = 0; h < 2; ++h) {
        std::int8_t* to = xs + 256 * i + 128 * h;
        _mm256_store_si256(reinterpret_cast<__m256i*>(to), load256(from + 128 * h));
        _mm256_store_si256(reinterpret_cast<__m256i*>(to + 32), load256(from + 128 * h + 64));
        _mm256_store_si256(reinterpret_cast<__m256i*>(to + 64), load256(from + 128 * h + 32));
        _mm256_store_si256(reinterpret_cast<__m256i*>(to + 96), load256(from + 128 * h + 96));
      }
      const __m256i pairs =
          _mm256_madd_epi16(load256(x.bsums + (b0 + i) * 16), _mm256_set1_epi16(1));
      bsum32[i] =
          _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
    }
    for (int r = 0; r < 8; ++r) {
      prefetch.step();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::byte* blk = w + r * row_bytes + (b0 + i) * Bytes;
        const ScalesMins sm = k4_scales_mins(blk + 4);
        __m512i fifth;
        if constexpr (Fifth) fifth = twice(blk + 16);
        __m512i d[4];
        PENSIEVE_UNROLL_ALL
        for (int h = 0; h < 2; ++h) {
          const __m512i q = load512(blk + Nibbles + 64 * h);
          __m512i lo = _mm512_and_si512(q, m4);
          __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
          if constexpr (Fifth) {
            const __m512i sixteen = _mm512_set1_epi8(16);
            lo = _mm512_mask_add_epi8(
                lo, _mm512_test_epi8_mask(fifth, halves8(1 << (4 * h), 4 << (4 * h))), lo, sixteen);
            hi = _mm512_mask_add_epi8(
                hi, _mm512_test_epi8_mask(fifth, halves8(2 << (4 * h), 8 << (4 * h))), hi, sixteen);
          }
          const std::int8_t* xq = xs + 256 * i + 128 * h;
          d[2 * h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, load512(xq));
          d[2 * h + 1] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, load512(xq + 64));
        }
        const __m512i scales = _mm512_set1_epi64(std::int64_t(sm.scales));
        isum[i][r] = _mm512_add_epi32(
            _mm512_madd_epi16(_mm512_packs_epi32(d[0], d[1]), _mm512_shuffle_epi8(scales, words01)),
            _mm512_madd_epi16(_mm512_packs_epi32(d[2], d[3]),
                              _mm512_shuffle_epi8(scales, words45)));
        mins[i][r] =
            _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(std::int64_t(sm.mins))), bsum32[i]);
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t b = b0 + i;
      const __m256i head = tile_heads(w + b * Bytes, offsets, 0);
      const __m256 dx = _mm256_set1_ps(x.d[b]);
      acc = _mm256_fmadd_ps(_mm256_mul_ps(dx, low_f16(head)), _mm256_cvtepi32_ps(sums8(isum[i])),
                            acc);
      accm = _mm256_fmadd_ps(_mm256_xor_ps(_mm256_mul_ps(dx, high_f16(head)), sign),
                             _mm256_cvtepi32_ps(sums8(mins[i])), accm);
    }
  }
  tile_store(acc, accm, y, store);
}

// Q6_K: a 64-value load covers four 16-value sub-blocks, one a 128-bit
// lane. The weights are stored + 32: each 32-bit sum starts at -32 times
// its four activation bytes (once a pass for the 8 rows), so the words
// hold the signed weights' sums.
PENSIEVE_AVX512_FN void q6_k_dot_tile_one(const std::byte* w, std::size_t row_bytes,
                                          const QuantActRow& x, std::int64_t nb, float* y,
                                          unsigned store, const std::byte* pf,
                                          std::size_t pf_bytes) {
  constexpr std::int64_t pass = 4;
  // packs(d[2h], d[2h + 1]), 128-bit lane k: four words of sub-block
  // 8h + k, four of 8h + 4 + k.
  const auto scale_idx = [](int h) {
    alignas(64) std::int16_t idx[32];
    for (int k = 0; k < 4; ++k)
      for (int wd = 0; wd < 8; ++wd) idx[8 * k + wd] = std::int16_t(8 * h + k + (wd < 4 ? 0 : 4));
    return _mm512_load_si512(idx);
  };
  const __m512i idx0 = scale_idx(0), idx1 = scale_idx(1);
  const __m256i offsets = tile_row_offsets(row_bytes);
  __m256 acc = _mm256_setzero_ps();
  __m512i bias[pass][4];
  __m512i isum[pass][8];
  auto prefetch = tile_prefetch(pf, pf_bytes, nb, pass);
  for (std::int64_t b0 = 0; b0 < nb; b0 += pass) {
    const std::int64_t n = std::min(pass, nb - b0);
    for (std::int64_t i = 0; i < n; ++i) {
      PENSIEVE_UNROLL_ALL
      for (int k = 0; k < 4; ++k)
        bias[i][k] =
            _mm512_sub_epi32(_mm512_setzero_si512(),
                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32),
                                                 load512(x.q + (b0 + i) * 256 + 64 * k)));
    }
    for (int r = 0; r < 8; ++r) {
      prefetch.step();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::byte* blk = w + r * row_bytes + (b0 + i) * 210;
        const std::int8_t* xq = x.q + (b0 + i) * 256;
        __m512i d[4];
        PENSIEVE_UNROLL_ALL
        for (int n2 = 0; n2 < 2; ++n2) {
          __m512i q[2];
          q6_k_quants128(blk, n2, q);
          d[2 * n2] = _mm512_dpbusd_epi32(bias[i][2 * n2], q[0], load512(xq + 128 * n2));
          d[2 * n2 + 1] =
              _mm512_dpbusd_epi32(bias[i][2 * n2 + 1], q[1], load512(xq + 128 * n2 + 64));
        }
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(load128(blk + 192)));
        isum[i][r] = _mm512_add_epi32(
            _mm512_madd_epi16(_mm512_packs_epi32(d[0], d[1]), _mm512_permutexvar_epi16(idx0, sc)),
            _mm512_madd_epi16(_mm512_packs_epi32(d[2], d[3]), _mm512_permutexvar_epi16(idx1, sc)));
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t b = b0 + i;
      // d is the F16 at byte 208, the high word at 206 (a 4-byte gather
      // at 208 would read past the weight's last block).
      const __m256 d = high_f16(tile_heads(w + b * 210, offsets, 206));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(x.d[b]), d),
                            _mm256_cvtepi32_ps(sums8(isum[i])), acc);
    }
  }
  tile_store(acc, _mm256_setzero_ps(), y, store);
}

// IQ4_XS: a 64-byte load of nibbles holds sub-blocks 4h..4h + 3, one a
// 128-bit lane, their first 16 values in the low nibbles and their last 16
// in the high ones; each pass's activation blocks are copied in that order
// once for the 8 rows. The nibbles index the grid + 128 (1..241, unsigned,
// vpdpbusd's operand); each 32-bit sum starts at -128 times its four
// activation bytes (once a pass), so it holds the signed grid values' sum.
// Those reach 4 * 127 * 127, past a word: the two halves of a sub-block are
// added and multiplied by its scale in 32 bits (vpmulld, twice a block).
PENSIEVE_AVX512_FN void iq4_xs_dot_tile_one(const std::byte* w, std::size_t row_bytes,
                                            const QuantActRow& x, std::int64_t nb, float* y,
                                            unsigned store, const std::byte* pf,
                                            std::size_t pf_bytes) {
  constexpr std::int64_t pass = 8;
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i grid = _mm512_broadcast_i32x4(iq4nl_grid_plus128());
  // Dwords 4k..4k + 3 take sub-block 4h + k's scale.
  const __m512i lanes0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i lanes1 = _mm512_add_epi32(lanes0, _mm512_set1_epi32(4));
  const __m256i offsets = tile_row_offsets(row_bytes);
  __m256 acc = _mm256_setzero_ps();
  alignas(64) std::int8_t xs[pass * 256];
  __m512i bias[pass][4];
  __m512i isum[pass][8];
  auto prefetch = tile_prefetch(pf, pf_bytes, nb, pass);
  for (std::int64_t b0 = 0; b0 < nb; b0 += pass) {
    const std::int64_t n = std::min(pass, nb - b0);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int8_t* from = x.q + (b0 + i) * 256;
      std::int8_t* to = xs + 256 * i;
      // to[128 h + 16 k + l]: value 32 (4h + k) + l (low nibbles); +64: + 16 (high).
      PENSIEVE_UNROLL_ALL
      for (int j = 0; j < 8; ++j) {
        const int h = j / 4, k = j % 4;
        _mm_store_si128(reinterpret_cast<__m128i*>(to + 128 * h + 16 * k), load128(from + 32 * j));
        _mm_store_si128(reinterpret_cast<__m128i*>(to + 128 * h + 64 + 16 * k),
                        load128(from + 32 * j + 16));
      }
      PENSIEVE_UNROLL_ALL
      for (int k = 0; k < 4; ++k)
        bias[i][k] = _mm512_sub_epi32(
            _mm512_setzero_si512(),
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(char(0x80)),
                                load512(to + 64 * k)));
    }
    for (int r = 0; r < 8; ++r) {
      prefetch.step();
      for (std::int64_t i = 0; i < n; ++i) {
        const std::byte* blk = w + r * row_bytes + (b0 + i) * 136;
        const std::int8_t* xq = xs + 256 * i;
        __m512i half[2];
        PENSIEVE_UNROLL_ALL
        for (int h = 0; h < 2; ++h) {
          const __m512i q = load512(blk + 8 + 64 * h);
          const __m512i lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(q, m4));
          const __m512i hi =
              _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
          half[h] = _mm512_add_epi32(
              _mm512_dpbusd_epi32(bias[i][2 * h], lo, load512(xq + 128 * h)),
              _mm512_dpbusd_epi32(bias[i][2 * h + 1], hi, load512(xq + 128 * h + 64)));
        }
        const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(iq4_xs_scales(blk)));
        isum[i][r] =
            _mm512_add_epi32(_mm512_mullo_epi32(half[0], _mm512_permutexvar_epi32(lanes0, sc)),
                             _mm512_mullo_epi32(half[1], _mm512_permutexvar_epi32(lanes1, sc)));
      }
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t b = b0 + i;
      const __m256 d = low_f16(tile_heads(w + b * 136, offsets, 0));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(x.d[b]), d),
                            _mm256_cvtepi32_ps(sums8(isum[i])), acc);
    }
  }
  tile_store(acc, _mm256_setzero_ps(), y, store);
}

PENSIEVE_AVX512_FN void tile_q4_k(const std::byte* w, std::size_t rb, const QuantActRow& x,
                                  std::int64_t nb, float* y, unsigned store, const std::byte* pf,
                                  std::size_t pf_bytes) {
  k4_dot_tile_one<144, 16, false>(w, rb, x, nb, y, store, pf, pf_bytes);
}
PENSIEVE_AVX512_FN void tile_q5_k(const std::byte* w, std::size_t rb, const QuantActRow& x,
                                  std::int64_t nb, float* y, unsigned store, const std::byte* pf,
                                  std::size_t pf_bytes) {
  k4_dot_tile_one<176, 48, true>(w, rb, x, nb, y, store, pf, pf_bytes);
}

// The token tiles for 1..quant_dot_tile_tokens_max tokens.
template <int Bytes, int Nibbles, bool Fifth>
PENSIEVE_AVX512_FN void k4_token_tile(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                      int n_tokens, std::int64_t nb, float* y,
                                      std::int64_t y_stride, unsigned store, const std::byte* pf,
                                      std::size_t pf_bytes) {
  with_token_count<quant_dot_tile_tokens_max>(n_tokens, [&]<int T>() {
    k4_dot_tile<Bytes, Nibbles, Fifth, T>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
  });
}
PENSIEVE_AVX512_FN void q6_k_token_tile(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                        int n_tokens, std::int64_t nb, float* y,
                                        std::int64_t y_stride, unsigned store, const std::byte* pf,
                                        std::size_t pf_bytes) {
  with_token_count<quant_dot_tile_tokens_max>(n_tokens, [&]<int T>() {
    q6_k_dot_tile<T>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
  });
}

}  // namespace

QuantDotTileFn quant_dot_avx512_tile_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return tile_q4_k;
    case DType::q5_k:
      return tile_q5_k;
    case DType::q6_k:
      return q6_k_dot_tile_one;
    case DType::iq4_xs:
      return iq4_xs_dot_tile_one;
    default:
      return nullptr;
  }
}

QuantDotTokenTileFn quant_dot_avx512_token_tile_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return k4_token_tile<144, 16, false>;
    case DType::q5_k:
      return k4_token_tile<176, 48, true>;
    case DType::q6_k:
      return q6_k_token_tile;
    default:
      return nullptr;
  }
}

#else

QuantDotTileFn quant_dot_avx512_tile_fn(DType) {
  return nullptr;
}
QuantDotTokenTileFn quant_dot_avx512_token_tile_fn(DType) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
