#pragma once
// FP8 KV rows, the CPU reference (and the CPU pass's path): a token's row of
// n values (n a multiple of 32) as blocks of an F32 scale, amax / 448 (1 for
// an all-zero block), then 32 E4M3 codes of x / scale (fp8_e4m3.hpp: ties to
// even, saturating), 36 bytes per 32 values. The CUDA kernels
// (kernels/cuda/kv_quant.cuh) compute the same scale and codes: one F32
// division per value and cuda_fp8.h's E4M3 conversion, both round to nearest
// even.
#include <cstddef>
#include <cstdint>

namespace pensieve::kv {

// Quantises x[0, n) into `out` (n / 32 blocks of kFp8KvBlockBytes).
void quantize_kv_row_fp8(const float* x, std::int64_t n, std::byte* out);

// Values [first, first + n) of a quantised row, as F32.
void widen_kv_row_fp8(const std::byte* row, std::int64_t first, std::int32_t n, float* dst);

}  // namespace pensieve::kv
