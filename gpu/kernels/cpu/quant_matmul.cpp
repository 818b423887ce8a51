#include "gpu/kernels/cpu/quant_matmul.hpp"

#include <algorithm>
#include <cassert>

namespace pensieve::kernels::cpu {

namespace {

// Output rows per scheduling unit, and per tile: a tile's weight rows stay
// in the L1/L2 while every token passes over them.
constexpr std::size_t row_grain = 16;

}  // namespace

void quant_matmul(ConstRowsView x, const WeightView& w, RowsView y, ThreadPool& pool,
                  std::vector<float>& scratch, QuantDotPath path) {
  assert(x.cols == w.cols && y.cols == w.rows && y.rows == x.rows);
  const QuantDotFn dot = quant_dot_fn(w.dtype, path);
  assert(dot && "quant_matmul: a path this CPU lacks");
  const std::int64_t n_blocks = w.cols / model::dtype_block_elems(w.dtype);
  const QuantActs acts = quantize_act_rows(act_quant_for(w.dtype), x, scratch);
  pool.parallel_for(
      std::size_t(w.rows),
      [&](std::size_t begin, std::size_t end, std::size_t) {
        for (auto o0 = std::int64_t(begin); o0 < std::int64_t(end); o0 += std::int64_t(row_grain)) {
          const std::int64_t o1 = std::min(std::int64_t(end), o0 + std::int64_t(row_grain));
          for (std::int64_t t = 0; t < x.rows; ++t) {
            const QuantActRow xr = acts.row(t);
            float* out = y.row(t);
            for (std::int64_t o = o0; o < o1; ++o) out[o] = dot(w.row(o), xr, n_blocks);
          }
        }
      },
      row_grain, double(x.rows) * double(w.rows) * double(w.cols));
}

}  // namespace pensieve::kernels::cpu
