#include "gpu/kernels/cpu/reshape_and_cache.hpp"

#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/reshape_and_cache_q8.hpp"
#include "gpu/kv/fp8_kv_row.hpp"

#include <algorithm>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <stdexcept>

namespace pensieve::kernels::cpu {

namespace {

// f32_to_f16 over a row: 16 values an instruction where the build has
// AVX-512 (the element at a time took 25 us of every M-100 layer of an
// 8-sequence decode step, AMD Zen 5, 2026-12-06). The hardware rounds as
// f32_to_f16 does (to nearest even, overflow to infinity, subnormals kept);
// a NaN keeps its payload's top bits there, so NaNs are made the one
// f32_to_f16 gives (quiet, payload 0x200, the sign kept) first.
void f16_row(const float* src, std::int64_t n, std::uint16_t* dst) {
  std::int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 quiet = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000));
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(std::int32_t(0x80000000u)));
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(src + i);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    x = _mm512_mask_mov_ps(x, nan, _mm512_or_ps(_mm512_and_ps(x, sign), quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

void reshape_and_cache(const ReshapeAndCacheParams& p) {
  if (p.src_dtype != kv::KvDType::f32)
    throw std::invalid_argument("cpu reshape_and_cache: K/V must be F32");
  const kv::PagedKvView& c = p.cache;
  const std::int64_t row = c.token_stride();
  const std::int64_t slots_total = std::int64_t(c.num_blocks) * c.block_tokens;
  for (std::int32_t t = 0; t < p.num_tokens; ++t) {
    const std::int64_t slot = p.slots[t];
    if (slot < 0) continue;
    if (slot >= slots_total) throw std::out_of_range("reshape_and_cache: slot past the pool");
    const auto block = static_cast<std::int32_t>(slot / c.block_tokens);
    const auto in_block = static_cast<std::int32_t>(slot % c.block_tokens);
    for (int which = 0; which < 2; ++which) {
      const float* src = static_cast<const float*>(which == 0 ? p.k : p.v) + t * row;
      if (c.dtype == kv::KvDType::q8_0) {
        quantize_kv_row_q8_0(src, row, static_cast<std::byte*>(c.data) + c.row_byte_offset(block, which, in_block));
        continue;
      }
      if (c.dtype == kv::KvDType::fp8) {
        kv::quantize_kv_row_fp8(src, row, static_cast<std::byte*>(c.data) + c.row_byte_offset(block, which, in_block));
        continue;
      }
      const std::int64_t dst = c.offset(block, which, in_block, 0);
      switch (c.dtype) {
        case kv::KvDType::f32:
          std::copy(src, src + row, static_cast<float*>(c.data) + dst);
          break;
        case kv::KvDType::f16:
          f16_row(src, row, static_cast<std::uint16_t*>(c.data) + dst);
          break;
        case kv::KvDType::bf16:
          std::transform(src, src + row, static_cast<std::uint16_t*>(c.data) + dst, f32_to_bf16);
          break;
        case kv::KvDType::q8_0:
        case kv::KvDType::fp8:
          break;  // quantised above
      }
    }
  }
}

}  // namespace pensieve::kernels::cpu
