#pragma once
// Converting stored rows (every model::DType) to F32, exactly as ggml's
// dequantize_row_* does: every kernel that reads a quantised weight in float
// computes with these same values.
#include "gpu/kernels/cpu/views.hpp"

#include <vector>

namespace pensieve::kernels::cpu {

// out[0..n) = the first n elements of a stored row of type t (n whole blocks
// for the quantised types: 32, or 256 for the K-quants).
void dequantize_row(model::DType t, const std::byte* row, std::int64_t n, float* out);

// Sub-block j's (0..7) 6-bit scale and min of a Q4_K block's 12 scale bytes
// (ggml's get_scale_min_k4).
struct Q4KScale {
  std::uint8_t scale, min;
};
Q4KScale q4_k_scale(const std::uint8_t* scales, int j);

// A whole tensor as F32 (norm vectors, biases, tests).
std::vector<float> dequantize(const model::Tensor& t);

// Rounds each value to the nearest F16 and back (ggml rounds matmul
// activations this way when the weights are F16).
void round_to_f16(float* x, std::int64_t n);

}  // namespace pensieve::kernels::cpu
