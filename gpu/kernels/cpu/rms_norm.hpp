#pragma once
// RMSNorm over each row: y = w * (x / sqrt(mean(x^2) + eps)). Each row's sum
// of squares has a fixed order (16 lanes, then a fixed tree), so a row's
// result does not depend on the other rows.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kernels/cpu/views.hpp"

namespace pensieve::kernels::cpu {

struct RmsNormParams {
  float eps = 1e-5f;
};

// x, y: {n, dim} (y may alias x); weight: dim floats.
void rms_norm(const RmsNormParams& params, ConstRowsView x, const float* weight, RowsView y,
              ThreadPool& pool);

// The sum of x[i]^2 in the fixed order the kernels use.
float sum_of_squares(const float* x, std::int64_t n);

// The dot product of two F32 vectors in the same fixed 16-lane order as the
// matmul kernel (attention scores use it).
float dot_f32(const float* a, const float* b, std::int64_t n);

}  // namespace pensieve::kernels::cpu
