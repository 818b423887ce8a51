#pragma once
// ggml's quantised block layouts (ggml-common.h), as byte offsets into one
// block, and the small decoders that the dequantisers (dequant_blocks.cpp)
// and the dot products (quant_dot.cpp) share, so both read a block the same
// way. Every multi-byte field is little-endian, read with memcpy (blocks
// are not aligned inside a row).
//
// Legacy blocks of 32 (element j < 16 in the low nibble of byte j, j + 16 in
// its high nibble):
//   Q4_0   18 B: f16 d, 16 B nibbles                 x = d * (q - 8)
//   Q4_1   20 B: f16 d, f16 m, 16 B nibbles          x = d * q + m
//   Q5_0   22 B: f16 d, u32 qh, 16 B nibbles         x = d * (q | h << 4) - 16 d
//   Q5_1   24 B: f16 d, f16 m, u32 qh, 16 B nibbles  x = d * (q | h << 4) + m
//   IQ4_NL 18 B: f16 d, 16 B nibbles                 x = d * iq4nl_values[q]
//   (qh bit j is element j's fifth bit.)
// K-quants, blocks of 256:
//   Q2_K  84 B: 16 B scales (low nibble scale, high nibble min of each
//         sub-block of 16), 64 B quants, f16 d, f16 dmin
//   Q3_K 110 B: 32 B high-bit mask, 64 B low 2 bits, 12 B packed 6-bit
//         scales, f16 d
//   Q4_K 144 B: f16 d, f16 dmin, 12 B packed 6-bit scales/mins, 128 B nibbles
//   Q5_K 176 B: f16 d, f16 dmin, 12 B scales/mins, 32 B fifth bits, 128 B nibbles
//   Q6_K 210 B: 128 B low 4 bits, 64 B high 2 bits, 16 int8 scales, f16 d
//   IQ4_XS 136 B: f16 d, u16 scales_h, 4 B scales_l, 128 B nibbles: sub-block
//         j of 32 (its element l < 16 in the low nibble of byte 16 j + l, l + 16
//         in the high one) is d * (s_j - 32) * iq4nl_values[q], s_j 6 bits
#include "gpu/formats/half.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pensieve::kernels::cpu {

inline float block_f16(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline std::uint32_t block_u32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline const std::uint8_t* block_bytes(const std::byte* p) {
  return reinterpret_cast<const std::uint8_t*>(p);
}

// IQ4_NL's non-linear 4-bit grid (ggml's kvalues_iq4nl).
inline constexpr std::int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_XS sub-block j's (0..7) scale, -32..31: the low 4 bits a nibble of
// scales_l, the high 2 a pair of bits of scales_h.
inline int iq4_xs_scale(const std::byte* blk, int j) {
  const int low = (block_bytes(blk + 4)[j >> 1] >> (4 * (j & 1))) & 0xf;
  const int high =
      int((unsigned(block_bytes(blk + 2)[0]) | unsigned(block_bytes(blk + 2)[1]) << 8) >> (2 * j)) &
      3;
  return (low | (high << 4)) - 32;
}

// IQ4_XS element i's (0..255) grid value.
inline int iq4_xs_value(const std::byte* blk, int i) {
  const int j = i >> 5, l = i & 31;
  const std::uint8_t q = block_bytes(blk + 8)[16 * j + (l & 15)];
  return iq4nl_values[(l < 16 ? q : q >> 4) & 0xf];
}

// Q3_K sub-block j's (0..15) scale, -32..31: the low 4 bits are a nibble of
// the first 8 bytes, the high 2 bits a pair of bits of the last 4.
inline int q3_k_scale(const std::uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xf : scales[j - 8] >> 4;
  const int high = (scales[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

// Q4_K/Q5_K sub-block j's (0..7) 6-bit scale and min (ggml's get_scale_min_k4).
struct KScaleMin {
  int scale, min;
};
inline KScaleMin k_scale_min(const std::uint8_t* scales, int j) {
  if (j < 4) return {scales[j] & 63, scales[j + 4] & 63};
  return {(scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4),
          (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)};
}

// The quant of element i (0..255) of a K-quant block, as an integer. Q2_K,
// Q3_K and Q6_K scale element i with sub-block scale i / 16, Q4_K and Q5_K
// with i / 32.
inline int q2_k_quant(const std::byte* blk, int i) {
  const int n = i >> 7, s = (i >> 5) & 3, l = i & 31;
  return (block_bytes(blk + 16)[n * 32 + l] >> (2 * s)) & 3;
}

inline int q3_k_quant(const std::byte* blk, int i) {
  const int n = i >> 7, s = (i >> 5) & 3, l = i & 31;
  const int low = (block_bytes(blk + 32)[n * 32 + l] >> (2 * s)) & 3;
  const bool high = (block_bytes(blk)[l] >> (4 * n + s)) & 1;
  return low - (high ? 0 : 4);
}

inline int q4_k_quant(const std::byte* blk, int i) {
  const int j = i >> 5, l = i & 31;
  return (block_bytes(blk + 16)[32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xf;
}

inline int q5_k_quant(const std::byte* blk, int i) {
  const int j = i >> 5, l = i & 31;
  const int low = (block_bytes(blk + 48)[32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xf;
  return low | (((block_bytes(blk + 16)[l] >> j) & 1) << 4);
}

// Element i = 128 n + 32 k + l (k, l < 4, 32) as ggml's dequantize_row_q6_K
// lays it out: nibble k >> 1 of ql[64 n + 32 (k & 1) + l], bits 2k of
// qh[32 n + l]; -32..31.
inline int q6_k_quant(const std::byte* blk, int i) {
  const int n = i >> 7, k = (i >> 5) & 3, l = i & 31;
  const int low = (block_bytes(blk)[64 * n + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xf;
  const int high = (block_bytes(blk + 128)[32 * n + l] >> (2 * k)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace pensieve::kernels::cpu
