#pragma once
// Quantising one K or V token row to Q8_0 KV (blocks of 64 values: an F16
// scale d = amax / 127, then int8 quants round(x / d); ggml's block_q8_0
// arithmetic on blocks twice as wide, kv/paged_kv_view.hpp), as
// reshape_and_cache writes it into a q8_0 pool.
#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

// x: n values, n a multiple of 32; out: kv_values_bytes(q8_0, n) bytes
// (66 per 64 values, 34 for a last block of 32).
void quantize_kv_row_q8_0(const float* x, std::int64_t n, std::byte* out);

}  // namespace pensieve::kernels::cpu
