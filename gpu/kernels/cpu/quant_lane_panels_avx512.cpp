// The lane panels of quant_dot.hpp on AVX-512 VNNI for the K-quants (Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS: 16 weight rows, each in one 32-bit lane
// (quant_lanes_avx512.hpp), against any number of tokens. The rows' blocks
// are unpacked once into the caller's buffer in lane order, then every group
// of up to 8 tokens runs from there: a prefill chunk pays the unpacking once
// where the register tiles (quant_lane_tiles_avx512.cpp) would pay it per
// group. Q2_K and Q3_K, which have no tiles, take every batch here.
//
// Each (row, token) has the bits of quant_dot_fn, as the tiles do: the
// integer sums are exact and lane r takes the reference's F32 steps in block
// order with the same operands. The legacy blocks of 32 have their own
// panels (quant_legacy_panels_avx512.cpp).
#include "gpu/kernels/cpu/quant_lanes_avx512.hpp"

#include <utility>

namespace pensieve::kernels::cpu {

using model::DType;

#if defined(PENSIEVE_QUANT_AVX512)

namespace {

using namespace quant_lanes;

// ---- The panels: more tokens than a tile takes ----
// The 16 rows' blocks are unpacked once into a buffer in lane order (5.6
// KiB a block: 24 KiB for 1024 columns, in the L1 while the token groups
// pass over it), then each group of up to 8 tokens runs from it, as the
// register tiles would, without unpacking the rows again per group.

struct alignas(64) LaneBlock {
  __m512i q[64];      // quant vector k
  __m512i scale[16];  // sub-block scales: Q4_K / Q5_K / IQ4_XS 8 of 32 quants, Q6_K 16 of 16
  // Word pairs (sub-blocks 2j, 2j + 1) against the bsums, one vpdpwssd each:
  // Q4_K / Q5_K min_j in both i16 halves, Q2_K its mins, Q6_K / Q3_K their
  // scales, IQ4_XS its scale_j in both halves (for the bias taken off once a
  // block).
  __m512i pairs2[8];
  __m512 d, dmin;
};
static_assert(sizeof(LaneBlock) == quant_dot_lane_panel_block_bytes);

// The 16 sub-block scales (Q6_K, Q3_K: signed, under 16 bits) as word pairs.
PENSIEVE_LANES_INLINE void scale_pairs(LaneBlock& L) {
  PENSIEVE_LANES_UNROLL
  for (int j = 0; j < 8; ++j)
    L.pairs2[j] = _mm512_or_si512(_mm512_and_si512(L.scale[2 * j], _mm512_set1_epi32(0xffff)),
                                  _mm512_slli_epi32(L.scale[2 * j + 1], 16));
}

template <int Bytes, int Quants, bool Fifth, PrefetchInto P>
PENSIEVE_AVX512_FN void k4_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * Bytes;
    LaneBlock& L = out[b];
    const K4Head h = k4_head(wb, row_bytes);
    __m512i fifth[8];
    if constexpr (Fifth) transpose16(wb + 16, row_bytes, fifth);
    k4_group<Quants, Fifth, 0>(wb, row_bytes, fifth, L.q, L.q + 8);
    k4_group<Quants, Fifth, 1>(wb, row_bytes, fifth, L.q + 16, L.q + 24);
    k4_group<Quants, Fifth, 2>(wb, row_bytes, fifth, L.q + 32, L.q + 40);
    k4_group<Quants, Fifth, 3>(wb, row_bytes, fifth, L.q + 48, L.q + 56);
    L.scale[0] = k4_scale<0>(h), L.scale[1] = k4_scale<1>(h), L.scale[2] = k4_scale<2>(h);
    L.scale[3] = k4_scale<3>(h), L.scale[4] = k4_scale<4>(h), L.scale[5] = k4_scale<5>(h);
    L.scale[6] = k4_scale<6>(h), L.scale[7] = k4_scale<7>(h);
    L.pairs2[0] = k4_min2<0>(h), L.pairs2[1] = k4_min2<1>(h), L.pairs2[2] = k4_min2<2>(h);
    L.pairs2[3] = k4_min2<3>(h), L.pairs2[4] = k4_min2<4>(h), L.pairs2[5] = k4_min2<5>(h);
    L.pairs2[6] = k4_min2<6>(h), L.pairs2[7] = k4_min2<7>(h);
    L.d = h.d;
    L.dmin = h.dmin;
  }
}

template <PrefetchInto P>
PENSIEVE_AVX512_FN void q6_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * 210;
    LaneBlock& L = out[b];
    const Q6Head h = q6_head(wb, row_bytes, offsets);
    q6_run<0, 0>(wb, row_bytes, L.q, L.q + 16);
    q6_run<0, 1>(wb, row_bytes, L.q + 8, L.q + 24);
    q6_run<1, 0>(wb, row_bytes, L.q + 32, L.q + 48);
    q6_run<1, 1>(wb, row_bytes, L.q + 40, L.q + 56);
    auto scales = [&]<int... S>(std::integer_sequence<int, S...>)
                      PENSIEVE_AVX512_FN __attribute__((always_inline)) {
                        ((L.scale[S] = q6_scale<S>(h)), ...);
                      };
    scales(std::make_integer_sequence<int, 16>{});
    scale_pairs(L);
    L.d = h.d;
  }
}

// Q3_K (110 bytes): quant 128n + 32s + l (s < 4) is bits 2s of low-bits
// byte 32 + 32n + l, minus 4 unless bit 4n + s of high-bits byte l is set;
// taken here as 0..7 (the high bit as 4), the 4 taken off by the bias. The
// 16 scales (-32..31) are a nibble of bytes 96-103 (low for sub-blocks < 8)
// and 2 bits of byte 104 + (j & 3); d is the F16 at 108 (the high word at
// 106: a 4-byte gather at 108 would read past the weight's last block).
template <PrefetchInto P>
PENSIEVE_AVX512_FN void q3_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m3 = _mm512_set1_epi8(0x03), m4bit = _mm512_set1_epi8(0x04);
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * 110;
    LaneBlock& L = out[b];
    __m512i high[8];
    transpose16(wb, row_bytes, high);
    auto half = [&]<int N>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i low[8];
      transpose16(wb + 32 + 32 * N, row_bytes, low);
      auto run = [&]<int S>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
        PENSIEVE_LANES_UNROLL
        for (int j = 0; j < 8; ++j)
          L.q[32 * N + 8 * S + j] =
              or_and(_mm512_and_si512(shift32<-2 * S>(low[j]), m3),
                     shift32<2 - (4 * N + S)>(high[j]), m4bit);
      };
      run.template operator()<0>();
      run.template operator()<1>();
      run.template operator()<2>();
      run.template operator()<3>();
    };
    half.template operator()<0>();
    half.template operator()<1>();
    const __m512i a = gather16(wb + 96, offsets), c = gather16(wb + 100, offsets);
    const __m512i hb = gather16(wb + 104, offsets);
    auto scales = [&]<int... J>(std::integer_sequence<int, J...>)
                      PENSIEVE_AVX512_FN __attribute__((always_inline)) {
                        auto one = [&]<int I>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
                          const __m512i byte = byte_u<I % 4>((I % 8) < 4 ? a : c);
                          const __m512i low = I < 8 ? _mm512_and_si512(byte, _mm512_set1_epi32(0xf))
                                                    : _mm512_srli_epi32(byte, 4);
                          const __m512i hi2 = _mm512_and_si512(
                              _mm512_srli_epi32(byte_u<I & 3>(hb), 2 * (I >> 2)), _mm512_set1_epi32(3));
                          return _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(hi2, 4)),
                                                  _mm512_set1_epi32(32));
                        };
                        ((L.scale[J] = one.template operator()<J>()), ...);
                      };
    scales(std::make_integer_sequence<int, 16>{});
    scale_pairs(L);
    L.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather16(wb + 106, offsets), 16)));
  }
}

// Q2_K (84 bytes): quant 128n + 32s + l is bits 2s of byte 16 + 32n + l;
// sub-block j's scale is the low nibble of byte j, its min the high one; d
// and dmin the F16s at 80 and 82.
template <PrefetchInto P>
PENSIEVE_AVX512_FN void q2_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m3 = _mm512_set1_epi8(0x03);
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * 84;
    LaneBlock& L = out[b];
    auto half = [&]<int N>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i quants[8];
      transpose16(wb + 16 + 32 * N, row_bytes, quants);
      PENSIEVE_LANES_UNROLL
      for (int s = 0; s < 4; ++s) {
        PENSIEVE_LANES_UNROLL
        for (int j = 0; j < 8; ++j)
          L.q[32 * N + 8 * s + j] =
              _mm512_and_si512(_mm512_srlv_epi32(quants[j], _mm512_set1_epi32(2 * s)), m3);
      }
    };
    half.template operator()<0>();
    half.template operator()<1>();
    __m512i sc4[4];
    transpose16x16(wb, row_bytes, sc4);
    auto fields = [&]<int... J>(std::integer_sequence<int, J...>)
                      PENSIEVE_AVX512_FN __attribute__((always_inline)) {
                        ((L.scale[J] = _mm512_and_si512(byte_u<J % 4>(sc4[J / 4]), _mm512_set1_epi32(0xf))),
                         ...);
                      };
    fields(std::make_integer_sequence<int, 16>{});
    // The mins in pairs (j, j + 1) of i16 halves, against bsums 2p, 2p + 1.
    PENSIEVE_LANES_UNROLL
    for (int p = 0; p < 8; ++p) {
      const __m512i v = sc4[p / 2];
      const int first = 2 * (p % 2);  // byte of min 2p in v
      const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(v, 8 * first + 4), _mm512_set1_epi32(0xf));
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 8 * first + 12), _mm512_set1_epi32(0xf));
      L.pairs2[p] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
    }
    const __m512i head = gather16(wb + 80, offsets);
    L.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    L.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
  }
}

// IQ4_XS (136 bytes): the nibbles at 8 in groups of 32 bytes, group G's
// first 16 bytes sub-block 2G (low nibbles its quants 0-15, high 16-31), the
// next 16 sub-block 2G + 1; each nibble indexes IQ4_NL's grid, taken here
// as grid + 128 (1..241, unsigned), the 128 taken off by the bias; the
// scales and d as iq4_xs_head has them.
template <PrefetchInto P>
PENSIEVE_AVX512_FN void iq4_xs_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                      LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i grid = _mm512_broadcast_i32x4(iq4nl_grid_plus128());
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * 136;
    LaneBlock& L = out[b];
    auto group = [&]<int G>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i bytes[8];
      transpose16(wb + 8 + 32 * G, row_bytes, bytes);
      PENSIEVE_LANES_UNROLL
      for (int j = 0; j < 8; ++j) {
        // Dword j: sub-block 2G + j / 4, its quant vectors j % 4 (low) and 4 + j % 4 (high).
        const int first = 16 * G + 8 * (j / 4) + j % 4;
        iq4_values(bytes[j], grid, L.q[first], L.q[first + 4]);
      }
    };
    group.template operator()<0>();
    group.template operator()<1>();
    group.template operator()<2>();
    group.template operator()<3>();
    const Iq4XsHead h = iq4_xs_head(wb, offsets);
    PENSIEVE_LANES_UNROLL
    for (int j = 0; j < 8; ++j) {
      L.scale[j] = iq4_xs_scale(h, j);
      // The scale in both i16 halves, against the sub-block's two bsums.
      const __m512i s16 = _mm512_and_si512(L.scale[j], _mm512_set1_epi32(0xffff));
      L.pairs2[j] = _mm512_or_si512(s16, _mm512_slli_epi32(s16, 16));
    }
    L.d = h.d;
  }
}

// What a panel's blocks hold, per type: quant vectors per sub-block (8 for
// sub-blocks of 32, 4 for 16), the bias taken off each block's sum
// (sum_s scale_s * bsum_s << BiasShift, from the scale pairs: Q6_K's quants
// are taken as q + 32, Q3_K's as q + 4, IQ4_XS's as its grid value + 128;
// 0 for none) and whether the mins are taken off (Q4_K, Q5_K, Q2_K).
struct PanelKind {
  int per, bias_shift;
  bool mins;
};
constexpr PanelKind k4_panel{8, 0, true}, q6_panel{4, 5, false}, q3_panel{4, 2, false},
    q2_panel{4, 0, true}, iq4_xs_panel{8, 7, false};

// T tokens over an unpacked panel of kind K.
template <PanelKind K, int T>
PENSIEVE_AVX512_FN void panel_dot(const LaneBlock* blocks, const QuantActRow* x, std::int64_t nb,
                                  float* y, std::int64_t y_stride, unsigned store) {
  constexpr int per = K.per, subs = 64 / per;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 acc[T], accm[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const LaneBlock& L = blocks[b];
    __m512i sum[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    PENSIEVE_LANES_UNROLL
    for (int s = 0; s < subs; ++s) {
      __m512i q[per];
      PENSIEVE_LANES_UNROLL
      for (int k = 0; k < per; ++k) q[k] = _mm512_load_si512(&L.q[s * per + k]);
      const __m512i scale = _mm512_load_si512(&L.scale[s]);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        sum[t] = _mm512_add_epi32(sum[t], sub_block_sum<per>(q, x[t].q + b * 256 + 4 * per * s,
                                                             _mm512_setzero_si512(), scale));
        settle(sum[t]);
      }
    }
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      const std::int16_t* bs = x[t].bsums + b * 16;
      if constexpr (K.bias_shift > 0) {
        const __m512i m = bsum_pairs_dot(L.pairs2, bs);
        sum[t] = _mm512_sub_epi32(sum[t], _mm512_slli_epi32(m, K.bias_shift));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, L.d), _mm512_cvtepi32_ps(sum[t]), acc[t]);
      if constexpr (K.mins) {
        const __m512i m = bsum_pairs_dot(L.pairs2, bs);
        const __m512 mscale = _mm512_xor_ps(_mm512_mul_ps(dx, L.dmin), sign);
        accm[t] = _mm512_fmadd_ps(mscale, _mm512_cvtepi32_ps(m), accm[t]);
      }
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store), _mm512_add_ps(acc[t], accm[t]));
}

// The panel: unpack, then the tokens in near-equal groups of up to 8.
template <PanelKind K, void (*Unpack)(const std::byte*, std::size_t, std::int64_t, LaneBlock*,
                                      const std::byte*, std::size_t)>
PENSIEVE_AVX512_FN void lane_panel(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                   int n_tokens, std::int64_t nb, float* y, std::int64_t y_stride,
                                   unsigned store, void* scratch, const std::byte* pf,
                                   std::size_t pf_bytes) {
  auto* blocks = static_cast<LaneBlock*>(scratch);
  Unpack(w, rb, nb, blocks, pf, pf_bytes);
  for_token_groups(n_tokens, [&](int t, int n) {
    with_token_count<quant_dot_lane_tile_tokens_max>(n, [&]<int T>() {
      panel_dot<K, T>(blocks, x + t, nb, y + t * y_stride, y_stride, store);
    });
  });
}

template <PrefetchInto P>
QuantDotLanePanelFn lane_panel_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return lane_panel<k4_panel, k4_unpack<144, 16, false, P>>;
    case DType::q5_k:
      return lane_panel<k4_panel, k4_unpack<176, 48, true, P>>;
    case DType::q6_k:
      return lane_panel<q6_panel, q6_unpack<P>>;
    case DType::q3_k:
      return lane_panel<q3_panel, q3_unpack<P>>;
    case DType::q2_k:
      return lane_panel<q2_panel, q2_unpack<P>>;
    case DType::iq4_xs:
      return lane_panel<iq4_xs_panel, iq4_xs_unpack<P>>;
    default:
      return quant_dot_avx512_legacy_panel_fn(t, P);
  }
}

}  // namespace

// A panel unpacks a block at a time: l1_by_group is l1 here.
QuantDotLanePanelFn quant_dot_avx512_lane_panel_fn(DType t, PrefetchInto pf) {
  return pf == PrefetchInto::l2 ? lane_panel_fn<PrefetchInto::l2>(t) : lane_panel_fn<PrefetchInto::l1>(t);
}

#else

QuantDotLanePanelFn quant_dot_avx512_lane_panel_fn(DType, PrefetchInto) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
