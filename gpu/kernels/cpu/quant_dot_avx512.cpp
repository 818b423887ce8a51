// AVX-512 kernels of quant_dot.hpp's definition, for CPUs with AVX-512
// F/BW/VL/DQ and VNNI (Intel from Cascade Lake, AMD from Zen 4). The
// integer sums come from VNNI:
//  - legacy blocks of 32, two blocks per zmm: vpdpbusd(u, x) with u the
//    weight quant made unsigned (Q8_0: w + 128, Q4_0: q, IQ4_NL: grid + 128)
//    and the bias taken off as vpdpbusd(bias, x), both exact in int32;
//  - K-quants, 64 values per zmm: vpmaddubsw(q, x) into i16 pairs (at most
//    2 x 63 x 127, below its saturation) and vpdpwssd with the sub-block
//    scales as i16 (the multiply-by-scale and the add in one instruction).
// Then each block's F32 steps through quant_dot_steps.hpp in the scalar
// reference's order, so every kernel gives its reference's bits. The block
// scales are widened with F16C, which is exact for every finite F16 (a NaN
// scale gives a NaN result, though not necessarily the reference's NaN
// payload). The functions carry their own target attribute, so this file
// builds with any -march and quant_dot_fn calls them only on a CPU that has
// these features. The 8-row tiles are in quant_tiles_avx512.cpp.
#include "gpu/kernels/cpu/quant_avx512_common.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"
#include "gpu/kernels/cpu/quant_dot_steps.hpp"

#include <cassert>
#include <cstring>

namespace pensieve::kernels::cpu {

using model::DType;
namespace qs = quant_steps;

#if defined(PENSIEVE_QUANT_AVX512)

namespace {

using namespace quant_avx512;

PENSIEVE_AVX512_FN inline float f16_at(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

PENSIEVE_AVX512_FN inline std::int32_t hsum256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The two 256-bit halves' sums of 16 int32 lanes (two legacy blocks).
struct Pair {
  std::int32_t lo, hi;
};
PENSIEVE_AVX512_FN inline Pair hsum_halves(__m512i v) {
  const __m256i lo = _mm512_castsi512_si256(v), hi = _mm512_extracti64x4_epi64(v, 1);
  __m256i t = _mm256_hadd_epi32(lo, hi);  // per 128-bit lane: lo01 lo23 hi01 hi23
  t = _mm256_hadd_epi32(t, t);            // lo0-3 hi0-3 lo0-3 hi0-3
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
  return {_mm_cvtsi128_si32(s), _mm_extract_epi32(s, 1)};
}

// Two legacy blocks' 16 nibble bytes (at p0 and p1) as 64 u8 quants in
// element order: block 0's 32 values, then block 1's.
PENSIEVE_AVX512_FN inline __m512i nibbles64(const std::byte* p0, const std::byte* p1) {
  const __m256i both = _mm256_set_m128i(load128(p1), load128(p0));
  const __m512i z =
      _mm512_inserti64x4(_mm512_castsi256_si512(both), _mm256_srli_epi16(both, 4), 1);
  // 128-bit lanes (p0 lo, p1 lo, p0 hi, p1 hi) to (p0 lo, p0 hi, p1 lo, p1 hi).
  return _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)),
                          _mm512_set1_epi8(0x0f));
}

// One block's 16 nibble bytes as 32 u8 quants in element order.
PENSIEVE_AVX512_FN inline __m256i nibbles32(const std::byte* p) {
  const __m128i b = load128(p);
  const __m128i m4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
}

// sum u * x per 4 bytes, minus bias * sum x (bias = 0: none), exact.
PENSIEVE_AVX512_FN inline __m512i biased_dot512(__m512i u, __m512i x, int bias) {
  const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
  if (bias == 0) return p;
  return _mm512_sub_epi32(
      p, _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(char(bias)), x));
}
PENSIEVE_AVX512_FN inline std::int32_t biased_dot256(__m256i u, __m256i x, int bias) {
  const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
  if (bias == 0) return hsum256(p);
  return hsum256(_mm256_sub_epi32(
      p, _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(char(bias)), x)));
}

// A legacy type T: T::bytes per block, T::two(blk0, blk1) the two blocks'
// unsigned quants as a zmm and T::one(blk) one block's as a ymm, T::bias
// their offset from the signed value; T::mins: the block's F16 min at +2
// times the activation's s (Q4_1, Q5_1). (Traits rather than lambdas: a
// lambda would not carry the target attribute.)
template <class T>
PENSIEVE_AVX512_FN inline void legacy_step(qs::Acc& a, const std::byte* w, const QuantActRow& x,
                                           std::int64_t b, std::int32_t isum) {
  const std::byte* blk = w + b * T::bytes;
  qs::block(a, f16_at(blk) * x.d[b], isum);
  if constexpr (T::mins) qs::mins(a, f16_at(blk + 2), x.s[b]);
}

// Eight blocks' integer sums from four zmm of two blocks each (8 lanes a
// block) as one ymm, block order: each block's lanes folded to 4, two
// registers' worth interleaved by 128-bit lanes, then a transpose-and-add.
template <class T>
PENSIEVE_AVX512_FN inline __m256i legacy_isums8(const std::byte* blk, const std::int8_t* xq) {
  __m512i s[4];
  for (int k = 0; k < 4; ++k) {
    const __m512i v = biased_dot512(T::two(blk + 2 * k * T::bytes, blk + (2 * k + 1) * T::bytes),
                                    load512(xq + 64 * k), T::bias);
    // 128-bit lanes (A0, A1, B0, B1) to (A, A, B, B): A, B blocks 2k, 2k + 1.
    s[k] = _mm512_add_epi32(v, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  }
  const __m512i w01 = _mm512_mask_blend_epi64(0xcc, s[0], s[1]);  // blocks 0, 2, 1, 3
  const __m512i w23 = _mm512_mask_blend_epi64(0xcc, s[2], s[3]);  // blocks 4, 6, 5, 7
  const __m512i p =
      _mm512_add_epi32(_mm512_unpacklo_epi32(w01, w23), _mm512_unpackhi_epi32(w01, w23));
  // Per 128-bit lane: (sum of the w01 block, sum of the w23 block) twice.
  const __m512i q = _mm512_add_epi32(p, _mm512_shuffle_epi32(p, _MM_PERM_BADC));
  const __m512i order = _mm512_setr_epi32(0, 8, 4, 12, 1, 9, 5, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, q));
}

template <class T>
PENSIEVE_AVX512_FN float legacy_dot(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  std::int64_t b = 0;
  // Eight blocks at a time: their sums, F16 scales (gathered: the scale is
  // the low half of each block's first 4 bytes, Q4_1/Q5_1's min the high
  // half) and products with the activation scales as vectors, lane for lane
  // the scalar steps' values; then the F32 chain in block order.
  const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32(T::bytes));
  for (; b + 8 <= nb; b += 8) {
    const std::byte* blk = w + b * T::bytes;
    alignas(32) float scale[8], isum[8], mins[8];
    _mm256_store_ps(isum, _mm256_cvtepi32_ps(legacy_isums8<T>(blk, x.q + b * 32)));
    const __m256i head = _mm256_i32gather_epi32(reinterpret_cast<const int*>(blk), offsets, 1);
    const __m256 d = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(head));
    _mm256_store_ps(scale, _mm256_mul_ps(d, _mm256_loadu_ps(x.d + b)));
    if constexpr (T::mins)
      _mm256_store_ps(mins, _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(head, 16))));
    for (int k = 0; k < 8; ++k) {
      qs::block_of_float(a, scale[k], isum[k]);
      if constexpr (T::mins) qs::mins(a, mins[k], x.s[b + k]);
    }
  }
  for (; b + 2 <= nb; b += 2) {
    const std::byte* blk = w + b * T::bytes;
    const Pair s =
        hsum_halves(biased_dot512(T::two(blk, blk + T::bytes), load512(x.q + b * 32), T::bias));
    legacy_step<T>(a, w, x, b, s.lo);
    legacy_step<T>(a, w, x, b + 1, s.hi);
  }
  if (b < nb)
    legacy_step<T>(a, w, x, b,
                   biased_dot256(T::one(w + b * T::bytes), load256(x.q + b * 32), T::bias));
  return a.result();
}

// Q8_0: w ^ 0x80 is w + 128 as an unsigned byte (-128 reads as 0).
struct Q8_0 {
  static constexpr int bytes = 34, bias = 128;
  static constexpr bool mins = false;
  PENSIEVE_AVX512_FN static __m512i two(const std::byte* b0, const std::byte* b1) {
    const __m512i q =
        _mm512_inserti64x4(_mm512_castsi256_si512(load256(b0 + 2)), load256(b1 + 2), 1);
    return _mm512_xor_si512(q, _mm512_set1_epi8(char(0x80)));
  }
  PENSIEVE_AVX512_FN static __m256i one(const std::byte* b0) {
    return _mm256_xor_si256(load256(b0 + 2), _mm256_set1_epi8(char(0x80)));
  }
};

// Q4_0 (Bias 8, nibbles at 2) and Q4_1 (no bias, a min, nibbles at 4).
template <int Bytes, int Bias, bool Mins, int Nibbles>
struct Q4 {
  static constexpr int bytes = Bytes, bias = Bias;
  static constexpr bool mins = Mins;
  PENSIEVE_AVX512_FN static __m512i two(const std::byte* b0, const std::byte* b1) {
    return nibbles64(b0 + Nibbles, b1 + Nibbles);
  }
  PENSIEVE_AVX512_FN static __m256i one(const std::byte* b0) { return nibbles32(b0 + Nibbles); }
};

// Q5_0/Q5_1: the nibbles with each element's fifth bit (qh bit j) added as 16.
template <int Bytes, int Bias, bool Mins, int Qh, int Nibbles>
struct Q5 {
  static constexpr int bytes = Bytes, bias = Bias;
  static constexpr bool mins = Mins;
  PENSIEVE_AVX512_FN static __m512i two(const std::byte* b0, const std::byte* b1) {
    const __mmask64 high = _cvtu64_mask64(std::uint64_t(block_u32(b0 + Qh)) |
                                          (std::uint64_t(block_u32(b1 + Qh)) << 32));
    const __m512i q = nibbles64(b0 + Nibbles, b1 + Nibbles);
    return _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(16));
  }
  PENSIEVE_AVX512_FN static __m256i one(const std::byte* b0) {
    const __mmask32 high = _cvtu32_mask32(block_u32(b0 + Qh));
    const __m256i q = nibbles32(b0 + Nibbles);
    return _mm256_mask_add_epi8(q, high, q, _mm256_set1_epi8(16));
  }
};

// IQ4_NL: the nibbles index the grid plus 128 (1..241, unsigned) with
// vpshufb; the 128 comes off as the bias.
struct Iq4Nl {
  static constexpr int bytes = 18, bias = 128;
  static constexpr bool mins = false;
  PENSIEVE_AVX512_FN static __m128i grid() { return iq4nl_grid_plus128(); }
  PENSIEVE_AVX512_FN static __m512i two(const std::byte* b0, const std::byte* b1) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(grid()), nibbles64(b0 + 2, b1 + 2));
  }
  PENSIEVE_AVX512_FN static __m256i one(const std::byte* b0) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(grid()), nibbles32(b0 + 2));
  }
};

PENSIEVE_AVX512_FN float dot_q8_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return legacy_dot<Q8_0>(w, x, nb);
}
PENSIEVE_AVX512_FN float dot_q4_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return legacy_dot<Q4<18, 8, false, 2>>(w, x, nb);
}
PENSIEVE_AVX512_FN float dot_q4_1(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return legacy_dot<Q4<20, 0, true, 4>>(w, x, nb);
}
PENSIEVE_AVX512_FN float dot_q5_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return legacy_dot<Q5<22, 16, false, 2, 6>>(w, x, nb);
}
PENSIEVE_AVX512_FN float dot_q5_1(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return legacy_dot<Q5<24, 0, true, 4, 8>>(w, x, nb);
}
PENSIEVE_AVX512_FN float dot_iq4_nl(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  return legacy_dot<Iq4Nl>(w, x, nb);
}

// ---- K-quants: blocks of 256 ----

// sum over 64 values of q * x * scale, into acc's i32 lanes: scales holds
// the i16 scale of each pair of values.
PENSIEVE_AVX512_FN inline __m512i scaled_dot(__m512i acc, __m512i q, const std::int8_t* x,
                                             __m512i scales) {
  return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q, load512(x)), scales);
}

PENSIEVE_AVX512_FN inline std::int32_t reduce(__m512i v) {
  return _mm512_reduce_add_epi32(v);
}

// sum_j min_j * (bsums[2j] + bsums[2j + 1]) over the 8 sub-blocks.
PENSIEVE_AVX512_FN inline std::int32_t k4_mins(std::uint64_t mins, const std::int16_t* bsums) {
  const __m128i m = _mm_cvtsi64_si128(std::int64_t(mins));
  const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));  // each min twice
  return hsum256(_mm256_madd_epi16(m16, load256(bsums)));
}

// Q4_K and Q5_K (Fifth: sub-block j's fifth bits are bit j of the 32 qh
// bytes at +16, added to the nibbles as 16), one weight row against T
// activation rows: each block's quants and scales are unpacked once and
// multiplied into every row's integer sum, and each row then takes the F32
// steps of its own Acc, so row t's result is the single-row kernel's bits.
template <int Bytes, int Nibbles, bool Fifth, int T>
PENSIEVE_AVX512_FN inline void k4_dot_rows(const std::byte* w, const QuantActRow* x,
                                           std::int64_t nb, float* y, std::int64_t y_stride) {
  qs::Acc a[T];
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * Bytes;
    const ScalesMins sm = k4_scales_mins(blk + 4);
    const __m512i sc8 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(std::int64_t(sm.scales))));
    __m512i q[4], sc[4];
    PENSIEVE_UNROLL_ALL
    for (int g = 0; g < 4; ++g) {
      const __m256i bytes = load256(blk + Nibbles + 32 * g);
      q[g] = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(bytes), _mm256_srli_epi16(bytes, 4), 1), m4);
      if constexpr (Fifth) {
        const __mmask64 set =
            _mm512_test_epi8_mask(twice(blk + 16), halves8(1 << (2 * g), 2 << (2 * g)));
        q[g] = _mm512_mask_add_epi8(q[g], set, q[g], _mm512_set1_epi8(16));
      }
      sc[g] = scales_by32(sc8, 2 * g);
    }
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
    PENSIEVE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const std::int8_t* xq = x[t].q + b * 256;
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      PENSIEVE_UNROLL_ALL
      for (int g = 0; g < 4; ++g) acc[g & 1] = scaled_dot(acc[g & 1], q[g], xq + 64 * g, sc[g]);
      qs::block(a[t], x[t].d[b] * d, reduce(_mm512_add_epi32(acc[0], acc[1])));
      qs::mins(a[t], -(x[t].d[b] * dmin), float(k4_mins(sm.mins, x[t].bsums + b * 16)));
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = a[t].result();
}

PENSIEVE_AVX512_FN float dot_q4_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  float y;
  k4_dot_rows<144, 16, false, 1>(w, &x, nb, &y, 1);
  return y;
}

PENSIEVE_AVX512_FN float dot_q5_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  float y;
  k4_dot_rows<176, 48, true, 1>(w, &x, nb, &y, 1);
  return y;
}

// Q6_K: quants summed unsigned (0..63) and 32 * sum_j scale_j * bsum_j
// taken off afterwards, as the AVX2 kernel does. Element 128 n + 32 k + l:
// nibble k >> 1 of ql[64 n + 32 (k & 1) + l], bits 2k of qh[32 n + l].
// T activation rows as k4_dot_rows.
template <int T>
PENSIEVE_AVX512_FN inline void q6_k_dot_rows(const std::byte* w, const QuantActRow* x,
                                             std::int64_t nb, float* y, std::int64_t y_stride) {
  qs::Acc a[T];
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 210;
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(blk + 192));
    const __m512i sc = _mm512_castsi256_si512(sc16);
    __m512i q[4], scales[4];
    PENSIEVE_UNROLL_ALL
    for (int n = 0; n < 2; ++n) {
      q6_k_quants128(blk, n, q + 2 * n);
      scales[2 * n] = scales_by16(sc, 8 * n);
      scales[2 * n + 1] = scales_by16(sc, 8 * n + 4);
    }
    const float d = f16_at(blk + 208);
    PENSIEVE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const std::int8_t* xq = x[t].q + b * 256;
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      PENSIEVE_UNROLL_ALL
      for (int g = 0; g < 4; ++g) acc[g & 1] = scaled_dot(acc[g & 1], q[g], xq + 64 * g, scales[g]);
      const std::int32_t bias = hsum256(_mm256_madd_epi16(sc16, load256(x[t].bsums + b * 16)));
      qs::block(a[t], x[t].d[b] * d, reduce(_mm512_add_epi32(acc[0], acc[1])) - 32 * bias);
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = a[t].result();
}

PENSIEVE_AVX512_FN float dot_q6_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  float y;
  q6_k_dot_rows<1>(w, &x, nb, &y, 1);
  return y;
}

// IQ4_XS, one weight row against T activation rows (as k4_dot_rows): the
// nibbles of sub-blocks 2g, 2g + 1 index IQ4_NL's grid with vpshufb; the
// grid values are signed, so |v| is vpmaddubsw's unsigned operand and v's
// sign moves onto the activation (pairs at most 2 x 127 x 127, within i16),
// and vpdpwssd applies the sub-block scales.
template <int T>
PENSIEVE_AVX512_FN inline void iq4_xs_dot_rows(const std::byte* w, const QuantActRow* x,
                                               std::int64_t nb, float* y, std::int64_t y_stride) {
  qs::Acc a[T];
  const __m512i grid = _mm512_broadcast_i32x4(load128(iq4nl_values));
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 136;
    const __m512i sc8 = _mm512_castsi128_si512(iq4_xs_scales(blk));
    __m512i q[4], sc[4];
    __mmask64 neg[4];
    PENSIEVE_UNROLL_ALL
    for (int g = 0; g < 4; ++g) {
      const __m512i v = _mm512_shuffle_epi8(grid, nibbles64(blk + 8 + 32 * g, blk + 24 + 32 * g));
      q[g] = _mm512_abs_epi8(v);
      neg[g] = _mm512_movepi8_mask(v);
      sc[g] = scales_by32(sc8, 2 * g);
    }
    const float d = f16_at(blk);
    PENSIEVE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const std::int8_t* xq = x[t].q + b * 256;
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      PENSIEVE_UNROLL_ALL
      for (int g = 0; g < 4; ++g) {
        const __m512i xv = load512(xq + 64 * g);
        const __m512i xs = _mm512_mask_sub_epi8(xv, neg[g], _mm512_setzero_si512(), xv);
        acc[g & 1] = _mm512_dpwssd_epi32(acc[g & 1], _mm512_maddubs_epi16(q[g], xs), sc[g]);
      }
      qs::block(a[t], x[t].d[b] * d, reduce(_mm512_add_epi32(acc[0], acc[1])));
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = a[t].result();
}

PENSIEVE_AVX512_FN float dot_iq4_xs(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  float y;
  iq4_xs_dot_rows<1>(w, &x, nb, &y, 1);
  return y;
}

// The multi-row kernels for 1..quant_dot_rows_max rows.
template <template <int> class K>
PENSIEVE_AVX512_FN void dot_rows(const std::byte* w, const QuantActRow* x, int n_rows,
                                 std::int64_t nb, float* y, std::int64_t y_stride) {
  switch (n_rows) {
    case 1: return K<1>::run(w, x, nb, y, y_stride);
    case 2: return K<2>::run(w, x, nb, y, y_stride);
    case 3: return K<3>::run(w, x, nb, y, y_stride);
    case 4: return K<4>::run(w, x, nb, y, y_stride);
    case 5: return K<5>::run(w, x, nb, y, y_stride);
    case 6: return K<6>::run(w, x, nb, y, y_stride);
    case 7: return K<7>::run(w, x, nb, y, y_stride);
    case 8: return K<8>::run(w, x, nb, y, y_stride);
    default: assert(false && "quant dot rows: 1 to quant_dot_rows_max rows");
  }
}
static_assert(quant_dot_rows_max == 8);
template <int T>
struct Q4KRows {
  PENSIEVE_AVX512_FN static void run(const std::byte* w, const QuantActRow* x, std::int64_t nb,
                                     float* y, std::int64_t s) {
    k4_dot_rows<144, 16, false, T>(w, x, nb, y, s);
  }
};
template <int T>
struct Q5KRows {
  PENSIEVE_AVX512_FN static void run(const std::byte* w, const QuantActRow* x, std::int64_t nb,
                                     float* y, std::int64_t s) {
    k4_dot_rows<176, 48, true, T>(w, x, nb, y, s);
  }
};
template <int T>
struct Iq4XsRows {
  PENSIEVE_AVX512_FN static void run(const std::byte* w, const QuantActRow* x, std::int64_t nb,
                                     float* y, std::int64_t s) {
    iq4_xs_dot_rows<T>(w, x, nb, y, s);
  }
};
template <int T>
struct Q6KRows {
  PENSIEVE_AVX512_FN static void run(const std::byte* w, const QuantActRow* x, std::int64_t nb,
                                     float* y, std::int64_t s) {
    q6_k_dot_rows<T>(w, x, nb, y, s);
  }
};

// Q3_K's third bits of the 64 values s = 2 pair, 2 pair + 1 of half n:
// bit 4n + s of hm[l], added as 4.
PENSIEVE_AVX512_FN inline __m512i q3_k_high(__m512i hm, int n, int pair, __m512i q) {
  const int s = 4 * n + 2 * pair;
  const __mmask64 set = _mm512_test_epi8_mask(hm, halves8(1 << s, 2 << s));
  return _mm512_mask_add_epi8(q, set, q, _mm512_set1_epi8(4));
}

// Q2_K/Q3_K: element 128 n + 32 s + l's two low bits are bits 2s of
// qs[32 n + l] (the quants at +Quants); Third: Q3_K's third bits (hm).
template <int Quants, bool Third>
PENSIEVE_AVX512_FN inline __m512i k2_accumulate(const std::byte* blk, const std::int8_t* xq,
                                                __m512i sc, __m512i hm) {
  const __m512i m3 = _mm512_set1_epi8(3), by2 = halves16(0, 2);
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  PENSIEVE_UNROLL_ALL
  for (int n = 0; n < 2; ++n) {
    // Low half: the bytes, high half: the bytes >> 2 (s = 0, 1 in bits 0-1,
    // s = 2, 3 in bits 4-5).
    const __m512i bytes = _mm512_srlv_epi16(twice(blk + Quants + 32 * n), by2);
    __m512i q01 = _mm512_and_si512(bytes, m3);
    __m512i q23 = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), m3);
    if constexpr (Third) {
      q01 = q3_k_high(hm, n, 0, q01);
      q23 = q3_k_high(hm, n, 1, q23);
    }
    acc[0] = scaled_dot(acc[0], q01, xq + 128 * n, scales_by16(sc, 8 * n));
    acc[1] = scaled_dot(acc[1], q23, xq + 128 * n + 64, scales_by16(sc, 8 * n + 4));
  }
  return _mm512_add_epi32(acc[0], acc[1]);
}

PENSIEVE_AVX512_FN float dot_q2_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m128i m4 = _mm_set1_epi8(0x0f);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 84;
    const __m128i packed = load128(blk);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, m4));
    const __m256i min16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    const __m512i acc = k2_accumulate<16, false>(blk, x.q + b * 256,
                                                 _mm512_castsi256_si512(sc16), _mm512_setzero_si512());
    const std::int32_t mins = hsum256(_mm256_madd_epi16(min16, load256(x.bsums + b * 16)));
    qs::block(a, x.d[b] * f16_at(blk + 80), reduce(acc));
    qs::mins(a, -(x.d[b] * f16_at(blk + 82)), float(mins));
  }
  return a.result();
}

// Q3_K's 16 scales (-32..31) as bytes, q3_k_scale for every j at once: the
// low 4 bits are nibble j / 8 of byte j % 8, the high 2 bits are bits
// 2 (j / 4) of byte 8 + j % 4.
PENSIEVE_AVX512_FN inline __m128i q3_k_scales(const std::byte* p) {
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4),
                                         _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
  const __m128i word = _mm_set1_epi32(std::int32_t(block_u32(p + 8)));
  const __m128i shifted = _mm_srlv_epi32(word, _mm_setr_epi32(0, 2, 4, 6));
  const __m128i high = _mm_and_si128(_mm_slli_epi32(shifted, 4), _mm_set1_epi8(0x30));
  return _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
}

// Q3_K: quants summed as low | high << 2 (0..7) and 4 * sum_j scale_j *
// bsum_j taken off afterwards, as the AVX2 kernel does.
PENSIEVE_AVX512_FN float dot_q3_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 110;
    const __m256i sc16 = _mm256_cvtepi8_epi16(q3_k_scales(blk + 96));
    const __m512i acc =
        k2_accumulate<32, true>(blk, x.q + b * 256, _mm512_castsi256_si512(sc16), twice(blk));
    const std::int32_t bias = hsum256(_mm256_madd_epi16(sc16, load256(x.bsums + b * 16)));
    qs::block(a, x.d[b] * f16_at(blk + 108), reduce(acc) - 4 * bias);
  }
  return a.result();
}

}  // namespace

QuantDotFn quant_dot_avx512_fn(DType t) {
  switch (t) {
#define PENSIEVE_DOT_CASE(type) \
  case DType::type:             \
    return dot_##type;
    PENSIEVE_QUANT_DOT_TYPES(PENSIEVE_DOT_CASE)
#undef PENSIEVE_DOT_CASE
    default:
      return nullptr;
  }
}

QuantDotRowsFn quant_dot_avx512_rows_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return dot_rows<Q4KRows>;
    case DType::q5_k:
      return dot_rows<Q5KRows>;
    case DType::q6_k:
      return dot_rows<Q6KRows>;
    case DType::iq4_xs:
      return dot_rows<Iq4XsRows>;
    default:
      return nullptr;
  }
}

#else

QuantDotFn quant_dot_avx512_fn(DType) {
  return nullptr;
}
QuantDotRowsFn quant_dot_avx512_rows_fn(DType) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
