#pragma once
// PagedKvView: a non-owning view of one layer of a KV pool, laid out as
// [num_blocks][2][block_tokens][n_kv_heads][head_dim] (index 0 of the "2" is
// K, 1 is V), so one block of one layer is contiguous. Plain data: the CUDA
// kernels take it by value, so its helpers are constexpr (usable on device).
//
// Q8_0 KV stores each token's row (n_kv_heads * head_dim values) in blocks
// of 64 values: an F16 scale (amax / 127), then 64 int8 quants, 66 bytes
// (ggml's block_q8_0 has 32 values and 34 bytes). A row's last block holds
// the 32 values left when the row is an odd multiple of 32 (34 bytes, as
// ggml's), so value i of any row is at (i / 64) * 66 + 2 + i % 64 whatever the
// row's length. 64 rather than 32 values a scale: 33/64 of F16's bytes, so a
// device tier holds 1.939x F16's tokens (32 values: 1.882x, short of the 1.9x
// issue 21 asks); with the 64- and 128-dim heads of real models a block is
// one head or half of one, so a scale never spans heads (a per-head scale
// with 128-dim heads would give 1.969x but one outlier channel would coarsen
// 128 values, and the 64-dim heads gain nothing). Rows of 32 values (the tiny
// test models: heads of 16 and 8) are one short block, the layout of before.
//
// FP8 KV (fp8_kv_row.hpp) keeps blocks of 32 values: an F32 scale
// (amax / 448) then 32 E4M3 codes, 36 bytes per 32 values (9/16 of F16).
#include <cstddef>
#include <cstdint>

namespace pensieve::kv {

enum class KvDType : std::uint8_t { f32, f16, bf16, q8_0, fp8 };

inline constexpr std::int32_t kQ8KvBlockValues = 64;
inline constexpr std::size_t kQ8KvBlockBytes = 66;  // F16 scale + 64 int8
inline constexpr std::int32_t kFp8KvBlockValues = 32;
inline constexpr std::size_t kFp8KvBlockBytes = 36;  // F32 scale + 32 E4M3 codes
// Rows of a blocked dtype are whole multiples of this many values.
inline constexpr std::int32_t kKvRowGranuleValues = 32;

// The block-quantised dtypes (rows of whole 32-value granules).
constexpr bool kv_dtype_is_blocked(KvDType t) { return t == KvDType::q8_0 || t == KvDType::fp8; }

// Values and bytes of one full block of a blocked dtype (0 for element types);
// each of its values is one byte after the scale.
constexpr std::int32_t kv_block_values(KvDType t) {
  return t == KvDType::q8_0 ? kQ8KvBlockValues : t == KvDType::fp8 ? kFp8KvBlockValues : 0;
}
constexpr std::size_t kv_block_bytes(KvDType t) {
  return t == KvDType::q8_0 ? kQ8KvBlockBytes : t == KvDType::fp8 ? kFp8KvBlockBytes : 0;
}

// Bytes of one element of an element type (f32, f16, bf16); 0 for q8_0 and
// fp8, whose size is per block: take kv_values_bytes() for any KV byte count.
constexpr std::size_t kv_dtype_bytes(KvDType t) {
  return t == KvDType::f32 ? 4 : kv_dtype_is_blocked(t) ? 0 : 2;
}
// Bytes of the first n values of a token's row (q8_0, fp8: n a multiple of
// 32; a last block shorter than a full one keeps its scale and its values).
constexpr std::size_t kv_values_bytes(KvDType t, std::int64_t n) {
  if (!kv_dtype_is_blocked(t)) return std::size_t(n) * kv_dtype_bytes(t);
  const std::int64_t per = kv_block_values(t), scale_bytes = std::int64_t(kv_block_bytes(t)) - per;
  return std::size_t(n + (n + per - 1) / per * scale_bytes);
}
const char* kv_dtype_name(KvDType t);

struct PagedKvView {
  void* data = nullptr;
  KvDType dtype = KvDType::f32;
  std::int32_t num_blocks = 0;
  std::int32_t block_tokens = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;

  // Strides in elements (element types only; q8_0 addresses bytes below).
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

  // Sizes in bytes, right for every dtype.
  constexpr std::size_t token_bytes() const { return kv_values_bytes(dtype, token_stride()); }
  constexpr std::size_t block_bytes() const { return 2 * std::size_t(block_tokens) * token_bytes(); }
  constexpr std::size_t bytes() const { return std::size_t(num_blocks) * block_bytes(); }
  // Byte offset of the row (every head) of token `slot_in_block` of block
  // `block`, K (`which` 0) or V (1).
  constexpr std::size_t row_byte_offset(std::int32_t block, int which, std::int32_t slot_in_block) const {
    return ((std::size_t(block) * 2 + std::size_t(which)) * std::size_t(block_tokens) +
            std::size_t(slot_in_block)) *
           token_bytes();
  }
};

}  // namespace pensieve::kv
