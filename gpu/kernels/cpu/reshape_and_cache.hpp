#pragma once
// reshape_and_cache: writes the K and V of a ragged batch's new tokens into
// their slots of one layer's paged cache (slot = block * block_tokens +
// offset, from BlockTable::slot / KvCache::append). Converts F32 to the
// cache's dtype (round to nearest even; q8_0: each token row quantised to
// ggml's Q8_0 blocks, reshape_and_cache_q8.hpp). The CUDA twin takes the same
// params (F32, F16, BF16 caches).
#include "gpu/kv/paged_kv_view.hpp"

#include <cstdint>

namespace pensieve::kernels {

struct ReshapeAndCacheParams {
  const void* k = nullptr;  // [num_tokens][n_kv_heads][head_dim], dtype src_dtype
  const void* v = nullptr;
  kv::KvDType src_dtype = kv::KvDType::f32;  // the CPU op takes F32 only
  const std::int64_t* slots = nullptr;  // [num_tokens]; a negative slot skips the token (padding)
  std::int32_t num_tokens = 0;
  kv::PagedKvView cache;
};

namespace cpu {
void reshape_and_cache(const ReshapeAndCacheParams& params);
}

}  // namespace pensieve::kernels
