#pragma once
// FP8 E4M3 (the OCP "E4M3FN" of NVIDIA's __nv_fp8_e4m3): 1 sign, 4 exponent
// (bias 7), 3 mantissa bits; no infinities; 0x7F / 0xFF are NaN; the largest
// finite value is 448. The FP8 KV cache stores K and V as E4M3 codes with one
// F32 scale per (block, head) row: code = e4m3(x / scale), scale = amax / 448,
// so the row's largest value lands on the largest code and nothing saturates.
// Encoding rounds to nearest, ties to even, and saturates to +-448 (the
// cuda_fp8.h conversion with __NV_SATFINITE), so the CPU reference and a CUDA
// kernel built from these functions give the same codes.
//
// Header-only and constexpr-friendly; usable from CUDA device code
// (PENSIEVE_HD marks the functions __host__ __device__ there).
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PENSIEVE_HD __host__ __device__
#else
#define PENSIEVE_HD
#endif

namespace pensieve::kv {

inline constexpr float kFp8E4m3Max = 448.0f;

// The value of an E4M3 code.
PENSIEVE_HD inline float fp8_e4m3_to_float(std::uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const int exponent = (code >> 3) & 0x0F;
  const int mantissa = code & 0x07;
  float v;
  if (exponent == 0x0F && mantissa == 0x07) {
    v = NAN;
  } else if (exponent == 0) {
    v = std::ldexp(float(mantissa) / 8.0f, -6);  // subnormal: 0.m x 2^-6
  } else {
    v = std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
  }
  return negative ? -v : v;
}

// The nearest E4M3 code (ties to even), saturated to +-448; NaN -> 0x7F.
PENSIEVE_HD inline std::uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float a = std::fabs(x);
  if (a >= kFp8E4m3Max) return std::uint8_t(sign | 0x7E);  // 448 (and what lies beyond)
  // Quantum of a's binade: 2^(e-3) for normals (e >= -6), 2^-9 for subnormals.
  int e = 0;
  (void)std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): a's binade is 2^(e-1)
  const int binade = e - 1 < -6 ? -6 : e - 1;
  const float quantum = std::ldexp(1.0f, binade - 3);
  // a / quantum is exact (a power-of-two division); rint rounds ties to even.
  const float steps = std::rint(a / quantum);
  a = steps * quantum;  // may carry into the next binade: still exact, still <= 448
  if (a == 0.0f) return sign;
  (void)std::frexp(a, &e);
  const int exponent = e - 1;
  if (exponent < -6) {  // subnormal code
    return std::uint8_t(sign | std::uint8_t(std::lrint(a / std::ldexp(1.0f, -9))));
  }
  const int mantissa = int(std::lrint((a / std::ldexp(1.0f, exponent) - 1.0f) * 8.0f));
  return std::uint8_t(sign | std::uint8_t((exponent + 7) << 3) | std::uint8_t(mantissa));
}

// The scale of a row whose largest magnitude is `amax`: amax / 448, or 1 for
// an all-zero row (any scale encodes zeros; 1 keeps the decode exact).
PENSIEVE_HD inline float fp8_e4m3_scale(float amax) { return amax > 0.0f ? amax / kFp8E4m3Max : 1.0f; }

}  // namespace pensieve::kv
