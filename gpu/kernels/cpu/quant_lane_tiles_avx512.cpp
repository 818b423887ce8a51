// The K-quant lane tiles of quant_dot.hpp on AVX-512 VNNI: 16 weight rows x
// 1 to quant_dot_lane_tile_tokens_max tokens (Q4_K, Q5_K, Q6_K and IQ4_XS
// decode steps and batches), each weight row in one 32-bit lane of every vector
// (quant_lanes_avx512.hpp), the blocks unpacked in registers.
//
// The 8-row token tiles (quant_tiles_avx512.cpp) keep a row's 64 quants in
// the lanes of one vector and so reduce every (row, token, block) to one
// integer with shuffles, about as many instructions as the multiplies
// themselves. Here each 32-byte run of the block is transposed for the 16
// rows, as the Q8_0 token tile does (q8_token_tiles.hpp): every lane of
// every vpdpbusd is useful, and nothing is reduced afterwards. A 32-value
// (Q4_K, Q5_K) or 16-value (Q6_K) sub-block sums in its own register and is
// scaled by its rows' scales with one vpmulld. The transposition and the
// unpacking of the quants are paid once per block for all the tokens; more
// tokens than a tile takes run through the panels
// (quant_lane_panels_avx512.cpp), which unpack once for all of them.
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
#include "gpu/kernels/cpu/quant_lanes_avx512.hpp"


namespace pensieve::kernels::cpu {

using model::DType;

#if defined(PENSIEVE_QUANT_AVX512)

namespace {

using namespace quant_lanes;

// Each tile below calls its prefetch's group() once for each of its four
// quant groups (Q4_K, Q5_K, IQ4_XS) or runs (Q6_K).
static_assert(lane_groups == 4);

// ---- The register tiles: 16 rows x T tokens, unpacked in registers ----

// Q4_K / Q5_K: the quants 64 values at a time, each group's vectors used by
// every token before the next group is unpacked.
template <int Bytes, int Quants, bool Fifth, int T, PrefetchInto P>
PENSIEVE_AVX512_FN void k4_lane_tile(const std::byte* w, std::size_t row_bytes,
                                     const QuantActRow* x, std::int64_t nb, float* y,
                                     std::int64_t y_stride, unsigned store, const std::byte* pf,
                                     std::size_t pf_bytes) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 acc[T], accm[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * Bytes;
    const K4Head h = k4_head(wb, row_bytes);
    __m512i fifth[8];
    if constexpr (Fifth) transpose16(wb + 16, row_bytes, fifth);
    __m512i sum[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    auto group = [&]<int G>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      prefetch.group();
      __m512i lo[8], hi[8];
      k4_group<Quants, Fifth, G>(wb, row_bytes, fifth, lo, hi);
      const __m512i sa = k4_scale<2 * G>(h), sb = k4_scale<2 * G + 1>(h);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        const std::int8_t* xq = x[t].q + b * 256 + 64 * G;
        sum[t] = _mm512_add_epi32(
            sum[t], _mm512_add_epi32(sub_block_sum<8>(lo, xq, _mm512_setzero_si512(), sa),
                                     sub_block_sum<8>(hi, xq + 32, _mm512_setzero_si512(), sb)));
        settle(sum[t]);
      }
    };
    group.template operator()<0>();
    group.template operator()<1>();
    group.template operator()<2>();
    group.template operator()<3>();
    const __m512i mins2[8] = {k4_min2<0>(h), k4_min2<1>(h), k4_min2<2>(h), k4_min2<3>(h),
                              k4_min2<4>(h), k4_min2<5>(h), k4_min2<6>(h), k4_min2<7>(h)};
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512i m = bsum_pairs_dot(mins2, x[t].bsums + b * 16);
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, h.d), _mm512_cvtepi32_ps(sum[t]), acc[t]);
      const __m512 mscale = _mm512_xor_ps(_mm512_mul_ps(dx, h.dmin), sign);
      accm[t] = _mm512_fmadd_ps(mscale, _mm512_cvtepi32_ps(m), accm[t]);
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store), _mm512_add_ps(acc[t], accm[t]));
}

// Q6_K. As the single-row kernel, the quants are taken unsigned (0..63) and
// 32 * sum(scale_s * bsum_s) is taken off in int32 once a block
// (bsum_pairs_dot), not as a start for each sub-block's sum: that took a
// broadcast per sub-block and token. The high bits are transposed again for
// each run: kept for both, they pushed the 8-token tile's sums out of the
// registers.
template <int T, PrefetchInto P>
PENSIEVE_AVX512_FN void q6_k_lane_tile(const std::byte* w, std::size_t row_bytes,
                                       const QuantActRow* x, std::int64_t nb, float* y,
                                       std::int64_t y_stride, unsigned store, const std::byte* pf,
                                       std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  __m512 acc[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * 210;
    const Q6Head h = q6_head(wb, row_bytes, offsets);
    __m512i sum[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    auto run = [&]<int H, int K>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      prefetch.group();
      __m512i a[8], c[8];
      q6_run<H, K>(wb, row_bytes, a, c);
      constexpr int s = 8 * H + 2 * K;
      const __m512i sa0 = q6_scale<s>(h), sa1 = q6_scale<s + 1>(h);
      const __m512i sc0 = q6_scale<s + 4>(h), sc1 = q6_scale<s + 5>(h);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        const std::int8_t* xq = x[t].q + b * 256 + 128 * H + 32 * K;
        const __m512i zero = _mm512_setzero_si512();
        const __m512i s01 = _mm512_add_epi32(sub_block_sum<4>(a, xq, zero, sa0),
                                             sub_block_sum<4>(a + 4, xq + 16, zero, sa1));
        const __m512i s23 = _mm512_add_epi32(sub_block_sum<4>(c, xq + 64, zero, sc0),
                                             sub_block_sum<4>(c + 4, xq + 80, zero, sc1));
        sum[t] = _mm512_add_epi32(sum[t], _mm512_add_epi32(s01, s23));
        settle(sum[t]);
      }
    };
    run.template operator()<0, 0>();
    run.template operator()<0, 1>();
    run.template operator()<1, 0>();
    run.template operator()<1, 1>();
    const Q6ScalePairs pairs = q6_scale_pairs(h);
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      const __m512i bias = bsum_pairs_dot(pairs.p, x[t].bsums + b * 16);
      const __m512i total = _mm512_sub_epi32(sum[t], _mm512_slli_epi32(bias, 5));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, h.d), _mm512_cvtepi32_ps(total), acc[t]);
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store),
                          _mm512_add_ps(acc[t], _mm512_setzero_ps()));
}

// IQ4_XS: group G's 32 bytes hold sub-blocks 2G (bytes 0-15) and 2G + 1,
// each byte's low nibble a quant of the sub-block's first 16 values and its
// high nibble one of the last 16; the nibbles index the grid + 128 (1..241,
// unsigned, vpdpbusd's operand). Each sub-block's sum starts at -128 times
// the activation's sum over it (its two bsums), so it holds the signed grid
// values' sum, and is scaled by its rows' scales (iq4_xs_head) with one
// vpmulld.
template <int T, PrefetchInto P>
PENSIEVE_AVX512_FN void iq4_xs_lane_tile(const std::byte* w, std::size_t row_bytes,
                                         const QuantActRow* x, std::int64_t nb, float* y,
                                         std::int64_t y_stride, unsigned store, const std::byte* pf,
                                         std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i grid = _mm512_broadcast_i32x4(iq4nl_grid_plus128());
  __m512 acc[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  LanePrefetch<P> prefetch(pf, pf_bytes, nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    prefetch.block();
    const std::byte* wb = w + b * 136;
    const Iq4XsHead h = iq4_xs_head(wb, offsets);
    __m512i sum[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    auto group = [&]<int G>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      prefetch.group();
      __m512i bytes[8];
      transpose16(wb + 8 + 32 * G, row_bytes, bytes);
      PENSIEVE_LANES_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int s = 2 * G + half;  // dwords 4 half .. 4 half + 3
        __m512i lo[4], hi[4];
        PENSIEVE_LANES_UNROLL
        for (int k = 0; k < 4; ++k) iq4_values(bytes[4 * half + k], grid, lo[k], hi[k]);
        const __m512i scale = iq4_xs_scale(h, s);
        PENSIEVE_LANES_UNROLL
        for (int t = 0; t < T; ++t) {
          const std::int8_t* xq = x[t].q + b * 256 + 32 * s;
          const std::int16_t* bs = x[t].bsums + b * 16 + 2 * s;
          __m512i p0 = _mm512_set1_epi32(-128 * (bs[0] + bs[1])), p1 = _mm512_setzero_si512();
          PENSIEVE_LANES_UNROLL
          for (int k = 0; k < 4; ++k) {
            p0 = dpbusd_bcast(p0, lo[k], xq + 4 * k);
            p1 = dpbusd_bcast(p1, hi[k], xq + 16 + 4 * k);
          }
          sum[t] = _mm512_add_epi32(sum[t], _mm512_mullo_epi32(_mm512_add_epi32(p0, p1), scale));
          settle(sum[t]);
        }
      }
    };
    group.template operator()<0>();
    group.template operator()<1>();
    group.template operator()<2>();
    group.template operator()<3>();
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(x[t].d[b]), h.d),
                               _mm512_cvtepi32_ps(sum[t]), acc[t]);
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store),
                          _mm512_add_ps(acc[t], _mm512_setzero_ps()));
}

// The tiles for 1..quant_dot_lane_tile_tokens_max tokens.
template <int Bytes, int Quants, bool Fifth, PrefetchInto P>
PENSIEVE_AVX512_FN void k4_lane_tiles(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                      int n_tokens, std::int64_t nb, float* y,
                                      std::int64_t y_stride, unsigned store, const std::byte* pf,
                                      std::size_t pf_bytes) {
  with_token_count<quant_dot_lane_tile_tokens_max>(n_tokens, [&]<int T>() {
    k4_lane_tile<Bytes, Quants, Fifth, T, P>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
  });
}
template <PrefetchInto P>
PENSIEVE_AVX512_FN void q6_k_lane_tiles(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                        int n_tokens, std::int64_t nb, float* y,
                                        std::int64_t y_stride, unsigned store, const std::byte* pf,
                                        std::size_t pf_bytes) {
  with_token_count<quant_dot_lane_tile_tokens_max>(n_tokens, [&]<int T>() {
    q6_k_lane_tile<T, P>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
  });
}

template <PrefetchInto P>
PENSIEVE_AVX512_FN void iq4_xs_lane_tiles(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                          int n_tokens, std::int64_t nb, float* y,
                                          std::int64_t y_stride, unsigned store,
                                          const std::byte* pf, std::size_t pf_bytes) {
  with_token_count<quant_dot_lane_tile_tokens_max>(n_tokens, [&]<int T>() {
    iq4_xs_lane_tile<T, P>(w, rb, x, nb, y, y_stride, store, pf, pf_bytes);
  });
}

template <PrefetchInto P>
QuantDotLaneTileFn lane_tile_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return k4_lane_tiles<144, 16, false, P>;
    case DType::q5_k:
      return k4_lane_tiles<176, 48, true, P>;
    case DType::q6_k:
      return q6_k_lane_tiles<P>;
    case DType::iq4_xs:
      return iq4_xs_lane_tiles<P>;
    default:
      return nullptr;
  }
}

}  // namespace

QuantDotLaneTileFn quant_dot_avx512_lane_tile_fn(DType t, PrefetchInto pf) {
  switch (pf) {
    case PrefetchInto::l1:
      return lane_tile_fn<PrefetchInto::l1>(t);
    case PrefetchInto::l2:
      return lane_tile_fn<PrefetchInto::l2>(t);
    case PrefetchInto::l1_by_group:
      return lane_tile_fn<PrefetchInto::l1_by_group>(t);
  }
  return nullptr;
}

#else

QuantDotLaneTileFn quant_dot_avx512_lane_tile_fn(DType, PrefetchInto) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
