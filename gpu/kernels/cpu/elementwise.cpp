#include "gpu/kernels/cpu/elementwise.hpp"

#include <cmath>

namespace pensieve::kernels::cpu {

void silu_mul(RowsView gate, ConstRowsView up, ThreadPool& pool) {
  // exp costs about as much as a few dozen multiply-adds.
  const double cost = 32.0 * double(gate.rows) * double(gate.cols);
  pool.parallel_for(std::size_t(gate.rows), [&](std::size_t begin, std::size_t end, std::size_t) {
    for (auto r = std::int64_t(begin); r < std::int64_t(end); ++r) {
      float* g = gate.row(r);
      const float* u = up.row(r);
      for (std::int64_t i = 0; i < gate.cols; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  }, 1, cost);
}

void add_inplace(RowsView x, ConstRowsView delta) {
  for (std::int64_t r = 0; r < x.rows; ++r) {
    float* a = x.row(r);
    const float* b = delta.row(r);
    for (std::int64_t i = 0; i < x.cols; ++i) a[i] += b[i];
  }
}

void add_bias(RowsView x, const float* bias) {
  for (std::int64_t r = 0; r < x.rows; ++r) {
    float* a = x.row(r);
    for (std::int64_t i = 0; i < x.cols; ++i) a[i] += bias[i];
  }
}

}  // namespace pensieve::kernels::cpu
