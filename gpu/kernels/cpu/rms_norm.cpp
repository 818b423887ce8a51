#include "gpu/kernels/cpu/rms_norm.hpp"

#include "gpu/kernels/cpu/dot_tile.hpp"

#include <cmath>

namespace pensieve::kernels::cpu {

float dot_f32(const float* a, const float* b, std::int64_t n) {
  float out = 0.0f;
  dot_tile<LoadF32>(1, 1, a, 0, reinterpret_cast<const std::byte*>(b), 0, n, &out, 0);
  return out;
}

float sum_of_squares(const float* x, std::int64_t n) { return dot_f32(x, x, n); }

void rms_norm(const RmsNormParams& params, ConstRowsView x, const float* weight, RowsView y,
              ThreadPool& pool) {
  const std::int64_t dim = x.cols;
  pool.parallel_for(std::size_t(x.rows), [&](std::size_t begin, std::size_t end, std::size_t) {
    for (std::size_t r = begin; r < end; ++r) {
      const float* xr = x.row(std::int64_t(r));
      float* yr = y.row(std::int64_t(r));
      const float mean = sum_of_squares(xr, dim) / float(dim);
      const float scale = 1.0f / std::sqrt(mean + params.eps);
      for (std::int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (scale * xr[i]);
    }
  }, 1, 4.0 * double(x.rows) * double(dim));
}

}  // namespace pensieve::kernels::cpu
