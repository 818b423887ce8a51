#pragma once
// The helpers of the lane kernels on AVX-512 VNNI (internal to
// gpu/kernels/cpu: quant_lane_tiles_avx512.cpp, quant_lane_panels_avx512.cpp,
// quant_legacy_panels_avx512.cpp): 16 weight rows, each in one 32-bit lane of
// every vector. A run of bytes is read for the 16 rows and transposed in
// registers (lane r = dword j of row r), so vpdpbusd with 4 activation bytes
// broadcast adds 4 products of each row into its own lane and nothing is
// reduced afterwards; the K-quants' blocks unpack into such vectors here.
// Every function carries the AVX-512 target attribute (see
// quant_avx512_common.hpp) and is always inlined: the kernels keep these
// vectors in registers only while their indices are constants.
#include "gpu/kernels/cpu/prefetch.hpp"
#include "gpu/kernels/cpu/quant_activations.hpp"
#include "gpu/kernels/cpu/quant_avx512_common.hpp"
#include "gpu/kernels/cpu/quant_dot.hpp"
#include "gpu/kernels/cpu/vnni_broadcast.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(PENSIEVE_QUANT_AVX512)

namespace pensieve::kernels::cpu::quant_lanes {

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
PENSIEVE_LANES_INLINE void transpose16(const std::byte* at, std::size_t row_bytes, __m512i* out) {
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

// The 16 bytes at `at` of the 16 rows as out[k], lane r = dword k of row r:
// 128-bit lane g of z[i] holds row 4g + i, so interleaving the z by dwords,
// then by qwords, leaves lane g of out[k] with dword k of rows 4g..4g+3. 16
// loads, 12 inserts and 8 shuffles: cheaper than four gathers (the K-quant
// heads; a gather of 16 dwords is a load per lane).
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

// The prefetches of a tile's blocks: each block its share of [pf, pf +
// pf_bytes) (BlockShares), into the level P (the next tile's 16 rows, 10
// KiB at 768 Q6_K columns): the block reads 16 rows at once, more streams
// than the caches' own prefetchers follow. Which level and bursts are
// fastest depends on the core (cpu_tuning.hpp): on AMD Zen 5 the L1 a block
// at a time (from DRAM, 8 tokens, one thread: Q6_K 108 against 119-133 us
// into the L2, Q5_K 75 against 86, BM_KQuantBatch, 2026-12-06), on AMD Zen
// 4 the L1 a quant group at a time (the same 8 tokens 2.1x as fast as a
// block's share at once, 2026-12-07). A kernel calls block() at each
// block's start and, if it has quant groups (the lane tiles), group() at
// each of a block's lane_groups; P says which of the two issue the lines.
// A kernel without groups (the panels) takes l1_by_group as l1.
constexpr int lane_groups = 4;
template <PrefetchInto P>
class LanePrefetch {
 public:
  PENSIEVE_LANES_INLINE LanePrefetch(const std::byte* pf, std::size_t pf_bytes, std::int64_t nb)
      : steps_(pf, pf_bytes, by_group ? lane_groups * nb : nb) {}
  // A block's start: its share, unless issued by groups.
  PENSIEVE_LANES_INLINE void block() {
    if constexpr (!by_group) steps_.step();
  }
  // One of a block's lane_groups groups: a quarter of the block's share.
  PENSIEVE_LANES_INLINE void group() {
    if constexpr (by_group) steps_.step();
  }

 private:
  static constexpr bool by_group = P == PrefetchInto::l1_by_group;
  StepPrefetch<P> steps_;
};

PENSIEVE_LANES_INLINE __m512i lane_offsets(std::size_t row_bytes) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
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
PENSIEVE_LANES_INLINE K4Head k4_head(const std::byte* wb, std::size_t row_bytes) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi8(0x3f);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  __m512i t[4];
  transpose16x16(wb, row_bytes, t);
  const __m512i head = t[0], s0 = t[1], s1 = t[2], s2 = t[3];
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

// IQ4_XS (136 bytes): d (the F16 at 0) with scales_h above it, and the
// scales_l dword at 4, per lane. Sub-block S's scale (-32..31) is nibble S
// of scales_l with bits 2S of scales_h above it.
struct Iq4XsHead {
  __m512i low, high;
  __m512 d;
};
PENSIEVE_LANES_INLINE Iq4XsHead iq4_xs_head(const std::byte* wb, __m512i offsets) {
  const __m512i head = gather16(wb, offsets);
  return {gather16(wb + 4, offsets), _mm512_srli_epi32(head, 16),
          _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head))};
}
PENSIEVE_LANES_INLINE __m512i iq4_xs_scale(const Iq4XsHead& h, int s) {
  const __m512i lo4 = _mm512_and_si512(_mm512_srli_epi32(h.low, 4 * s), _mm512_set1_epi32(0xf));
  const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi32(h.high, 2 * s), _mm512_set1_epi32(3));
  return _mm512_sub_epi32(_mm512_or_si512(lo4, _mm512_slli_epi32(hi2, 4)), _mm512_set1_epi32(32));
}
// A transposed dword of nibbles (lane r: 4 bytes of row r) as its low
// nibbles' and its high nibbles' grid values + 128 (grid: iq4nl_grid_plus128
// in every 128-bit lane).
PENSIEVE_LANES_INLINE void iq4_values(__m512i v, __m512i grid, __m512i& lo, __m512i& hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  lo = _mm512_shuffle_epi8(grid, _mm512_and_si512(v, m4));
  hi = _mm512_shuffle_epi8(grid, _mm512_and_si512(_mm512_srli_epi32(v, 4), m4));
}

// Q6_K (210 bytes): the 16 signed scale bytes at 192 as 4 dwords a lane,
// and d (the F16 at 208, the high word at 206: a 4-byte gather at 208 would
// read past the weight's last block).
struct Q6Head {
  __m512i sc[4];
  __m512 d;
};
PENSIEVE_LANES_INLINE Q6Head q6_head(const std::byte* wb, std::size_t row_bytes, __m512i offsets) {
  Q6Head h;
  transpose16x16(wb + 192, row_bytes, h.sc);
  h.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(gather16(wb + 206, offsets), 16)));
  return h;
}
template <int S>
PENSIEVE_LANES_INLINE __m512i q6_scale(const Q6Head& h) {
  return byte_s<S % 4>(h.sc[S / 4]);
}

// Sum over j < 8 of the word pairs pairs[j] (sub-blocks 2j and 2j + 1 of
// each lane's row) times the bsums 2j and 2j + 1 of one token's block at bs:
// the K-quants' mins and the Q6_K / Q3_K bias, one vpdpwssd a pair.
PENSIEVE_LANES_INLINE __m512i bsum_pairs_dot(const __m512i* pairs, const std::int16_t* bs) {
  __m512i m = _mm512_setzero_si512();
  PENSIEVE_LANES_UNROLL
  for (int j = 0; j < 8; ++j) m = dpwssd_bcast(m, pairs[j], bs + 2 * j);
  return m;
}

// The 16 scales as word pairs for bsum_pairs_dot: p[j] lanes = (s_2j,
// s_2j+1), sign-extended. A byte shuffle puts each dword's bytes in the
// order 0, 2, 1, 3, so its even bytes are s_4k, s_4k+1 and its odd ones
// s_4k+2, s_4k+3.
struct Q6ScalePairs {
  __m512i p[8];
};
PENSIEVE_LANES_INLINE Q6ScalePairs q6_scale_pairs(const Q6Head& h) {
  const __m512i per_lane =
      _mm512_set_epi32(0x0f0d0e0c, 0x0b090a08, 0x07050604, 0x03010200, 0x0f0d0e0c, 0x0b090a08,
                       0x07050604, 0x03010200, 0x0f0d0e0c, 0x0b090a08, 0x07050604, 0x03010200,
                       0x0f0d0e0c, 0x0b090a08, 0x07050604, 0x03010200);
  Q6ScalePairs out;
  PENSIEVE_LANES_UNROLL
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_shuffle_epi8(h.sc[k], per_lane);
    out.p[2 * k] = _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8);
    out.p[2 * k + 1] = _mm512_srai_epi16(v, 8);
  }
  return out;
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

// One token's sum over the N quant vectors q of one sub-block (activation
// bytes at xq), from `start`, times the sub-block's scales. A 32-value
// sub-block (N = 8: Q4_K, Q5_K) sums in two chains of 4 added at the end:
// the same integers, half the chain's vpdpbusd latencies. One thread on AMD
// Zen 5 (BM_KQuantBatch, 2048 x 768, 2026-12-06): panels at 16 tokens Q4_K
// and Q5_K 1.10x, at 64 tokens 1.11-1.14x; the 8-token tiles and Q6_K's
// 16-value sub-blocks (N = 4, where two chains of 2 were 5% slower) as
// before.
template <int N>
PENSIEVE_LANES_INLINE __m512i sub_block_sum(const __m512i* q, const std::int8_t* xq, __m512i start,
                                            __m512i scale) {
  if constexpr (N >= 8) {
    __m512i p0 = start, p1 = _mm512_setzero_si512();
    PENSIEVE_LANES_UNROLL
    for (int k = 0; k < N; k += 2) {
      p0 = dpbusd_bcast(p0, q[k], xq + 4 * k);
      p1 = dpbusd_bcast(p1, q[k + 1], xq + 4 * (k + 1));
    }
    return _mm512_mullo_epi32(_mm512_add_epi32(p0, p1), scale);
  }
  __m512i p = start;
  PENSIEVE_LANES_UNROLL
  for (int k = 0; k < N; ++k) p = dpbusd_bcast(p, q[k], xq + 4 * k);
  return _mm512_mullo_epi32(p, scale);
}

// v taken as it stands at this point, in a register; the tiles and panels
// settle each token's sum after adding a sub-block's. Without it GCC 12
// reassociates a block's integer adds and sinks every sub-block's vpmulld
// to the end of the block: the 8-token Q6_K tile kept its 128 unscaled
// sub-block sums on the stack until then (a store and a reload each), the
// 8-token Q6_K panel 122. Settled, one thread on AMD Zen 5 (BM_KQuantBatch,
// 2048 x 768, 2026-12-06): 8 tokens through the Q6_K tile 1.15-1.20x as
// fast, Q4_K 1.07x; 16 and 64 tokens through the panels Q6_K and Q3_K
// 1.30x, Q2_K 1.38x, Q4_K 1.10-1.18x.
PENSIEVE_LANES_INLINE void settle(__m512i& v) {
  asm("" : "+v"(v));
}

// Runs run(first, count) over n_tokens in near-equal groups of up to
// quant_dot_lane_tile_tokens_max (9 tokens as 5 + 4: a group of one would
// pay a whole pass over the panel for one token).
template <class Run>
inline void for_token_groups(int n_tokens, const Run& run) {
  constexpr int max = quant_dot_lane_tile_tokens_max;
  const int groups = (n_tokens + max - 1) / max;
  const int base = n_tokens / groups, wider = n_tokens % groups;
  int t = 0;
  for (int g = 0; g < groups; ++g) {
    const int n = base + (g < wider ? 1 : 0);
    run(t, n);
    t += n;
  }
}

}  // namespace pensieve::kernels::cpu::quant_lanes

#endif
