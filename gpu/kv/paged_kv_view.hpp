#pragma once
// PagedKvView: a non-owning view of one layer of a KV pool, laid out as
// [num_blocks][2][block_tokens][n_kv_heads][head_dim] (index 0 of the "2" is
// K, 1 is V), so one block of one layer is contiguous. Plain data: the CUDA
// kernels take it by value, so its helpers are constexpr (usable on device).
#include <cstddef>
#include <cstdint>

namespace pensieve::kv {

enum class KvDType : std::uint8_t { f32, f16, bf16 };

constexpr std::size_t kv_dtype_bytes(KvDType t) {
  return t == KvDType::f32 ? 4 : 2;
}
const char* kv_dtype_name(KvDType t);

struct PagedKvView {
  void* data = nullptr;
  KvDType dtype = KvDType::f32;
  std::int32_t num_blocks = 0;
  std::int32_t block_tokens = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;

  // Strides in elements.
  constexpr std::int64_t token_stride() const { return std::int64_t(n_kv_heads) * head_dim; }
  constexpr std::int64_t kv_stride() const { return block_tokens * token_stride(); }
  constexpr std::int64_t block_stride() const { return 2 * kv_stride(); }
  constexpr std::int64_t numel() const { return num_blocks * block_stride(); }
  // Element offset of head `head` of token `slot_in_block` of block `block`;
  // `which` is 0 for K and 1 for V.
  constexpr std::int64_t offset(std::int32_t block, int which, std::int32_t slot_in_block,
                                std::int32_t head) const {
    return block * block_stride() + which * kv_stride() + slot_in_block * token_stride() +
           std::int64_t(head) * head_dim;
  }
};

}  // namespace pensieve::kv
