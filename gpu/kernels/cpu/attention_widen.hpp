#pragma once
// Widening F16/BF16 rows to F32 for the CPU attention kernels (exact).
#include "gpu/kv/paged_kv_view.hpp"
#include "gpu/formats/half.hpp"

#include <cstdint>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace pensieve::kernels::cpu {

inline void widen_row(const std::uint16_t* src, kv::KvDType dtype, std::int32_t n, float* dst) {
  std::int32_t i = 0;
  if (dtype == kv::KvDType::bf16) {
    for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
    return;
  }
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

}  // namespace pensieve::kernels::cpu
