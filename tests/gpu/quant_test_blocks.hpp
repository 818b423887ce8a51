#pragma once
// Random quantised weight rows for the kernel tests: random bytes with every
// F16 scale field set to a finite, moderate value (random bytes there would
// give NaN and infinite scales).
#include "gpu/formats/tensor.hpp"
#include "gpu/formats/half.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace pensieve::testing {

// ggml's get_scale_min_k4 (scale and min j of a Q4_K / Q5_K block's 12
// packed bytes), written out again from its definition.
inline void reference_scale_min(int j, const std::uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// Byte offsets of a block's F16 fields (scale first, then min where there is one), written
// out here apart from gpu/formats' quant_block_f16_fields so the tests check those offsets.
inline std::vector<std::size_t> f16_fields(model::DType t) {
  using model::DType;
  switch (t) {
    case DType::q4_1:
    case DType::q5_1:
    case DType::q4_k:
    case DType::q5_k:
      return {0, 2};
    case DType::q2_k:
      return {80, 82};
    case DType::q3_k:
      return {108};
    case DType::q6_k:
      return {208};
    default:
      return {0};
  }
}

inline std::vector<std::byte> random_blocks(model::DType t, std::int64_t n_blocks,
                                            std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::size_t bb = model::dtype_block_bytes(t);
  std::vector<std::byte> bytes(std::size_t(n_blocks) * bb);
  for (auto& b : bytes) b = std::byte(rng() & 0xff);
  for (std::int64_t b = 0; b < n_blocks; ++b) {
    for (std::size_t off : f16_fields(t)) {
      const float v =
          (0.001f + 0.01f * float(rng() % 1000) / 1000.0f) * ((rng() & 1) ? 1.0f : -1.0f);
      const std::uint16_t h = f32_to_f16(v);
      std::memcpy(bytes.data() + std::size_t(b) * bb + off, &h, 2);
    }
  }
  return bytes;
}

// ggml's kvalues_iq4nl (IQ4_NL's and IQ4_XS's grid), written out here apart
// from gpu/kernels' iq4nl_values so the tests check that table.
inline constexpr int iq4nl_grid_reference[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// `rows` x `cols` floats as IQ4_XS blocks by a plain rounding (not
// llama-quantize's search): per block d = amax / (127 * 31), per sub-block of
// 32 the scale nearest amax_j / (127 d) in [1, 31], each value the nearest
// grid point of d * scale * grid.
inline std::vector<std::byte> iq4_xs_blocks_of(const float* w, std::int64_t rows,
                                               std::int64_t cols) {
  const auto& grid = iq4nl_grid_reference;
  const std::int64_t nb = rows * cols / 256;
  std::vector<std::byte> out(std::size_t(nb) * 136);
  for (std::int64_t b = 0; b < nb; ++b) {
    const float* x = w + b * 256;
    std::uint8_t* o = reinterpret_cast<std::uint8_t*>(out.data()) + b * 136;
    float amax = 0;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[i]));
    const std::uint16_t dh = f32_to_f16(amax / (127.0f * 31.0f));
    std::memcpy(o, &dh, 2);
    const float d = f16_to_f32(dh);
    std::uint16_t scales_h = 0;
    for (int j = 0; j < 8; ++j) {
      float sub_max = 0;
      for (int l = 0; l < 32; ++l) sub_max = std::max(sub_max, std::fabs(x[32 * j + l]));
      const int s = d > 0 ? std::clamp(int(std::lround(sub_max / (127.0f * d))), 1, 31) : 1;
      const int ls = s + 32;
      o[4 + j / 2] |= std::uint8_t((ls & 0xf) << (4 * (j % 2)));
      scales_h |= std::uint16_t((ls >> 4) << (2 * j));
      for (int l = 0; l < 32; ++l) {
        int best = 0;
        for (int k = 1; k < 16; ++k)
          if (std::fabs(x[32 * j + l] - d * float(s * grid[k])) <
              std::fabs(x[32 * j + l] - d * float(s * grid[best])))
            best = k;
        o[8 + 16 * j + (l & 15)] |= std::uint8_t(best << (l < 16 ? 0 : 4));
      }
    }
    std::memcpy(o + 2, &scales_h, 2);
  }
  return out;
}

inline std::vector<float> random_floats(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

inline constexpr model::DType quantised_dtypes[] = {
    model::DType::q8_0, model::DType::q4_0,   model::DType::q4_1, model::DType::q5_0,
    model::DType::q5_1, model::DType::iq4_nl, model::DType::q2_k, model::DType::q3_k,
    model::DType::q4_k, model::DType::q5_k,   model::DType::q6_k, model::DType::iq4_xs,
};

}  // namespace pensieve::testing
