#pragma once
// The matmul kernel as of commit ed5071e (4 x 4 tiles, every quantised weight
// dequantised per tile), kept only so matmul_bench.cpp can time the new kernel
// against it in one run. Same results bit for bit (tests/gpu check the new one).
#include "gpu/kernels/cpu/dot_tile.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <algorithm>
#include <vector>

namespace pensieve::bench::baseline {

using namespace pensieve::kernels::cpu;
using model::DType;

constexpr std::int64_t rows_block = 64;
constexpr std::int64_t tokens_block = 64;
constexpr std::int64_t k_block = 1024;  // a multiple of 32: quantised blocks stay whole
constexpr std::int64_t tile_floats = 4 * 4 * 16;
// Output rows per scheduling unit (a multiple of the 4-row tile).
constexpr std::size_t row_grain = 16;

template <class Loader>
inline void run_rows_decode(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                     std::int64_t o0, std::int64_t o1) {
  for (std::int64_t o = o0; o < o1; o += 4) {
    const int n_out = int(std::min<std::int64_t>(4, o1 - o));
    for (std::int64_t t = 0; t < x.rows; t += 4) {
      const int n_tok = int(std::min<std::int64_t>(4, x.rows - t));
      dot_tile<Loader>(n_tok, n_out, x.row(t), x.stride, w.row(o), w.row_bytes, w.cols,
                       y.row(t) + o, y.stride);
    }
  }
}

template <class Loader>
inline void run_rows_blocked(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                      std::int64_t o0, std::int64_t o1) {
  std::vector<float> acc(std::size_t(rows_block / 4 * tokens_block / 4 * tile_floats));
  for (std::int64_t ob = o0; ob < o1; ob += rows_block) {
    const std::int64_t oe = std::min(o1, ob + rows_block);
    for (std::int64_t tb = 0; tb < x.rows; tb += tokens_block) {
      const std::int64_t te = std::min(x.rows, tb + tokens_block);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::int64_t k0 = 0; k0 < w.cols; k0 += k_block) {
        const std::int64_t k1 = std::min(w.cols, k0 + k_block);
        for (std::int64_t t = tb; t < te; t += 4) {
          const int n_tok = int(std::min<std::int64_t>(4, te - t));
          for (std::int64_t o = ob; o < oe; o += 4) {
            float* tile = acc.data() + ((t - tb) / 4 * (rows_block / 4) + (o - ob) / 4) * tile_floats;
            dot_tile_acc<Loader>(n_tok, int(std::min<std::int64_t>(4, oe - o)), x.row(t), x.stride,
                                 w.row(o), w.row_bytes, k0, k1, tile);
          }
        }
      }
      for (std::int64_t t = tb; t < te; t += 4) {
        const int n_tok = int(std::min<std::int64_t>(4, te - t));
        for (std::int64_t o = ob; o < oe; o += 4) {
          const int n_out = int(std::min<std::int64_t>(4, oe - o));
          const float* tile = acc.data() + ((t - tb) / 4 * (rows_block / 4) + (o - ob) / 4) * tile_floats;
          for (int r = 0; r < n_tok; ++r)
            for (int c = 0; c < n_out; ++c) y.row(t + r)[o + c] = hsum_lanes(tile + (r * n_out + c) * 16);
        }
      }
    }
  }
}

template <class Loader>
inline void run_rows(const ConstRowsView& x, const WeightView& w, const RowsView& y, std::int64_t o0,
              std::int64_t o1) {
  if (x.rows < 4) return run_rows_decode<Loader>(x, w, y, o0, o1);
  run_rows_blocked<Loader>(x, w, y, o0, o1);
}

inline void run_rows_for(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                         std::int64_t o0, std::int64_t o1) {
  switch (w.dtype) {
    case DType::f32: return run_rows<LoadF32>(x, w, y, o0, o1);
    case DType::f16: return run_rows<LoadF16>(x, w, y, o0, o1);
    case DType::q8_0: return run_rows<LoadQ8_0>(x, w, y, o0, o1);
    default: return;
  }
}

inline void matmul(ConstRowsView x, const WeightView& w, RowsView y, ThreadPool& pool) {
  pool.parallel_for(
      std::size_t(w.rows),
      [&](std::size_t begin, std::size_t end, std::size_t) {
        run_rows_for(x, w, y, std::int64_t(begin), std::int64_t(end));
      },
      row_grain, double(x.rows) * double(w.rows) * double(w.cols));
}

}  // namespace pensieve::bench::baseline
