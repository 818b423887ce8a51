// The K-quant lane tiles of quant_dot.hpp on AVX-512 VNNI: 16 weight rows x
// 1 to quant_dot_lane_tile_tokens_max tokens (Q4_K, Q5_K, Q6_K decode
// batches), each weight row in one 32-bit lane of every vector.
//
// The 8-row token tiles (quant_tiles_avx512.cpp) keep a row's 64 quants in
// the lanes of one vector and so reduce every (row, token, block) to one
// integer with shuffles, about as many instructions as the multiplies
// themselves. Here each 32-byte run of the block is read for the 16 rows and
// transposed in registers (lane r = dword j of row r), as the Q8_0 token
// tile does (q8_token_tiles.hpp): then vpdpbusd with 4 activation bytes
// broadcast adds 4 products of each row into its own lane, every lane of
// every instruction useful, and nothing is reduced afterwards. A 32-value
// (Q4_K, Q5_K) or 16-value (Q6_K) sub-block sums in its own register and is
// scaled by its rows' scales with one vpmulld. The transposition and the
// unpacking of the quants are paid once per block for all the tokens.
//
// Every integer sum is the single-row kernel's exactly (integer adds in any
// order), and lane r takes the reference's F32 steps (quant_dot_steps.hpp)
// in block order with the same operands, so each (row, token) has the bits
// of quant_dot_fn: a sequence's logits do not depend on its batch. The
// dwords of a run hold 4 consecutive quants of one sub-block, so the
// activation bytes they meet are 4 consecutive ones too.
//
// Like quant_tiles_avx512.cpp it builds with any -march, its functions
// carrying their own target attribute.
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/quant_avx512_common.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"

#include <cassert>

namespace pensieve::kernels::cpu {

using model::DType;

#if defined(PENSIEVE_QUANT_AVX512)

namespace {

using namespace quant_avx512;

static_assert(quant_dot_lane_tile_rows == 16);

// Every loop here runs whole (at most 16 trips): the tiles' vectors live in
// registers only while their indices are constants; a loop left rolled
// keeps them on the stack and loads each before its vpdpbusd.
#define PENSIEVE_LANES_UNROLL _Pragma("GCC unroll 16")
#define PENSIEVE_LANES_INLINE PENSIEVE_AVX512_FN inline __attribute__((always_inline))

// Rows a and b's 32 bytes at one offset, a's in the low 256 bits.
PENSIEVE_LANES_INLINE __m512i row_pair(const std::byte* a, const std::byte* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

// The 32 bytes at `at` of the 16 rows (row r at at + r * row_bytes) as
// out[j], lane r = dword j of row r: per 128-bit lane an interleave of
// dwords, then of qwords, gives 4 rows' dword j (lane 0) and j + 4 (lane 1)
// for rows 0-3 | 4-7 and 8-11 | 12-15; one 128-bit shuffle per output puts
// the lanes in row order. 8 loads, 8 inserts and 24 shuffles.
PENSIEVE_LANES_INLINE void transpose16(const std::byte* at, std::size_t row_bytes,
                                           __m512i* out) {
  __m512i c[2][4];
  PENSIEVE_LANES_UNROLL
  for (int h = 0; h < 2; ++h) {
    const std::byte* base = at + std::size_t(8 * h) * row_bytes;
    __m512i z[4];
    PENSIEVE_LANES_UNROLL
    for (int i = 0; i < 4; ++i) z[i] = row_pair(base + i * row_bytes, base + (i + 4) * row_bytes);
    const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]);
    const __m512i a1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]);
    const __m512i a3 = _mm512_unpackhi_epi32(z[2], z[3]);
    c[h][0] = _mm512_unpacklo_epi64(a0, a2);
    c[h][1] = _mm512_unpackhi_epi64(a0, a2);
    c[h][2] = _mm512_unpacklo_epi64(a1, a3);
    c[h][3] = _mm512_unpackhi_epi64(a1, a3);
  }
  PENSIEVE_LANES_UNROLL
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm512_shuffle_i64x2(c[0][j], c[1][j], _MM_SHUFFLE(2, 0, 2, 0));
    out[j + 4] = _mm512_shuffle_i64x2(c[0][j], c[1][j], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// The dword at `at` of each of the 16 rows.
PENSIEVE_LANES_INLINE __m512i gather16(const std::byte* at, __m512i row_offsets) {
  return _mm512_i32gather_epi32(row_offsets, reinterpret_cast<const int*>(at), 1);
}

// Byte k of each lane, zero- or sign-extended.
template <int K>
PENSIEVE_LANES_INLINE __m512i byte_u(__m512i v) {
  if constexpr (K == 3) return _mm512_srli_epi32(v, 24);
  return _mm512_and_si512(_mm512_srli_epi32(v, 8 * K), _mm512_set1_epi32(0xff));
}
template <int K>
PENSIEVE_LANES_INLINE __m512i byte_s(__m512i v) {
  return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * K), 24);
}

// Lanes shifted left by s (right by -s) within their dwords.
template <int S>
PENSIEVE_LANES_INLINE __m512i shift32(__m512i v) {
  if constexpr (S > 0) return _mm512_slli_epi32(v, S);
  if constexpr (S < 0) return _mm512_srli_epi32(v, -S);
  return v;
}

// a | (b & c), one instruction.
PENSIEVE_LANES_INLINE __m512i or_and(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi32(a, b, c, 0xf8);
}

// The activation's 4 bytes at p in every lane.
PENSIEVE_LANES_INLINE __m512i bcast4(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The prefetches of block b of nb: its share of [pf, pf + pf_bytes), into
// the L1 (the next tile's 16 rows, 10 KiB at 768 Q6_K columns): the block
// reads 16 rows at once, more streams than the L1's own prefetcher follows.
// From DRAM, 8 tokens, one thread: Q6_K 108 against 119-133 us into the L2,
// Q5_K 75 against 86 (BM_KQuantBatch, AMD Zen 5, 2026-12-06).
PENSIEVE_LANES_INLINE void lane_prefetch(const std::byte* pf, std::size_t pf_bytes,
                                             std::int64_t b, std::int64_t nb) {
  if (pf == nullptr) return;
  const std::size_t lines = (pf_bytes + 63) / 64;
  for (std::size_t l = lines * std::size_t(b) / std::size_t(nb);
       l < lines * std::size_t(b + 1) / std::size_t(nb); ++l)
    prefetch_l1(pf + 64 * l);
}

PENSIEVE_LANES_INLINE __m512i lane_offsets(std::size_t row_bytes) {
  return _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(std::int32_t(row_bytes)));
}

// The integer sum of one 64-value group's two sub-blocks for one token:
// lo[j] / hi[j] lane r = quants 4j..4j+3 of the low / high sub-block of row
// r (unsigned), xq the group's 64 activation bytes, times each row's scales.
PENSIEVE_LANES_INLINE __m512i group_sum(const __m512i* lo, const __m512i* hi,
                                            const std::int8_t* xq, __m512i sc_lo, __m512i sc_hi) {
  __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
  PENSIEVE_LANES_UNROLL
  for (int j = 0; j < 8; ++j) {
    a = _mm512_dpbusd_epi32(a, lo[j], bcast4(xq + 4 * j));
    b = _mm512_dpbusd_epi32(b, hi[j], bcast4(xq + 32 + 4 * j));
  }
  return _mm512_add_epi32(_mm512_mullo_epi32(a, sc_lo), _mm512_mullo_epi32(b, sc_hi));
}

// Q4_K (Bytes 144, quants at 16) / Q5_K (176, fifth bits at 16, quants at
// 48), 16 rows x T tokens. Group g's 32 bytes hold quants 64g + l (low
// nibble, sub-block 2g) and 64g + 32 + l (high nibble, sub-block 2g + 1);
// Q5_K's fifth bits are bits 2g and 2g + 1 of fifth byte l.
template <int Bytes, int Quants, bool Fifth, int T>
PENSIEVE_AVX512_FN void k4_lane_tile(const std::byte* w, std::size_t row_bytes,
                                     const QuantActRow* x, std::int64_t nb, float* y,
                                     std::int64_t y_stride, unsigned store, const std::byte* pf,
                                     std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f);
  const __m512i m30 = _mm512_set1_epi8(0x30), m10 = _mm512_set1_epi8(0x10);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 acc[T], accm[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * Bytes;
    // The 12 scale bytes (k4_scales_mins in lanes): scales 0-3 and mins
    // 0-3 in the low 6 bits of dwords 0 and 1; scales 4-7 and mins 4-7 a
    // nibble of dword 2 plus the top 2 bits of dword 0 / 1.
    const __m512i s0 = gather16(wb + 4, offsets), s1 = gather16(wb + 8, offsets);
    const __m512i s2 = gather16(wb + 12, offsets);
    const __m512i sc_lo = _mm512_and_si512(s0, m6);
    const __m512i sc_hi = or_and(_mm512_and_si512(s2, m4), _mm512_srli_epi32(s0, 2), m30);
    __m512i fifth[8];
    if constexpr (Fifth) transpose16(wb + 16, row_bytes, fifth);
    __m512i sum[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    auto group = [&]<int G>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i lo[8], hi[8];
      transpose16(wb + Quants + 32 * G, row_bytes, lo);
      PENSIEVE_LANES_UNROLL
      for (int j = 0; j < 8; ++j) {
        hi[j] = _mm512_and_si512(_mm512_srli_epi32(lo[j], 4), m4);
        lo[j] = _mm512_and_si512(lo[j], m4);
        if constexpr (Fifth) {
          lo[j] = or_and(lo[j], shift32<4 - 2 * G>(fifth[j]), m10);
          hi[j] = or_and(hi[j], shift32<3 - 2 * G>(fifth[j]), m10);
        }
      }
      const __m512i scales = G < 2 ? sc_lo : sc_hi;
      const __m512i sa = G % 2 == 0 ? byte_u<0>(scales) : byte_u<2>(scales);
      const __m512i sb = G % 2 == 0 ? byte_u<1>(scales) : byte_u<3>(scales);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t)
        sum[t] = _mm512_add_epi32(sum[t], group_sum(lo, hi, x[t].q + b * 256 + 64 * G, sa, sb));
    };
    group.template operator()<0>();
    group.template operator()<1>();
    group.template operator()<2>();
    group.template operator()<3>();
    // The mins' sum: min_j * (bsums 2j + 2j + 1), as pairs of i16 products.
    const __m512i mn_lo = _mm512_and_si512(s1, m6);
    const __m512i mn_hi =
        or_and(_mm512_and_si512(_mm512_srli_epi32(s2, 4), m4), _mm512_srli_epi32(s1, 2), m30);
    __m512i mins2[8];
    auto twice16 = [](__m512i v) PENSIEVE_AVX512_FN __attribute__((always_inline)) { return _mm512_or_si512(v, _mm512_slli_epi32(v, 16)); };
    mins2[0] = twice16(byte_u<0>(mn_lo));
    mins2[1] = twice16(byte_u<1>(mn_lo));
    mins2[2] = twice16(byte_u<2>(mn_lo));
    mins2[3] = twice16(byte_u<3>(mn_lo));
    mins2[4] = twice16(byte_u<0>(mn_hi));
    mins2[5] = twice16(byte_u<1>(mn_hi));
    mins2[6] = twice16(byte_u<2>(mn_hi));
    mins2[7] = twice16(byte_u<3>(mn_hi));
    const __m512i head = gather16(wb, offsets);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const std::int16_t* bs = x[t].bsums + b * 16;
      __m512i m = _mm512_setzero_si512();
      PENSIEVE_LANES_UNROLL
      for (int j = 0; j < 8; ++j) m = _mm512_dpwssd_epi32(m, mins2[j], bcast4(bs + 2 * j));
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(sum[t]), acc[t]);
      const __m512 mscale = _mm512_xor_ps(_mm512_mul_ps(dx, dmin), sign);
      accm[t] = _mm512_fmadd_ps(mscale, _mm512_cvtepi32_ps(m), accm[t]);
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store), _mm512_add_ps(acc[t], accm[t]));
}

// Q6_K, 16 rows x T tokens. Half h of the block: quants 128h + l + 32k
// (l < 32) are nibble k / 2 of low-bits byte 64h + 32 (k % 2) + l, with bits
// 2k, 2k + 1 of high-bits byte 128 + 32h + l on top; quant i's scale is the
// signed byte 192 + i / 16. As the single-row kernel, the quants are taken
// unsigned (0..63) and 32 * sum(scale_s * bsum_s) is taken off in int32:
// here each sub-block's sum starts from -32 * bsum_s, before its scale
// (the same integer, without a multiply per sub-block for the bias).
template <int T>
PENSIEVE_AVX512_FN void q6_k_lane_tile(const std::byte* w, std::size_t row_bytes,
                                       const QuantActRow* x, std::int64_t nb, float* y,
                                       std::int64_t y_stride, unsigned store, const std::byte* pf,
                                       std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  __m512 acc[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * 210;
    __m512i sc4[4];
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < 4; ++k) sc4[k] = gather16(wb + 192 + 4 * k, offsets);
    __m512i sum[T];
    alignas(64) std::int32_t bias[T][16];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      sum[t] = _mm512_setzero_si512();
      const __m512i bs = _mm512_cvtepi16_epi32(load256(x[t].bsums + b * 16));
      _mm512_store_si512(bias[t], _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bs, 5)));
    }
    // Quants 128h + 32k + l and 128h + 32(k + 2) + l (k = 0, 1): the low
    // and high nibbles of one low-bits run, each with its 2 high bits.
    // (The high bits are transposed again for each k: kept for both, they
    // pushed the 8-token tile's sums out of the registers.)
    auto pair = [&]<int H, int K>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i a[8], c[8];
      transpose16(wb + 128 + 32 * H, row_bytes, c);
      transpose16(wb + 64 * H + 32 * K, row_bytes, a);
      PENSIEVE_LANES_UNROLL
      for (int j = 0; j < 8; ++j) {
        const __m512i high = c[j];
        c[j] = or_and(_mm512_and_si512(_mm512_srli_epi32(a[j], 4), m4), shift32<-2 * K>(high), m30);
        a[j] = or_and(_mm512_and_si512(a[j], m4), shift32<4 - 2 * K>(high), m30);
      }
      // Sub-blocks 8h + 2k (+ 1 for j >= 4) and 8h + 2k + 4 (+ 1).
      constexpr int s = 8 * H + 2 * K;
      auto scale = [&]<int S>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
        const __m512i v = sc4[S / 4];
        if constexpr (S % 4 == 0) return byte_s<0>(v);
        if constexpr (S % 4 == 1) return byte_s<1>(v);
        if constexpr (S % 4 == 2) return byte_s<2>(v);
        return byte_s<3>(v);
      };
      const __m512i sa0 = scale.template operator()<s>(), sa1 = scale.template operator()<s + 1>();
      const __m512i sc0 = scale.template operator()<s + 4>(),
                    sc1 = scale.template operator()<s + 5>();
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        const std::int8_t* xq = x[t].q + b * 256 + 128 * H + 32 * K;
        __m512i p[4] = {_mm512_set1_epi32(bias[t][s]), _mm512_set1_epi32(bias[t][s + 1]),
                        _mm512_set1_epi32(bias[t][s + 4]), _mm512_set1_epi32(bias[t][s + 5])};
        PENSIEVE_LANES_UNROLL
        for (int j = 0; j < 4; ++j) {
          p[0] = _mm512_dpbusd_epi32(p[0], a[j], bcast4(xq + 4 * j));
          p[1] = _mm512_dpbusd_epi32(p[1], a[j + 4], bcast4(xq + 16 + 4 * j));
          p[2] = _mm512_dpbusd_epi32(p[2], c[j], bcast4(xq + 64 + 4 * j));
          p[3] = _mm512_dpbusd_epi32(p[3], c[j + 4], bcast4(xq + 80 + 4 * j));
        }
        const __m512i s01 =
            _mm512_add_epi32(_mm512_mullo_epi32(p[0], sa0), _mm512_mullo_epi32(p[1], sa1));
        const __m512i s23 =
            _mm512_add_epi32(_mm512_mullo_epi32(p[2], sc0), _mm512_mullo_epi32(p[3], sc1));
        sum[t] = _mm512_add_epi32(sum[t], _mm512_add_epi32(s01, s23));
      }
    };
    pair.template operator()<0, 0>();
    pair.template operator()<0, 1>();
    pair.template operator()<1, 0>();
    pair.template operator()<1, 1>();
    // d is the F16 at byte 208, the high word at 206 (a 4-byte gather at
    // 208 would read past the weight's last block).
    const __m512 d =
        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather16(wb + 206, offsets), 16)));
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, d), _mm512_cvtepi32_ps(sum[t]), acc[t]);
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store),
                          _mm512_add_ps(acc[t], _mm512_setzero_ps()));
}

template <template <int> class K>
PENSIEVE_AVX512_FN void lane_tile(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                  int n_tokens, std::int64_t nb, float* y, std::int64_t y_stride,
                                  unsigned store, const std::byte* pf, std::size_t pf_bytes) {
  switch (n_tokens) {
    case 1: return K<1>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 2: return K<2>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 3: return K<3>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 4: return K<4>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 5: return K<5>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 6: return K<6>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 7: return K<7>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    case 8: return K<8>::run(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
    default: assert(false && "quant lane tile: 1 to quant_dot_lane_tile_tokens_max tokens");
  }
}
static_assert(quant_dot_lane_tile_tokens_max == 8);
#define PENSIEVE_LANE_TILE(name, ...)                                                           \
  template <int T>                                                                              \
  struct name {                                                                                 \
    PENSIEVE_AVX512_FN static void run(const std::byte* w, std::size_t rb, const QuantActRow* x, \
                                       std::int64_t nb, float* y, std::int64_t s, unsigned store, \
                                       const std::byte* pf, std::size_t pf_bytes) {             \
      __VA_ARGS__(w, rb, x, nb, y, s, store, pf, pf_bytes);                                     \
    }                                                                                           \
  };
PENSIEVE_LANE_TILE(Q4KLanes, k4_lane_tile<144, 16, false, T>)
PENSIEVE_LANE_TILE(Q5KLanes, k4_lane_tile<176, 48, true, T>)
PENSIEVE_LANE_TILE(Q6KLanes, q6_k_lane_tile<T>)
#undef PENSIEVE_LANE_TILE
#undef PENSIEVE_LANES_UNROLL
#undef PENSIEVE_LANES_INLINE

}  // namespace

QuantDotLaneTileFn quant_dot_avx512_lane_tile_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return lane_tile<Q4KLanes>;
    case DType::q5_k:
      return lane_tile<Q5KLanes>;
    case DType::q6_k:
      return lane_tile<Q6KLanes>;
    default:
      return nullptr;
  }
}

#else

QuantDotLaneTileFn quant_dot_avx512_lane_tile_fn(DType) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
