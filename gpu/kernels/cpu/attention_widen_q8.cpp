#include "gpu/kernels/cpu/attention_widen_q8.hpp"

#include "gpu/formats/half.hpp"
#include "gpu/kv/paged_kv_view.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pensieve::kernels::cpu {
namespace {

constexpr std::int64_t kValues = kv::kQ8KvBlockValues;

float block_scale(const std::byte* blk) {
  std::uint16_t d16 = 0;
  std::memcpy(&d16, blk, sizeof d16);
  return f16_to_f32(d16);
}

const std::int8_t* block_quants(const std::byte* blk) {
  return reinterpret_cast<const std::int8_t*>(blk + sizeof(std::uint16_t));
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw"))) void widen_q8_0_avx512(const std::byte* row, std::int64_t first,
                                                                   std::int32_t n, float* dst) {
  for (std::int64_t i = first, end = first + n; i < end;) {
    const std::byte* blk = row + std::size_t(i / kValues) * kv::kQ8KvBlockBytes;
    const std::int64_t in_block = i % kValues, run = std::min(end - i, kValues - in_block);
    const float d = block_scale(blk);
    const std::int8_t* q = block_quants(blk) + in_block;
    const __m512 vd = _mm512_set1_ps(d);
    std::int64_t j = 0;
    for (; j + 16 <= run; j += 16) {
      const __m512i q32 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + j)));
      _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_cvtepi32_ps(q32), vd));
    }
    for (; j < run; ++j) dst[j] = float(q[j]) * d;
    dst += run;
    i += run;
  }
}
#endif

}  // namespace

void widen_q8_0_portable(const std::byte* row, std::int64_t first, std::int32_t n, float* dst) {
  for (std::int64_t i = first, end = first + n; i < end;) {
    const std::byte* blk = row + std::size_t(i / kValues) * kv::kQ8KvBlockBytes;
    const std::int64_t in_block = i % kValues, run = std::min(end - i, kValues - in_block);
    const float d = block_scale(blk);
    const std::int8_t* q = block_quants(blk) + in_block;
    for (std::int64_t j = 0; j < run; ++j) dst[j] = float(q[j]) * d;
    dst += run;
    i += run;
  }
}

WidenQ8Fn widen_q8_0_avx512_fn() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return widen_q8_0_avx512;
#endif
  return nullptr;
}

WidenQ8Fn widen_q8_0_fn() {
  const WidenQ8Fn vector = widen_q8_0_avx512_fn();
  return vector ? vector : widen_q8_0_portable;
}

const char* widen_q8_0_path() { return widen_q8_0_avx512_fn() ? "avx512" : "portable"; }

}  // namespace pensieve::kernels::cpu
