#pragma once
// Quantising one K or V token row to Q8_0 KV (ggml's block_q8_0: an F16
// scale d = amax / 127, then 32 int8 quants round(x / d)), as
// reshape_and_cache writes it into a q8_0 pool.
#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

// x: n values, n a multiple of 32; out: n / 32 * 34 bytes.
void quantize_kv_row_q8_0(const float* x, std::int64_t n, std::byte* out);

}  // namespace pensieve::kernels::cpu
