#include "gpu/model/sampler_math.hpp"

#include "gpu/kernels/cpu/exp_approx.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pensieve::model::sampler_math {

namespace {

constexpr float minus_infinity = -std::numeric_limits<float>::infinity();

// One block's sum, in float: the AVX-512 tree, or in order without it.
double block_sum(const float* p, std::size_t n) {
#if defined(__AVX512F__)
  if (n == block_floats) return double(_mm512_reduce_add_ps(_mm512_loadu_ps(p)));
#endif
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return double(s);
}

}  // namespace

float max_value(std::span<const float> x) {
  std::size_t i = 0;
  float m = minus_infinity;
#if defined(__AVX512F__)
  __m512 acc = _mm512_set1_ps(minus_infinity);
  // max(v, acc) returns acc when v is NaN.
  for (; i + block_floats <= x.size(); i += block_floats) acc = _mm512_max_ps(_mm512_loadu_ps(&x[i]), acc);
  m = _mm512_reduce_max_ps(acc);
#endif
  for (; i < x.size(); ++i)
    if (x[i] > m) m = x[i];
  return m;
}

std::int32_t argmax(std::span<const float> x) {
  assert(!x.empty());
  const float m = max_value(x);
  std::size_t i = 0;
#if defined(__AVX512F__)
  const __m512 mv = _mm512_set1_ps(m);
  for (; i + block_floats <= x.size(); i += block_floats) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(&x[i]), mv, _CMP_EQ_OQ);
    if (hit) return std::int32_t(i + std::size_t(std::countr_zero(unsigned(hit))));
  }
#endif
  for (; i < x.size(); ++i)
    if (x[i] == m) return std::int32_t(i);
  return 0;  // every value NaN
}

void divide(std::span<float> x, float divisor) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  const __m512 d = _mm512_set1_ps(divisor);
  for (; i + block_floats <= x.size(); i += block_floats)
    _mm512_storeu_ps(&x[i], _mm512_div_ps(_mm512_loadu_ps(&x[i]), d));
#endif
  for (; i < x.size(); ++i) x[i] /= divisor;
}

void exp_weights(std::span<const float> x, float max, std::span<float> w) {
  assert(w.size() == x.size());
  std::size_t i = 0;
#if defined(__AVX512F__)
  const __m512 mv = _mm512_set1_ps(max), none = _mm512_set1_ps(minus_infinity);
  for (; i + block_floats <= x.size(); i += block_floats) {
    const __m512 v = _mm512_loadu_ps(&x[i]);
    const __mmask16 finite = _mm512_cmp_ps_mask(v, none, _CMP_NEQ_OQ);
    _mm512_storeu_ps(&w[i], _mm512_maskz_mov_ps(finite, kernels::cpu::exp16(_mm512_sub_ps(v, mv))));
  }
#endif
  for (; i < x.size(); ++i) w[i] = x[i] == minus_infinity || std::isnan(x[i]) ? 0.0f : kernels::cpu::exp_one(x[i] - max);
}

void zero_below(std::span<float> w, float floor) {
  for (float& v : w)
    if (v < floor) v = 0.0f;
}

double sum(std::span<const float> w) {
  double total = 0.0;
  for (std::size_t i = 0; i < w.size(); i += block_floats)
    total += block_sum(&w[i], std::min(block_floats, w.size() - i));
  return total;
}

std::int32_t draw(std::span<const float> w, double target) {
  double cumulative = 0.0;
  for (std::size_t i = 0; i < w.size(); i += block_floats) {
    const std::size_t n = std::min(block_floats, w.size() - i);
    const double s = block_sum(&w[i], n);
    if (target < cumulative + s) {
      // Within the block, element by element; rounding may leave the target
      // past the block's last weight, and the walk then goes on.
      double c = cumulative;
      for (std::size_t j = i; j < i + n; ++j) {
        if (w[j] == 0.0f) continue;
        c += w[j];
        if (target < c) return std::int32_t(j);
      }
    }
    cumulative += s;
  }
  for (std::size_t j = w.size(); j-- > 0;)  // rounding at the very end
    if (w[j] > 0.0f) return std::int32_t(j);
  assert(false && "no positive weight to draw");
  return 0;
}

std::size_t count_at_least(std::span<const float> x, float t) {
  std::size_t n = 0, i = 0;
#if defined(__AVX512F__)
  const __m512 tv = _mm512_set1_ps(t);
  for (; i + block_floats <= x.size(); i += block_floats)
    n += std::size_t(std::popcount(unsigned(_mm512_cmp_ps_mask(_mm512_loadu_ps(&x[i]), tv, _CMP_GE_OQ))));
#endif
  for (; i < x.size(); ++i) n += x[i] >= t ? 1 : 0;
  return n;
}

double mass_at_least(std::span<const float> x, std::span<const float> w, float t) {
  assert(w.size() == x.size());
  double total = 0.0;
  std::size_t i = 0;
#if defined(__AVX512F__)
  const __m512 tv = _mm512_set1_ps(t);
  for (; i + block_floats <= x.size(); i += block_floats) {
    const __mmask16 keep = _mm512_cmp_ps_mask(_mm512_loadu_ps(&x[i]), tv, _CMP_GE_OQ);
    total += double(_mm512_reduce_add_ps(_mm512_maskz_loadu_ps(keep, &w[i])));
  }
#endif
  float tail = 0.0f;
  for (; i < x.size(); ++i)
    if (x[i] >= t) tail += w[i];
  return total + double(tail);
}

double log_sum_exp(std::span<const float> x) {
  const float m = max_value(x);
  if (m == minus_infinity) return double(minus_infinity);
  double total = 0.0;
  std::size_t i = 0;
#if defined(__AVX512F__)
  // Lanes summed in double as they come: 32k-152k terms, no float chain.
  const __m512 mv = _mm512_set1_ps(m), none = _mm512_set1_ps(minus_infinity);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (; i + block_floats <= x.size(); i += block_floats) {
    const __m512 v = _mm512_loadu_ps(&x[i]);
    const __mmask16 finite = _mm512_cmp_ps_mask(v, none, _CMP_NEQ_OQ);
    const __m512 e = _mm512_maskz_mov_ps(finite, kernels::cpu::exp16(_mm512_sub_ps(v, mv)));
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  total = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
#endif
  for (; i < x.size(); ++i)
    if (x[i] != minus_infinity && !std::isnan(x[i])) total += double(kernels::cpu::exp_one(x[i] - m));
  return double(m) + std::log(total);
}

float weight_of(float x, float max) { return kernels::cpu::exp_one(x - max); }

void indices_at_least(std::span<const float> x, float t, std::vector<std::int32_t>& out) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  const __m512 tv = _mm512_set1_ps(t);
  for (; i + block_floats <= x.size(); i += block_floats) {
    for (unsigned hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(&x[i]), tv, _CMP_GE_OQ); hit != 0; hit &= hit - 1)
      out.push_back(std::int32_t(i + std::size_t(std::countr_zero(hit))));
  }
#endif
  for (; i < x.size(); ++i)
    if (x[i] >= t) out.push_back(std::int32_t(i));
}

}  // namespace pensieve::model::sampler_math
