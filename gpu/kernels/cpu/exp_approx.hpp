#pragma once
// exp() as the CPU kernels compute it: Cephes' expf (2^k * a degree-6
// polynomial on |r| <= ln2 / 2, ~1 ulp) in a scalar and a 16-lane form that
// give the same bits, with explicit fma so no call site's contraction choices
// change them. For x below -87 both return exp(-87) (a float's range ends
// there); callers pass x <= 0 or clamp. Used by gpu/kernels/cpu and the
// sampler's vocabulary passes (gpu/model/sampler_math.cpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pensieve::kernels::cpu {

namespace exp_approx_detail {

constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

}  // namespace exp_approx_detail

inline float exp_one(float x) {
  using namespace exp_approx_detail;
  const float v = std::max(x, -87.0f);
  const float k = std::floor(std::fma(v, kLog2e, 0.5f));
  float r = std::fma(k, -kLn2Hi, v);
  r = std::fma(k, -kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  p = std::fma(p, r * r, r + 1.0f);
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(k) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

#if defined(__AVX512F__)
inline __m512 exp16(__m512 x) {
  using namespace exp_approx_detail;
  const __m512 v = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 k =
      _mm512_roundscale_ps(_mm512_fmadd_ps(v, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f)),
                           _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-kLn2Hi), v);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}
#endif

}  // namespace pensieve::kernels::cpu
