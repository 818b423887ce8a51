#pragma once
// Dequantisers of the block types beyond Q8_0/Q4_0/Q4_K (layouts in
// quant_blocks.hpp), each computing ggml's dequantize_row_* values with the
// same F32 operations in the same order. n is a whole number of blocks.
#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

void dequantize_q4_1(const std::byte* row, std::int64_t n, float* out);
void dequantize_q5_0(const std::byte* row, std::int64_t n, float* out);
void dequantize_q5_1(const std::byte* row, std::int64_t n, float* out);
void dequantize_iq4_nl(const std::byte* row, std::int64_t n, float* out);
void dequantize_q2_k(const std::byte* row, std::int64_t n, float* out);
void dequantize_q3_k(const std::byte* row, std::int64_t n, float* out);
void dequantize_q5_k(const std::byte* row, std::int64_t n, float* out);
void dequantize_q6_k(const std::byte* row, std::int64_t n, float* out);
void dequantize_iq4_xs(const std::byte* row, std::int64_t n, float* out);

}  // namespace pensieve::kernels::cpu
