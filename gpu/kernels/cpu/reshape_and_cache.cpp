#include "gpu/kernels/cpu/reshape_and_cache.hpp"

#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/reshape_and_cache_q8.hpp"
#include "gpu/kv/fp8_kv_row.hpp"

#include <algorithm>
#include <stdexcept>

namespace pensieve::kernels::cpu {

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
          std::transform(src, src + row, static_cast<std::uint16_t*>(c.data) + dst, f32_to_f16);
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
