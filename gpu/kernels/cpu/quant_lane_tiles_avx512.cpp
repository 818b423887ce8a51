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
// More tokens than a tile takes (prefill chunks) run through panels: the
// 16 rows unpacked once into a buffer in lane order, then every group of up
// to 8 tokens from there, instead of unpacking again for each group.
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
#include "gpu/kernels/cpu/quant_blocks.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"

#include <cassert>
#include <utility>

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

// ---- A block of 16 rows unpacked into lanes ----
// Quant vector k (k < 64) of a block: lane r = quants 4k..4k+3 of row r,
// unsigned; they meet the activation's bytes 4k..4k+3.

// Q4_K / Q5_K (Bytes 144 or 176): d and dmin (F16 at 0 and 2) and the 12
// scale bytes at 4 (k4_scales_mins in lanes): scales 0-3 and mins 0-3 in the
// low 6 bits of dwords 0 and 1; scales 4-7 and mins 4-7 a nibble of dword 2
// plus the top 2 bits of dword 0 / 1.
struct K4Head {
  __m512i sc_lo, sc_hi, mn_lo, mn_hi;  // per lane, bytes j % 4 of sub-blocks j < 4 | j >= 4
  __m512 d, dmin;
};
PENSIEVE_LANES_INLINE K4Head k4_head(const std::byte* wb, __m512i offsets) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i s0 = gather16(wb + 4, offsets), s1 = gather16(wb + 8, offsets);
  const __m512i s2 = gather16(wb + 12, offsets);
  const __m512i head = gather16(wb, offsets);
  return {_mm512_and_si512(s0, m6),
          or_and(_mm512_and_si512(s2, m4), _mm512_srli_epi32(s0, 2), m30),
          _mm512_and_si512(s1, m6),
          or_and(_mm512_and_si512(_mm512_srli_epi32(s2, 4), m4), _mm512_srli_epi32(s1, 2), m30),
          _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head)),
          _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)))};
}
// Sub-block J's scale, and its min in both i16 halves (against the bsums
// pair of the sub-block, one vpdpwssd).
template <int J>
PENSIEVE_LANES_INLINE __m512i k4_scale(const K4Head& h) {
  return byte_u<J % 4>(J < 4 ? h.sc_lo : h.sc_hi);
}
template <int J>
PENSIEVE_LANES_INLINE __m512i k4_min2(const K4Head& h) {
  const __m512i m = byte_u<J % 4>(J < 4 ? h.mn_lo : h.mn_hi);
  return _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
}

// Group G of a Q4_K (quants at 16) / Q5_K (fifth bits at 16, transposed in
// `fifth`; quants at 48) block: its 32 bytes hold quants 64G + l (low
// nibble, sub-block 2G: lo) and 64G + 32 + l (high nibble, 2G + 1: hi);
// Q5_K's fifth bits are bits 2G and 2G + 1 of fifth byte l. lo[j] and hi[j]
// are quant vectors 16G + j and 16G + 8 + j.
template <int Quants, bool Fifth, int G>
PENSIEVE_LANES_INLINE void k4_group(const std::byte* wb, std::size_t row_bytes,
                                    const __m512i* fifth, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
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
}

// Q6_K (210 bytes): the 16 signed scale bytes at 192 as 4 dwords a lane,
// and d (the F16 at 208, the high word at 206: a 4-byte gather at 208 would
// read past the weight's last block).
struct Q6Head {
  __m512i sc[4];
  __m512 d;
};
PENSIEVE_LANES_INLINE Q6Head q6_head(const std::byte* wb, __m512i offsets) {
  Q6Head h;
  PENSIEVE_LANES_UNROLL
  for (int k = 0; k < 4; ++k) h.sc[k] = gather16(wb + 192 + 4 * k, offsets);
  h.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather16(wb + 206, offsets), 16)));
  return h;
}
template <int S>
PENSIEVE_LANES_INLINE __m512i q6_scale(const Q6Head& h) {
  return byte_s<S % 4>(h.sc[S / 4]);
}

// Half H, run K (K < 2) of a Q6_K block: quants 128H + 32K + l (a, the low
// nibbles of low-bits byte 64H + 32K + l) and 128H + 32(K + 2) + l (c, their
// high nibbles), each with 2 bits of high-bits byte 128 + 32H + l on top
// (bits 2K and 2K + 4). a[j] and c[j] are quant vectors 32H + 8K + j and
// 32H + 8K + 16 + j; sub-blocks (16 quants) 8H + 2K (+1 for j >= 4) and
// 8H + 2K + 4 (+1).
template <int H, int K>
PENSIEVE_LANES_INLINE void q6_run(const std::byte* wb, std::size_t row_bytes, __m512i* a,
                                  __m512i* c) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  transpose16(wb + 128 + 32 * H, row_bytes, c);
  transpose16(wb + 64 * H + 32 * K, row_bytes, a);
  PENSIEVE_LANES_UNROLL
  for (int j = 0; j < 8; ++j) {
    const __m512i high = c[j];
    c[j] = or_and(_mm512_and_si512(_mm512_srli_epi32(a[j], 4), m4), shift32<-2 * K>(high), m30);
    a[j] = or_and(_mm512_and_si512(a[j], m4), shift32<4 - 2 * K>(high), m30);
  }
}

// -(bsum_s << Shift) of token x's block b for s < 16: the start of each
// sub-block's sum.
template <int Shift>
PENSIEVE_LANES_INLINE void bsum_bias(const QuantActRow& x, std::int64_t b, std::int32_t* out) {
  const __m512i bs = _mm512_cvtepi16_epi32(load256(x.bsums + b * 16));
  _mm512_store_si512(out, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bs, Shift)));
}

// One token's sum over the N quant vectors q of one sub-block (activation
// bytes at xq), from `start`, times the sub-block's scales.
template <int N>
PENSIEVE_LANES_INLINE __m512i sub_block_sum(const __m512i* q, const std::int8_t* xq, __m512i start,
                                            __m512i scale) {
  __m512i p = start;
  PENSIEVE_LANES_UNROLL
  for (int k = 0; k < N; ++k) p = _mm512_dpbusd_epi32(p, q[k], bcast4(xq + 4 * k));
  return _mm512_mullo_epi32(p, scale);
}

// ---- The register tiles: 16 rows x T tokens, unpacked in registers ----

// Q4_K / Q5_K: the quants 64 values at a time, each group's vectors used by
// every token before the next group is unpacked.
template <int Bytes, int Quants, bool Fifth, int T>
PENSIEVE_AVX512_FN void k4_lane_tile(const std::byte* w, std::size_t row_bytes,
                                     const QuantActRow* x, std::int64_t nb, float* y,
                                     std::int64_t y_stride, unsigned store, const std::byte* pf,
                                     std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 acc[T], accm[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * Bytes;
    const K4Head h = k4_head(wb, offsets);
    __m512i fifth[8];
    if constexpr (Fifth) transpose16(wb + 16, row_bytes, fifth);
    __m512i sum[T];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    auto group = [&]<int G>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i lo[8], hi[8];
      k4_group<Quants, Fifth, G>(wb, row_bytes, fifth, lo, hi);
      const __m512i sa = k4_scale<2 * G>(h), sb = k4_scale<2 * G + 1>(h);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        const std::int8_t* xq = x[t].q + b * 256 + 64 * G;
        sum[t] = _mm512_add_epi32(
            sum[t], _mm512_add_epi32(sub_block_sum<8>(lo, xq, _mm512_setzero_si512(), sa),
                                     sub_block_sum<8>(hi, xq + 32, _mm512_setzero_si512(), sb)));
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
      const std::int16_t* bs = x[t].bsums + b * 16;
      __m512i m = _mm512_setzero_si512();
      PENSIEVE_LANES_UNROLL
      for (int j = 0; j < 8; ++j) m = _mm512_dpwssd_epi32(m, mins2[j], bcast4(bs + 2 * j));
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
// 32 * sum(scale_s * bsum_s) is taken off in int32: here each sub-block's
// sum starts from -32 * bsum_s, before its scale (the same integer, without
// a multiply per sub-block for the bias). The high bits are transposed again
// for each run: kept for both, they pushed the 8-token tile's sums out of
// the registers.
template <int T>
PENSIEVE_AVX512_FN void q6_k_lane_tile(const std::byte* w, std::size_t row_bytes,
                                       const QuantActRow* x, std::int64_t nb, float* y,
                                       std::int64_t y_stride, unsigned store, const std::byte* pf,
                                       std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  __m512 acc[T];
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * 210;
    const Q6Head h = q6_head(wb, offsets);
    __m512i sum[T];
    alignas(64) std::int32_t bias[T][16];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      sum[t] = _mm512_setzero_si512();
      bsum_bias<5>(x[t], b, bias[t]);
    }
    auto run = [&]<int H, int K>() PENSIEVE_AVX512_FN __attribute__((always_inline)) {
      __m512i a[8], c[8];
      q6_run<H, K>(wb, row_bytes, a, c);
      constexpr int s = 8 * H + 2 * K;
      const __m512i sa0 = q6_scale<s>(h), sa1 = q6_scale<s + 1>(h);
      const __m512i sc0 = q6_scale<s + 4>(h), sc1 = q6_scale<s + 5>(h);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        const std::int8_t* xq = x[t].q + b * 256 + 128 * H + 32 * K;
        const std::int32_t* bt = bias[t];
        const __m512i s01 =
            _mm512_add_epi32(sub_block_sum<4>(a, xq, _mm512_set1_epi32(bt[s]), sa0),
                             sub_block_sum<4>(a + 4, xq + 16, _mm512_set1_epi32(bt[s + 1]), sa1));
        const __m512i s23 =
            _mm512_add_epi32(sub_block_sum<4>(c, xq + 64, _mm512_set1_epi32(bt[s + 4]), sc0),
                             sub_block_sum<4>(c + 4, xq + 80, _mm512_set1_epi32(bt[s + 5]), sc1));
        sum[t] = _mm512_add_epi32(sum[t], _mm512_add_epi32(s01, s23));
      }
    };
    run.template operator()<0, 0>();
    run.template operator()<0, 1>();
    run.template operator()<1, 0>();
    run.template operator()<1, 1>();
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, h.d), _mm512_cvtepi32_ps(sum[t]), acc[t]);
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store),
                          _mm512_add_ps(acc[t], _mm512_setzero_ps()));
}

// ---- The panels: more tokens than a tile takes ----
// The 16 rows' blocks are unpacked once into a buffer in lane order (5.6
// KiB a block: 24 KiB for 1024 columns, in the L1 while the token groups
// pass over it), then each group of up to 8 tokens runs from it, as the
// register tiles would, without unpacking the rows again per group.

struct alignas(64) LaneBlock {
  __m512i q[64];      // quant vector k
  __m512i scale[16];  // sub-block scales: Q4_K / Q5_K 8 of 32 quants, Q6_K 16 of 16
  __m512i mins2[8];   // Q4_K / Q5_K: min_j in both i16 halves
  __m512 d, dmin;
};
static_assert(sizeof(LaneBlock) == quant_dot_lane_panel_block_bytes);

template <int Bytes, int Quants, bool Fifth>
PENSIEVE_AVX512_FN void k4_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * Bytes;
    LaneBlock& L = out[b];
    const K4Head h = k4_head(wb, offsets);
    __m512i fifth[8];
    if constexpr (Fifth) transpose16(wb + 16, row_bytes, fifth);
    k4_group<Quants, Fifth, 0>(wb, row_bytes, fifth, L.q, L.q + 8);
    k4_group<Quants, Fifth, 1>(wb, row_bytes, fifth, L.q + 16, L.q + 24);
    k4_group<Quants, Fifth, 2>(wb, row_bytes, fifth, L.q + 32, L.q + 40);
    k4_group<Quants, Fifth, 3>(wb, row_bytes, fifth, L.q + 48, L.q + 56);
    L.scale[0] = k4_scale<0>(h), L.scale[1] = k4_scale<1>(h), L.scale[2] = k4_scale<2>(h);
    L.scale[3] = k4_scale<3>(h), L.scale[4] = k4_scale<4>(h), L.scale[5] = k4_scale<5>(h);
    L.scale[6] = k4_scale<6>(h), L.scale[7] = k4_scale<7>(h);
    L.mins2[0] = k4_min2<0>(h), L.mins2[1] = k4_min2<1>(h), L.mins2[2] = k4_min2<2>(h);
    L.mins2[3] = k4_min2<3>(h), L.mins2[4] = k4_min2<4>(h), L.mins2[5] = k4_min2<5>(h);
    L.mins2[6] = k4_min2<6>(h), L.mins2[7] = k4_min2<7>(h);
    L.d = h.d;
    L.dmin = h.dmin;
  }
}

PENSIEVE_AVX512_FN void q6_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * 210;
    LaneBlock& L = out[b];
    const Q6Head h = q6_head(wb, offsets);
    q6_run<0, 0>(wb, row_bytes, L.q, L.q + 16);
    q6_run<0, 1>(wb, row_bytes, L.q + 8, L.q + 24);
    q6_run<1, 0>(wb, row_bytes, L.q + 32, L.q + 48);
    q6_run<1, 1>(wb, row_bytes, L.q + 40, L.q + 56);
    auto scales = [&]<int... S>(std::integer_sequence<int, S...>)
                      PENSIEVE_AVX512_FN __attribute__((always_inline)) {
                        ((L.scale[S] = q6_scale<S>(h)), ...);
                      };
    scales(std::make_integer_sequence<int, 16>{});
    L.d = h.d;
  }
}

// Q3_K (110 bytes): quant 128n + 32s + l (s < 4) is bits 2s of low-bits
// byte 32 + 32n + l, minus 4 unless bit 4n + s of high-bits byte l is set;
// taken here as 0..7 (the high bit as 4), the 4 taken off by the bias. The
// 16 scales (-32..31) are a nibble of bytes 96-103 (low for sub-blocks < 8)
// and 2 bits of byte 104 + (j & 3); d is the F16 at 108 (the high word at
// 106: a 4-byte gather at 108 would read past the weight's last block).
PENSIEVE_AVX512_FN void q3_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m3 = _mm512_set1_epi8(0x03), m4bit = _mm512_set1_epi8(0x04);
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
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
    L.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather16(wb + 106, offsets), 16)));
  }
}

// Q2_K (84 bytes): quant 128n + 32s + l is bits 2s of byte 16 + 32n + l;
// sub-block j's scale is the low nibble of byte j, its min the high one; d
// and dmin the F16s at 80 and 82.
PENSIEVE_AVX512_FN void q2_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                  LaneBlock* out, const std::byte* pf, std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m3 = _mm512_set1_epi8(0x03);
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
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
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < 4; ++k) sc4[k] = gather16(wb + 4 * k, offsets);
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
      L.mins2[p] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
    }
    const __m512i head = gather16(wb + 80, offsets);
    L.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
    L.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head, 16)));
  }
}

// What a panel's blocks hold, per type: quant vectors per sub-block (8 for
// sub-blocks of 32, 4 for 16), the bias each sub-block's sum starts from
// (-(bsum_s << BiasShift): Q6_K's quants are taken as q + 32, Q3_K's as
// q + 4; 0 for none) and whether the mins are taken off (Q4_K, Q5_K, Q2_K).
struct PanelKind {
  int per, bias_shift;
  bool mins;
};
constexpr PanelKind k4_panel{8, 0, true}, q6_panel{4, 5, false}, q3_panel{4, 2, false},
    q2_panel{4, 0, true};

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
    alignas(64) std::int32_t bias[T][16];
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      sum[t] = _mm512_setzero_si512();
      if constexpr (K.bias_shift > 0) bsum_bias<K.bias_shift>(x[t], b, bias[t]);
    }
    PENSIEVE_LANES_UNROLL
    for (int s = 0; s < subs; ++s) {
      __m512i q[per];
      PENSIEVE_LANES_UNROLL
      for (int k = 0; k < per; ++k) q[k] = _mm512_load_si512(&L.q[s * per + k]);
      const __m512i scale = _mm512_load_si512(&L.scale[s]);
      PENSIEVE_LANES_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m512i start =
            K.bias_shift > 0 ? _mm512_set1_epi32(bias[t][s]) : _mm512_setzero_si512();
        sum[t] = _mm512_add_epi32(
            sum[t], sub_block_sum<per>(q, x[t].q + b * 256 + 4 * per * s, start, scale));
      }
    }
    PENSIEVE_LANES_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(x[t].d[b]);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, L.d), _mm512_cvtepi32_ps(sum[t]), acc[t]);
      if constexpr (K.mins) {
        const std::int16_t* bs = x[t].bsums + b * 16;
        __m512i m = _mm512_setzero_si512();
        PENSIEVE_LANES_UNROLL
        for (int j = 0; j < 8; ++j) m = _mm512_dpwssd_epi32(m, L.mins2[j], bcast4(bs + 2 * j));
        const __m512 mscale = _mm512_xor_ps(_mm512_mul_ps(dx, L.dmin), sign);
        accm[t] = _mm512_fmadd_ps(mscale, _mm512_cvtepi32_ps(m), accm[t]);
      }
    }
  }
  PENSIEVE_LANES_UNROLL
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, __mmask16(store), _mm512_add_ps(acc[t], accm[t]));
}

template <PanelKind K>
PENSIEVE_AVX512_FN void panel_dot_any(int n, const LaneBlock* blocks, const QuantActRow* x,
                                      std::int64_t nb, float* y, std::int64_t y_stride,
                                      unsigned store) {
  switch (n) {
    case 1: return panel_dot<K, 1>(blocks, x, nb, y, y_stride, store);
    case 2: return panel_dot<K, 2>(blocks, x, nb, y, y_stride, store);
    case 3: return panel_dot<K, 3>(blocks, x, nb, y, y_stride, store);
    case 4: return panel_dot<K, 4>(blocks, x, nb, y, y_stride, store);
    case 5: return panel_dot<K, 5>(blocks, x, nb, y, y_stride, store);
    case 6: return panel_dot<K, 6>(blocks, x, nb, y, y_stride, store);
    case 7: return panel_dot<K, 7>(blocks, x, nb, y, y_stride, store);
    case 8: return panel_dot<K, 8>(blocks, x, nb, y, y_stride, store);
    default: assert(false && "quant lane panel: 1 to 8 tokens a group");
  }
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
  constexpr int max = quant_dot_lane_tile_tokens_max;
  const int groups = (n_tokens + max - 1) / max;
  const int base = n_tokens / groups, wider = n_tokens % groups;
  int t = 0;
  for (int g = 0; g < groups; ++g) {
    const int n = base + (g < wider ? 1 : 0);
    panel_dot_any<K>(n, blocks, x + t, nb, y + t * y_stride, y_stride, store);
    t += n;
  }
}

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

// 16 bytes at `at` of the 16 rows as out[k], lane r = dword k of row r:
// per 128-bit lane g, rows 4g..4g+3 interleaved by dwords, then by qwords.
PENSIEVE_LANES_INLINE void transpose16x16(const std::byte* at, std::size_t row_bytes,
                                          __m512i* out) {
  __m512i z[4];
  PENSIEVE_LANES_UNROLL
  for (int i = 0; i < 4; ++i) {
    __m512i v = _mm512_castsi128_si512(load128(at + std::size_t(i) * row_bytes));
    v = _mm512_inserti32x4(v, load128(at + std::size_t(4 + i) * row_bytes), 1);
    v = _mm512_inserti32x4(v, load128(at + std::size_t(8 + i) * row_bytes), 2);
    z[i] = _mm512_inserti32x4(v, load128(at + std::size_t(12 + i) * row_bytes), 3);
  }
  const __m512i a0 = _mm512_unpacklo_epi32(z[0], z[1]), a1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i a2 = _mm512_unpacklo_epi32(z[2], z[3]), a3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(a0, a2);
  out[1] = _mm512_unpackhi_epi64(a0, a2);
  out[2] = _mm512_unpacklo_epi64(a1, a3);
  out[3] = _mm512_unpackhi_epi64(a1, a3);
}

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

template <LegacyKind K>
PENSIEVE_AVX512_FN void legacy_unpack(const std::byte* w, std::size_t row_bytes, std::int64_t nb,
                                      LegacyLaneBlock* out, const std::byte* pf,
                                      std::size_t pf_bytes) {
  const __m512i offsets = lane_offsets(row_bytes);
  const __m512i m4 = _mm512_set1_epi8(0x0f), ones = _mm512_set1_epi8(1);
  const __m512i grid = _mm512_broadcast_i32x4(load128(iq4nl_values));
  for (std::int64_t b = 0; b < nb; ++b) {
    lane_prefetch(pf, pf_bytes, b, nb);
    const std::byte* wb = w + b * K.bytes;
    LegacyLaneBlock& L = out[b];
    __m512i t[4];
    transpose16x16(wb + K.quants, row_bytes, t);
    __m512i fifth = _mm512_setzero_si512();
    if constexpr (K.fifth >= 0) fifth = gather16(wb + K.fifth, offsets);
    __m512i sum = _mm512_setzero_si512();
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < 4; ++k) {
      __m512i lo = _mm512_and_si512(t[k], m4);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi32(t[k], 4), m4);
      if constexpr (K.fifth >= 0) {
        lo = _mm512_or_si512(lo, spread4_to_bit4(_mm512_srli_epi32(fifth, 4 * k)));
        hi = _mm512_or_si512(hi, spread4_to_bit4(_mm512_srli_epi32(fifth, 16 + 4 * k)));
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

template <LegacyKind K>
PENSIEVE_AVX512_FN void legacy_panel(const std::byte* w, std::size_t rb, const QuantActRow* x,
                                     int n_tokens, std::int64_t nb, float* y,
                                     std::int64_t y_stride, unsigned store, void* scratch,
                                     const std::byte* pf, std::size_t pf_bytes) {
  auto* blocks = static_cast<LegacyLaneBlock*>(scratch);
  legacy_unpack<K>(w, rb, nb, blocks, pf, pf_bytes);
  constexpr int max = quant_dot_lane_tile_tokens_max;
  const int groups = (n_tokens + max - 1) / max;
  const int base = n_tokens / groups, wider = n_tokens % groups;
  int t = 0;
  for (int g = 0; g < groups; ++g) {
    const int n = base + (g < wider ? 1 : 0);
    float* yt = y + t * y_stride;
    switch (n) {
      case 1: legacy_panel_dot<K, 1>(blocks, x + t, nb, yt, y_stride, store); break;
      case 2: legacy_panel_dot<K, 2>(blocks, x + t, nb, yt, y_stride, store); break;
      case 3: legacy_panel_dot<K, 3>(blocks, x + t, nb, yt, y_stride, store); break;
      case 4: legacy_panel_dot<K, 4>(blocks, x + t, nb, yt, y_stride, store); break;
      case 5: legacy_panel_dot<K, 5>(blocks, x + t, nb, yt, y_stride, store); break;
      case 6: legacy_panel_dot<K, 6>(blocks, x + t, nb, yt, y_stride, store); break;
      case 7: legacy_panel_dot<K, 7>(blocks, x + t, nb, yt, y_stride, store); break;
      case 8: legacy_panel_dot<K, 8>(blocks, x + t, nb, yt, y_stride, store); break;
      default: assert(false && "quant lane panel: 1 to 8 tokens a group");
    }
    t += n;
  }
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

QuantDotLanePanelFn quant_dot_avx512_lane_panel_fn(DType t) {
  switch (t) {
    case DType::q4_k:
      return lane_panel<k4_panel, k4_unpack<144, 16, false>>;
    case DType::q5_k:
      return lane_panel<k4_panel, k4_unpack<176, 48, true>>;
    case DType::q6_k:
      return lane_panel<q6_panel, q6_unpack>;
    case DType::q3_k:
      return lane_panel<q3_panel, q3_unpack>;
    case DType::q2_k:
      return lane_panel<q2_panel, q2_unpack>;
    case DType::q4_0:
      return legacy_panel<q4_0_kind>;
    case DType::q4_1:
      return legacy_panel<q4_1_kind>;
    case DType::q5_0:
      return legacy_panel<q5_0_kind>;
    case DType::q5_1:
      return legacy_panel<q5_1_kind>;
    case DType::iq4_nl:
      return legacy_panel<iq4_nl_kind>;
    default:
      return nullptr;
  }
}

#else

QuantDotLaneTileFn quant_dot_avx512_lane_tile_fn(DType) {
  return nullptr;
}
QuantDotLanePanelFn quant_dot_avx512_lane_panel_fn(DType) {
  return nullptr;
}

#endif

}  // namespace pensieve::kernels::cpu
