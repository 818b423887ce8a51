// AVX2 kernels of quant_dot.hpp's definition. Each computes a block's
// integer sum with vpmaddubsw (u8 x s8 pairs into i16; the operands here
// never reach its saturation: at most 2 x 128 x 127) and vpmaddwd, then the
// block's F32 steps through quant_dot_steps.hpp, as the scalar reference
// does. The functions carry their own target attribute, so this file builds
// without -mavx2 and quant_dot_fn calls them only on a CPU that has AVX2.
#include "gpu/kernels/cpu/quant_dot.hpp"
#include "gpu/kernels/cpu/quant_dot_steps.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PENSIEVE_QUANT_AVX2 1
#endif

namespace pensieve::kernels::cpu {

using model::DType;
namespace qs = quant_steps;

#if defined(PENSIEVE_QUANT_AVX2)

#define PENSIEVE_AVX2_FN __attribute__((target("avx2,fma")))

namespace {

PENSIEVE_AVX2_FN inline std::int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

PENSIEVE_AVX2_FN inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 32 unsigned quants (u8) times 32 activations (s8), weighted by one i16
// scale per 16 (lo for the first 16, hi for the rest), as 8 i32 lanes.
PENSIEVE_AVX2_FN inline __m256i scaled_dot(__m256i q, const std::int8_t* x, int lo, int hi) {
  const __m256i p = _mm256_maddubs_epi16(q, load256(x));
  return _mm256_madd_epi16(
      p, _mm256_set_m128i(_mm_set1_epi16(std::int16_t(hi)), _mm_set1_epi16(std::int16_t(lo))));
}

// A legacy block's 16 nibble bytes as 32 u8 quants in element order.
PENSIEVE_AVX2_FN inline __m256i nibbles32(const std::byte* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
}

// sum q * x over 32 values with q unsigned, minus bias * sum x.
PENSIEVE_AVX2_FN inline std::int32_t biased_isum(__m256i q, const std::int8_t* x, int bias) {
  const __m256i xv = load256(x), ones = _mm256_set1_epi16(1);
  const __m256i qx = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones);
  if (bias == 0) return hsum(qx);
  const __m256i sx = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), ones);
  return hsum(_mm256_sub_epi32(qx, _mm256_mullo_epi32(sx, _mm256_set1_epi32(bias))));
}

PENSIEVE_AVX2_FN float dot_q8_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 34;
    // |w| as the unsigned operand (-128 reads as 128), the activation's sign
    // moved onto it: activations are in [-127, 127], so the sign never
    // overflows.
    const __m256i wq = load256(blk + 2), xq = load256(x.q + b * 32);
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
    qs::block(a, block_f16(blk) * x.d[b], hsum(_mm256_madd_epi16(p, _mm256_set1_epi16(1))));
  }
  return a.result();
}

PENSIEVE_AVX2_FN float dot_q4_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 18;
    qs::block(a, block_f16(blk) * x.d[b], biased_isum(nibbles32(blk + 2), x.q + b * 32, 8));
  }
  return a.result();
}

PENSIEVE_AVX2_FN float dot_q4_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 144;
    const std::uint8_t* scales = block_bytes(blk + 4);
    const std::int8_t* xq = x.q + b * 256;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i bytes = load256(blk + 16 + 32 * g);
      const int s0 = k_scale_min(scales, 2 * g).scale, s1 = k_scale_min(scales, 2 * g + 1).scale;
      acc = _mm256_add_epi32(acc, scaled_dot(_mm256_and_si256(bytes, m4), xq + 64 * g, s0, s0));
      acc = _mm256_add_epi32(acc, scaled_dot(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4),
                                             xq + 64 * g + 32, s1, s1));
    }
    qs::block(a, x.d[b] * block_f16(blk), hsum(acc));
    qs::mins(a, -(x.d[b] * block_f16(blk + 2)), float(qs::k4_mins(scales, x.bsums + b * 16)));
  }
  return a.result();
}

// Q5_K sub-block j's fifth bits: bit j of each qh byte, moved to bit 4.
PENSIEVE_AVX2_FN inline __m256i fifth_bits(__m256i qh, int j, __m256i one) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one), 4);
}

PENSIEVE_AVX2_FN float dot_q5_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 176;
    const std::uint8_t* scales = block_bytes(blk + 4);
    const std::int8_t* xq = x.q + b * 256;
    const __m256i qh = load256(blk + 16);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i bytes = load256(blk + 48 + 32 * g);
      const int s0 = k_scale_min(scales, 2 * g).scale, s1 = k_scale_min(scales, 2 * g + 1).scale;
      const __m256i q0 = _mm256_or_si256(_mm256_and_si256(bytes, m4), fifth_bits(qh, 2 * g, one));
      const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4),
                                         fifth_bits(qh, 2 * g + 1, one));
      acc = _mm256_add_epi32(acc, scaled_dot(q0, xq + 64 * g, s0, s0));
      acc = _mm256_add_epi32(acc, scaled_dot(q1, xq + 64 * g + 32, s1, s1));
    }
    qs::block(a, x.d[b] * block_f16(blk), hsum(acc));
    qs::mins(a, -(x.d[b] * block_f16(blk + 2)), float(qs::k4_mins(scales, x.bsums + b * 16)));
  }
  return a.result();
}

// Q6_K: the quants are summed unsigned (0..63) and 32 * sum_j scale_j *
// bsum_j taken off afterwards: the same integer as the signed sum.
PENSIEVE_AVX2_FN float dot_q6_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 210;
    const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192);
    const std::int8_t* xq = x.q + b * 256;
    __m256i acc = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      const __m256i ql0 = load256(blk + 64 * n), ql1 = load256(blk + 64 * n + 32);
      const __m256i qh = load256(blk + 128 + 32 * n);
      const __m256i low[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                              _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                              _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
      for (int k = 0; k < 4; ++k) {
        const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), m2);
        const __m256i q = _mm256_or_si256(low[k], _mm256_slli_epi16(high, 4));
        const int j = 8 * n + 2 * k;
        acc = _mm256_add_epi32(acc, scaled_dot(q, xq + 128 * n + 32 * k, sc[j], sc[j + 1]));
      }
    }
    std::int32_t bias = 0;
    for (int j = 0; j < 16; ++j) bias += sc[j] * x.bsums[b * 16 + j];
    qs::block(a, x.d[b] * block_f16(blk + 208), hsum(acc) - 32 * bias);
  }
  return a.result();
}

// 32 bits, one per element, as 32 bytes: 0x10 where the bit is set, else 0
// (a legacy Q5 block's fifth bits, moved to their place above the nibble).
PENSIEVE_AVX2_FN inline __m256i fifth_bits32(const std::byte* qh) {
  const __m256i word = _mm256_set1_epi32(std::int32_t(block_u32(qh)));
  // Byte i takes byte i / 8 of the word, then tests its bit i % 8.
  const __m256i spread =
      _mm256_shuffle_epi8(word, _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                                   0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(std::int64_t(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

PENSIEVE_AVX2_FN float dot_q4_1(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 20;
    qs::block(a, block_f16(blk) * x.d[b], biased_isum(nibbles32(blk + 4), x.q + b * 32, 0));
    qs::mins(a, block_f16(blk + 2), x.s[b]);
  }
  return a.result();
}

PENSIEVE_AVX2_FN float dot_q5_0(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 22;
    const __m256i q = _mm256_or_si256(nibbles32(blk + 6), fifth_bits32(blk + 2));
    qs::block(a, block_f16(blk) * x.d[b], biased_isum(q, x.q + b * 32, 16));
  }
  return a.result();
}

PENSIEVE_AVX2_FN float dot_q5_1(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 24;
    const __m256i q = _mm256_or_si256(nibbles32(blk + 8), fifth_bits32(blk + 4));
    qs::block(a, block_f16(blk) * x.d[b], biased_isum(q, x.q + b * 32, 0));
    qs::mins(a, block_f16(blk + 2), x.s[b]);
  }
  return a.result();
}

// IQ4_NL's grid in both 128-bit lanes, for vpshufb.
PENSIEVE_AVX2_FN inline __m256i iq4nl_grid() {
  const __m128i grid = _mm_loadu_si128(reinterpret_cast<const __m128i*>(iq4nl_values));
  return _mm256_set_m128i(grid, grid);
}

// 32 grid values v (signed, -127..113) times 32 activations, as 16 i16 pair
// sums: |v| is the unsigned operand and v's sign moves onto the activation,
// as for Q8_0 (at most 2 x 127 x 127, within i16).
PENSIEVE_AVX2_FN inline __m256i grid_pairs(__m256i v, const std::int8_t* x) {
  return _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(load256(x), v));
}

// IQ4_NL: the nibbles index the grid with vpshufb.
PENSIEVE_AVX2_FN float dot_iq4_nl(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i grid = iq4nl_grid();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 18;
    const __m256i p = grid_pairs(_mm256_shuffle_epi8(grid, nibbles32(blk + 2)), x.q + b * 32);
    qs::block(a, block_f16(blk) * x.d[b], hsum(_mm256_madd_epi16(p, _mm256_set1_epi16(1))));
  }
  return a.result();
}

// IQ4_XS: IQ4_NL's grid in sub-blocks of 32 of a 256 block, each with its
// own 6-bit scale applied to the sub-block's pair sums by vpmaddwd.
PENSIEVE_AVX2_FN float dot_iq4_xs(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i grid = iq4nl_grid();
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 136;
    const std::int8_t* xq = x.q + b * 256;
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i p =
          grid_pairs(_mm256_shuffle_epi8(grid, nibbles32(blk + 8 + 16 * j)), xq + 32 * j);
      acc = _mm256_add_epi32(
          acc, _mm256_madd_epi16(p, _mm256_set1_epi16(std::int16_t(iq4_xs_scale(blk, j)))));
    }
    qs::block(a, x.d[b] * block_f16(blk), hsum(acc));
  }
  return a.result();
}

PENSIEVE_AVX2_FN float dot_q2_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i m2 = _mm256_set1_epi8(3);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 84;
    const std::uint8_t* sc = block_bytes(blk);
    const std::int8_t* xq = x.q + b * 256;
    __m256i acc = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      const __m256i bytes = load256(blk + 16 + 32 * n);
      for (int s = 0; s < 4; ++s) {
        const __m256i q = _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * s)), m2);
        const int j = 8 * n + 2 * s;
        acc = _mm256_add_epi32(acc,
                               scaled_dot(q, xq + 128 * n + 32 * s, sc[j] & 0xf, sc[j + 1] & 0xf));
      }
    }
    qs::block(a, x.d[b] * block_f16(blk + 80), hsum(acc));
    qs::mins(a, -(x.d[b] * block_f16(blk + 82)), float(qs::q2_k_mins(sc, x.bsums + b * 16)));
  }
  return a.result();
}

// Q3_K: the quants are summed as low | high << 2 (0..7) and 4 * sum_j
// scale_j * bsum_j taken off afterwards: the same integer as low - 4 (1 -
// high) summed signed.
PENSIEVE_AVX2_FN float dot_q3_k(const std::byte* w, const QuantActRow& x, std::int64_t nb) {
  qs::Acc a;
  const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (std::int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = w + b * 110;
    const std::uint8_t* scales = block_bytes(blk + 96);
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = q3_k_scale(scales, j);
    const std::int8_t* xq = x.q + b * 256;
    const __m256i hm = load256(blk);
    __m256i acc = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      const __m256i bytes = load256(blk + 32 + 32 * n);
      for (int s = 0; s < 4; ++s) {
        const __m256i low = _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * s)), m2);
        const __m256i high =
            _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * n + s)), one);
        const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
        const int j = 8 * n + 2 * s;
        acc = _mm256_add_epi32(acc, scaled_dot(q, xq + 128 * n + 32 * s, sc[j], sc[j + 1]));
      }
    }
    std::int32_t bias = 0;
    for (int j = 0; j < 16; ++j) bias += sc[j] * x.bsums[b * 16 + j];
    qs::block(a, x.d[b] * block_f16(blk + 108), hsum(acc) - 4 * bias);
  }
  return a.result();
}

}  // namespace

QuantDotFn quant_dot_avx2_fn(DType t) {
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

#else

QuantDotFn quant_dot_avx2_fn(DType) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
