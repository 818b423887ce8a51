#include "gpu/kernels/cpu/q8_activations.hpp"

#include "gpu/formats/half.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#define PENSIEVE_Q8_QUANT_AVX512 1
#endif

namespace pensieve::kernels::cpu {

namespace {

// The scale of a block and the factor its values are multiplied by, exactly
// as both quantisers (and ggml's quantize_row_q8_0) use them: d rounded to
// F16, the factor 127 / amax in F32. A block past F16's range (amax > 8.3e6,
// where ggml's d would be infinite) keeps its F32 d.
struct BlockScale {
  float d, inv;
};

BlockScale block_scale(float amax) {
  const float d = amax / 127.0f, d16 = f16_to_f32(f32_to_f16(d));
  return {std::isfinite(d16) ? d16 : d, amax != 0.0f ? 127.0f / amax : 0.0f};
}

}  // namespace

void quantize_row_q8_portable(const float* x, std::int64_t n, std::int8_t* q, float* d) {
  assert(n % q8_block_values == 0);
  for (std::int64_t b = 0; b < n / q8_block_values; ++b) {
    const float* xb = x + b * q8_block_values;
    float amax = 0.0f;
    for (std::int64_t i = 0; i < q8_block_values; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const BlockScale s = block_scale(amax);
    d[b] = s.d;
    // nearbyint rounds ties to even in the default floating-point
    // environment, as the SIMD conversion does.
    for (std::int64_t i = 0; i < q8_block_values; ++i)
      q[b * q8_block_values + i] = std::int8_t(std::clamp(std::nearbyint(xb[i] * s.inv), -128.0f, 127.0f));
  }
}

#if defined(PENSIEVE_Q8_QUANT_AVX512)

namespace {

// The same values as quantize_row_q8_portable, 32 at a time; its own target,
// so it builds with any -march and runs only where the CPU has AVX-512 BW.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,f16c"))) void quantize_row_q8_avx512(
    const float* x, std::int64_t n, std::int8_t* q, float* d) {
  assert(n % q8_block_values == 0);
  for (std::int64_t b = 0; b < n / q8_block_values; ++b) {
    const __m512 lo = _mm512_loadu_ps(x + b * 32), hi = _mm512_loadu_ps(x + b * 32 + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
    // block_scale's values with F16C (round to nearest even, as f32_to_f16):
    // a call to the baseline-compiled block_scale from here cost 100+ ns a
    // block in a -march-less build (its SSE code after AVX-512 state).
    const float dd = amax / 127.0f, d16 = _cvtsh_ss(_cvtss_sh(dd, 0));
    d[b] = std::isfinite(d16) ? d16 : dd;
    const __m512 inv = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    // cvtps rounds to nearest even (MXCSR default); the saturating narrowing
    // matches the portable clamp.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32),
                     _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(lo, inv))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * 32 + 16),
                     _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(hi, inv))));
  }
}

bool cpu_has_avx512bw() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("f16c");
}

}  // namespace

#endif

void quantize_row_q8(const float* x, std::int64_t n, std::int8_t* q, float* d) {
#if defined(PENSIEVE_Q8_QUANT_AVX512)
  if (cpu_has_avx512bw()) return quantize_row_q8_avx512(x, n, q, d);
#endif
  quantize_row_q8_portable(x, n, q, d);
}

Q8Rows quantize_rows_q8(const ConstRowsView& x, std::vector<float>& storage, bool with_offset) {
  assert(x.cols % q8_block_values == 0);
  const std::int64_t scales = x.rows * (x.cols / q8_block_values);
  const std::int64_t quant_floats = (x.rows * x.cols + 3) / 4;
  storage.resize(std::size_t(scales + quant_floats * (with_offset ? 2 : 1)));
  float* d = storage.data();
  // int8_t is a character type: its bytes may live in float storage.
  auto* q = reinterpret_cast<std::int8_t*>(storage.data() + scales);
  for (std::int64_t t = 0; t < x.rows; ++t)
    quantize_row_q8(x.row(t), x.cols, q + t * x.cols, d + t * (x.cols / q8_block_values));
  if (!with_offset) return {q, d, nullptr, x.rows, x.cols};
  auto* u = reinterpret_cast<std::uint8_t*>(storage.data() + scales + quant_floats);
  for (std::int64_t i = 0; i < x.rows * x.cols; ++i) u[i] = std::uint8_t(q[i] + 128);
  return {q, d, u, x.rows, x.cols};
}

}  // namespace pensieve::kernels::cpu
