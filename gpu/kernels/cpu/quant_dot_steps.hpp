#pragma once
// The F32 steps of quant_dot.hpp's definition, shared by the scalar
// reference and the vectorised kernels so both round alike. Explicit fma:
// the result must not depend on whether the compiler contracts a * b + c.
#include "gpu/kernels/cpu/quant_blocks.hpp"

#include <cmath>
#include <cstdint>

namespace pensieve::kernels::cpu::quant_steps {

struct Acc {
  float acc = 0.0f, accm = 0.0f;
  float result() const { return acc + accm; }
};

inline void block(Acc& a, float scale, std::int32_t isum) {
  a.acc = std::fma(scale, float(isum), a.acc);
}
// block() with isum already converted to F32 (a vector conversion rounds
// as float(isum) does), for kernels that convert eight sums at once.
inline void block_of_float(Acc& a, float scale, float isum) {
  a.acc = std::fma(scale, isum, a.acc);
}
inline void mins(Acc& a, float scale, float value) {
  a.accm = std::fma(scale, value, a.accm);
}

// Q4_K/Q5_K: sum over the 8 sub-blocks of min_j * (bsums of its two 16s).
inline std::int32_t k4_mins(const std::uint8_t* scales, const std::int16_t* bsums) {
  std::int32_t s = 0;
  for (int j = 0; j < 8; ++j) s += k_scale_min(scales, j).min * (bsums[2 * j] + bsums[2 * j + 1]);
  return s;
}

// Q2_K: sum over the 16 sub-blocks of min_j * bsum_j.
inline std::int32_t q2_k_mins(const std::uint8_t* scales, const std::int16_t* bsums) {
  std::int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += (scales[j] >> 4) * bsums[j];
  return s;
}

}  // namespace pensieve::kernels::cpu::quant_steps
