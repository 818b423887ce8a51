// The lane panels of quant_dot.hpp on AVX-512 VNNI for the legacy blocks of
// 32 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): 16 weight rows, each in one 32-bit
// lane (quant_lanes_avx512.hpp), against any number of tokens, one
// included. The rows' blocks are unpacked once into the caller's buffer,
// then every group of up to 8 tokens runs from there; each (row, token) has
// the bits of quant_dot_fn.
#include "gpu/kernels/cpu/quant_blocks.hpp"
#include "gpu/kernels/cpu/quant_lanes_avx512.hpp"


namespace pensieve::kernels::cpu {

using model::DType;

#if defined(PENSIEVE_QUANT_AVX512)

namespace {

using namespace quant_lanes;

// ---- Legacy blocks of 32 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): panels ----
// A block's 32 values per row as signed bytes in 8 lane vectors (vector k:
// values 4k..4k+3, which meet the activation's bytes 4k..4k+3). vpdpbusd
// takes the activation as its unsigned operand, flipped to x + 128, so each
// sum starts from -128 * the row's sum of values (made once per block at
// unpacking, for every token). The F32 steps: d_w * d_x times the sum, and
// for Q4_1 / Q5_1 m times the activation block's s (quant_dot.cpp's).

struct alignas(64) LegacyLaneBlock {
  __m512i q[8];
  __m512i start;
  __m512 d, m;
};
static_assert(sizeof(LegacyLaneBlock) == 11 * 64, "quant_dot_lane_panel_bytes's size");

// Bits 0-3 of each lane spread to bit 4 of its 4 bytes (bit i to byte i).
PENSIEVE_LANES_INLINE __m512i spread4_to_bit4(__m512i v) {
  const __m512i bits = _mm512_mullo_epi32(_mm512_and_si512(v, _mm512_set1_epi32(0xf)),
                                          _mm512_set1_epi32(0x204081));
  return _mm512_and_si512(_mm512_slli_epi32(bits, 4), _mm512_set1_epi32(0x10101010));
}

// Where a legacy type keeps its fields, and its values from the quants.
enum class LegacyValues { minus8, plain, minus16, iq4nl };
struct LegacyKind {
  int bytes, quants, fifth, min;  // fifth / min: offset of the u32 fifth bits / F16 m, or -1
  LegacyValues values;
};
constexpr LegacyKind q4_0_kind{18, 2, -1, -1, LegacyValues::minus8},
    q4_1_kind{20, 4, -1, 2, LegacyValues::plain}, q5_0_kind{22, 6, 2, -1, LegacyValues::minus16},
    q5_1_kind{24, 8, 4, 2, LegacyValues::plain}, iq4_nl_kind{18, 2, -1, -1, LegacyValues::iq4nl};

// Vector k's values (lo: elements 4k..4k+3, hi: 16 + 4k..) as signed bytes
// from the transposed quant bytes t and the fifth bits (lane r: row r's u32).
template <LegacyKind K>
PENSIEVE_LANES_INLINE void legacy_values(__m512i t, __m512i fifth, __m512i grid, int k,
                                         __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  lo = _mm512_and_si512(t, m4);
  hi = _mm512_and_si512(_mm512_srli_epi32(t, 4), m4);
  if constexpr (K.fifth >= 0) {
    lo = _mm512_or_si512(lo, spread4_to_bit4(_mm512_srlv_epi32(fifth, _mm512_set1_epi32(4 * k))));
    hi = _mm512_or_si512(hi,
                         spread4_to_bit4(_mm512_srlv_epi32(fifth, _mm512_set1_epi32(16 + 4 * k))));
  }
  if constexpr (K.values == LegacyValues::minus8) {
    lo = _mm512_sub_epi8(lo, _mm512_set1_epi8(8));
    hi = _mm512_sub_epi8(hi, _mm512_set1_epi8(8));
  } else if constexpr (K.values == LegacyValues::minus16) {
    lo = _mm512_sub_epi8(lo, _mm512_set1_epi8(16));
    hi = _mm512_sub_epi8(hi, _mm512_set1_epi8(16));
  } else if constexpr (K.values == LegacyValues::iq4nl) {
    lo = _mm512_shuffle_epi8(grid, lo);
    hi = _mm512_shuffle_epi8(grid, hi);
  }
}

template <LegacyKind K, PrefetchInto P>
PENSIEVE_AVX512_FN void legacy_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                      LegacyLaneBlock* out, const std::byte* pf,
                                      std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i grid = _mm512_broadcast_i32x4(load128(iq4nl_values));
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * K.bytes;
    LegacyLaneBlock& L = out[b];
    __m512i t[4];
    transpose16x16(wb + K.quants, row_bytes, t);
    __m512i fifth = _mm512_setzero_si512();
    if constexpr (K.fifth >= 0) fifth = gather16(wb + K.fifth, offsets);
    __m512i sum = _mm512_setzero_si512();
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < 4; ++k) {
      __m512i lo, hi;
      legacy_values<K>(t[k], fifth, grid, k, lo, hi);
      L.q[k] = lo;
      L.q[4 + k] = hi;
      sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum, ones, lo), ones, hi);
    }
    L.start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7));
    const __m512i head = gather16(wb, offsets);
    L.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    L.m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
  }
}

template <LegacyKind K, int T>
PENSIEVE_AVX512_FN void legacy_panel_dot(const LegacyLaneBlock* blocks, const QuantActRow* x,
                                         std::int64_t nb, float* y, std::int64_t y_stride,
                                         unsigned store) {
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  __m512 acc[T], accm[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const LegacyLaneBlock& L = blocks[b];
    alignas(32) std::uint8_t xu[T][32];  // the activation block + 128
    __m512i p[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(xu[t]),
                         _mm256_xor_si256(load256(x[t].q + b * 32), flip));
      p[t] = L.start;
    }
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < 8; ++k) {
      const __m512i q = _mm512_load_si512(&L.q[k]);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) p[t] = _mm512_dpbusd_epi32(p[t], bcast4(xu[t] + 4 * k), q);
    }
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(L.d, _mm512_set1_ps(x[t].d[b]));
      acc[t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p[t]), acc[t]);
      if constexpr (K.min >= 0) accm[t] = _mm512_fmadd_ps(L.m, _mm512_set1_ps(x[t].s[b]), accm[t]);
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store), _mm512_add_ps(acc[t], accm[t]));
}

// One token (a decode step) straight from the rows: each block unpacked in
// registers and multiplied at once, where a panel would write its buffer to
// read it back once. The same sums and F32 steps as legacy_panel_dot<K, 1>.
template <LegacyKind K, PrefetchInto P>
PENSIEVE_AVX512_FN void legacy_tile1(const std::byte* w, std::size_t row_bytes, const QuantActRow& x,
                                     std::int64_t nb, float* y, unsigned store, const std::byte* pf,
                                     std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i grid = _mm512_broadcast_i32x4(load128(iq4nl_values));
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  __m512 acc = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * K.bytes;
    __m512i t[4];
    transpose16x16(wb + K.quants, row_bytes, t);
    __m512i fifth = _mm512_setzero_si512();
    if constexpr (K.fifth >= 0) fifth = gather16(wb + K.fifth, offsets);
    alignas(32) std::uint8_t xu[32];  // the activation block + 128
    _mm256_store_si256(reinterpret_cast<__m256i*>(xu), _mm256_xor_si256(load256(x.q + b * 32), flip));
    __m512i p = _mm512_setzero_si512(), sum = _mm512_setzero_si512();
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < 4; ++k) {
      __m512i lo, hi;
      legacy_values<K>(t[k], fifth, grid, k, lo, hi);
      p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(p, bcast4(xu + 4 * k), lo),
                              bcast4(xu + 16 + 4 * k), hi);
      sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum, ones, lo), ones, hi);
    }
    p = _mm512_sub_epi32(p, _mm512_slli_epi32(sum, 7));
    const __m512i head = gather16(wb, offsets);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x.d[b])), _mm512_cvtepi32_ps(p), acc);
    if constexpr (K.min >= 0) {
      const __m512 m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
      accm = _mm512_fmadd_ps(m, _mm512_set1_ps(x.s[b]), accm);
    }
  }
  _mm512_mask_storeu_ps(y, __mmask16(store), _mm512_add_ps(acc, accm));
}

template <LegacyKind K, PrefetchInto P>
PENSIEVE_AVX512_FN void legacy_panel(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                     int n_tokens, std::int64_t nb, float* y,
                                     std::int64_t y_stride, unsigned store, void* scratch,
                                     const std::byte* pf, std::size_t pf_bytes) {
  if (n_tokens == 1) return legacy_tile1<K, P>(w, rb, *x, nb, y, store, pf, pf_bytes);
  auto* blocks = static_cast<LegacyLaneBlock*>(scratch);
  legacy_unpack<K, P>(w, rb, nb, blocks, pf, pf_bytes);
  for_token_groups(n_tokens, [&](int t, int n) {
    with_token_count<quant_dot_lane_tile_tokens_max>(n, [&]<int T>() {
      legacy_panel_dot<K, T>(blocks, x + t, nb, y + t * y_stride, y_stride, store);
    });
  });
}

template <PrefetchInto P>
QuantDotLanePanelFn legacy_panel_fn(DType t) {
  switch (t) {
    case DType::q4_0:
      return legacy_panel<q4_0_kind, P>;
    case DType::q4_1:
      return legacy_panel<q4_1_kind, P>;
    case DType::q5_0:
      return legacy_panel<q5_0_kind, P>;
    case DType::q5_1:
      return legacy_panel<q5_1_kind, P>;
    case DType::iq4_nl:
      return legacy_panel<iq4_nl_kind, P>;
    default:
      return nullptr;
  }
}

}  // namespace

QuantDotLanePanelFn quant_dot_avx512_legacy_panel_fn(DType t, PrefetchInto pf) {
  return pf == PrefetchInto::l2 ? legacy_panel_fn<PrefetchInto::l2>(t)
                                : legacy_panel_fn<PrefetchInto::l1>(t);
}

#else

QuantDotLanePanelFn quant_dot_avx512_legacy_panel_fn(DType, PrefetchInto) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
