#include "gpu/kernels/cpu/quant_activations.hpp"

#include "gpu/kernels/cpu/q8_activations.hpp"
#include "gpu/formats/half.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pensieve::kernels::cpu {

using model::DType;

ActQuant act_quant_for(DType t) {
  switch (t) {
    case DType::q4_1:
    case DType::q5_1:
      return ActQuant::q8_1;
    case DType::q2_k:
    case DType::q3_k:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::iq4_xs:
      return ActQuant::q8_k;
    case DType::q8_0:
    case DType::q4_0:
    case DType::q5_0:
    case DType::iq4_nl:
      return ActQuant::q8_0;
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      break;
  }
  assert(false && "act_quant_for: not a quantised type");
  return ActQuant::q8_0;
}

namespace {

void quantize_q8_k(const float* x, std::int64_t n, std::int8_t* q, float* d, std::int16_t* bsums) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    std::int8_t* qb = q + b * 256;
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 256; ++i) {
      const float ax = std::fabs(xb[i]);
      if (ax > amax) {
        amax = ax;
        max = xb[i];
      }
    }
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::fill_n(qb, 256, std::int8_t(0));
    } else {
      const float iscale = -127.0f / max;
      // nearbyint rounds ties to even in the default environment, as
      // ggml's nearest_int (the 1.5 * 2^23 trick) does for these magnitudes.
      for (int i = 0; i < 256; ++i)
        qb[i] = std::int8_t(std::min(127.0f, std::nearbyint(iscale * xb[i])));
      d[b] = 1.0f / iscale;
    }
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += qb[16 * j + i];
      bsums[b * 16 + j] = std::int16_t(sum);
    }
  }
}

#if defined(__x86_64__)

// quantize_q8_k's values 16 at a time (the decode step quantises each
// activation row on one thread before the rows are split, so its time is
// serial): the same first element of largest magnitude, the same products
// rounded to nearest even (cvtps = nearbyint, the default MXCSR), the same
// clamp and the same 1 / iscale. Its own target, so it builds with any
// -march and runs only where the CPU has AVX-512 F/BW/DQ/VL.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) void quantize_q8_k_avx512(
    const float* x, std::int64_t n, std::int8_t* q, float* d, std::int16_t* bsums) {
  for (std::int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    std::int8_t* qb = q + b * 256;
    __m512 v[16], m = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) {
      v[i] = _mm512_loadu_ps(xb + 16 * i);
      m = _mm512_max_ps(m, _mm512_abs_ps(v[i]));
    }
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::fill_n(qb, 256, std::int8_t(0));
      std::fill_n(bsums + b * 16, 16, std::int16_t(0));
      continue;
    }
    int first = 0;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 at =
          _mm512_cmp_ps_mask(_mm512_abs_ps(v[i]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (at != 0) {
        first = 16 * i + __builtin_ctz(unsigned(at));
        break;
      }
    }
    const float iscale = -127.0f / xb[first];
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      const __m512i qi =
          _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, v[i])), _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * i), _mm512_cvtepi32_epi8(qi));
      bsums[b * 16 + i] = std::int16_t(_mm512_reduce_add_epi32(qi));
    }
    d[b] = 1.0f / iscale;
  }
}

bool cpu_has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

#endif

}  // namespace

namespace {

// Q8_1's sums of each block (after its Q8_0 quants): s = amax / 127 * sum q, as F16.
void q8_1_sums(const float* x, std::int64_t n, const std::int8_t* q, float* s) {
  for (std::int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(x[b * 32 + i]));
      sum += q[b * 32 + i];
    }
    s[b] = f16_to_f32(f32_to_f16(amax / 127.0f * float(sum)));
  }
}

}  // namespace

void quantize_act_row(ActQuant a, const float* x, std::int64_t n, std::int8_t* q, float* d,
                      float* s, std::int16_t* bsums) {
  assert(n % act_block_values(a) == 0);
  if (a == ActQuant::q8_k) {
#if defined(__x86_64__)
    if (cpu_has_avx512()) return quantize_q8_k_avx512(x, n, q, d, bsums);
#endif
    return quantize_q8_k(x, n, q, d, bsums);
  }
  quantize_row_q8(x, n, q, d);
  if (a == ActQuant::q8_1) q8_1_sums(x, n, q, s);
}

void quantize_act_row_portable(ActQuant a, const float* x, std::int64_t n, std::int8_t* q, float* d,
                               float* s, std::int16_t* bsums) {
  assert(n % act_block_values(a) == 0);
  if (a == ActQuant::q8_k) return quantize_q8_k(x, n, q, d, bsums);
  quantize_row_q8_portable(x, n, q, d);
  if (a == ActQuant::q8_1) q8_1_sums(x, n, q, s);
}

QuantActRow QuantActs::row(std::int64_t t) const {
  const std::int64_t nb = cols / act_block_values(kind);
  return {q + t * cols, d + t * nb, s ? s + t * nb : nullptr,
          bsums ? bsums + t * (cols / 16) : nullptr};
}

QuantActs quantize_act_rows(ActQuant a, const ConstRowsView& x, std::vector<float>& storage) {
  const std::int64_t nb = x.cols / act_block_values(a);
  assert(x.cols % act_block_values(a) == 0);
  const std::int64_t d_floats = x.rows * nb, s_floats = a == ActQuant::q8_1 ? d_floats : 0;
  const std::int64_t bsum_floats = a == ActQuant::q8_k ? (x.rows * (x.cols / 16) + 1) / 2 : 0;
  const std::int64_t q_floats = (x.rows * x.cols + 3) / 4;
  storage.resize(std::size_t(d_floats + s_floats + bsum_floats + q_floats));
  QuantActs out;
  out.kind = a;
  out.rows = x.rows;
  out.cols = x.cols;
  out.d = storage.data();
  out.s = s_floats ? out.d + d_floats : nullptr;
  // int8_t is a character type and may live in float storage; the int16
  // sums are only ever accessed as int16 there.
  out.bsums = bsum_floats ? reinterpret_cast<std::int16_t*>(out.d + d_floats + s_floats) : nullptr;
  out.q = reinterpret_cast<std::int8_t*>(out.d + d_floats + s_floats + bsum_floats);
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const QuantActRow r = out.row(t);
    quantize_act_row(a, x.row(t), x.cols, const_cast<std::int8_t*>(r.q), const_cast<float*>(r.d),
                     const_cast<float*>(r.s), const_cast<std::int16_t*>(r.bsums));
  }
  return out;
}

}  // namespace pensieve::kernels::cpu
