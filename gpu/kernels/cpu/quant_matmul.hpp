#pragma once
// The matmul for quantised weights other than Q8_0 (which has its own VNNI
// tiles, q8_matmul.hpp) with llama.cpp's numerics: the activation rows are
// quantised once per call as ggml does for the weight type
// (quant_activations.hpp) and every output element is one quant_dot (its
// definition in quant_dot.hpp), so y[t][o] has the same bits alone, in a
// batch of any size, with any thread count and on every QuantDotPath. A
// batch of several tokens takes the path's lane tiles where it has them
// (quant_dot_lane_tile_fn: 16 weight rows in the lanes x up to 8 tokens;
// more tokens through quant_dot_lane_panel_fn, the rows unpacked once),
// else its token tiles (quant_dot_token_tile_fn: 8 weight rows x up to
// quant_dot_tile_tokens_max tokens, each block unpacked once per group of
// tokens), else its multi-row
// kernel (quant_dot_rows_fn: one weight row x up to quant_dot_rows_max
// tokens), else one dot per element.
#include "gpu/kernels/cpu/quant_dot.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <span>
#include <vector>

namespace pensieve::kernels::cpu {

// Which tiles a batch takes: the best the path has for the CPU (`tuning`:
// lane tiles, and their panels above 8 tokens; one token through the lane
// tiles or the 8-row tiles as the tuning says), the lane tiles without
// panels at any token count, or the 8-row tiles (one token) and token tiles
// even where the path has lane tiles (the benchmarks' and tests'
// side-by-side runs). The lane tiles and panels prefetch where the tuning
// says. Every choice gives the same bits.
enum class QuantBatchTiles { best, token_tiles, lane_tiles };

// x: {n_tokens, w.cols}, w quantised {rows, cols}; y: {n_tokens, w.rows}.
// scratch holds the quantised activations (caller-owned). An explicit path
// must be one the CPU runs (quant_dot_path_supported).
void quant_matmul(ConstRowsView x, const WeightView& w, RowsView y, ThreadPool& pool,
                  std::vector<float>& scratch, QuantDotPath path = QuantDotPath::best,
                  QuantBatchTiles batch = QuantBatchTiles::best,
                  const CpuTuning& tuning = host_cpu_tuning());

// The same for up to quant_max_weights weights (of any quantised types)
// over the same activations in one pool dispatch: y[i] = x . w[i]^T, every
// element as quant_matmul computes it. The activations are quantised once
// per activation format (one for a K-quant mix such as Q4_K + Q6_K).
constexpr std::size_t quant_max_weights = 4;
void quant_matmul_many(ConstRowsView x, std::span<const WeightView> w,
                       std::span<const RowsView> y, ThreadPool& pool, std::vector<float>& scratch,
                       QuantDotPath path = QuantDotPath::best,
                       QuantBatchTiles batch = QuantBatchTiles::best,
                       const CpuTuning& tuning = host_cpu_tuning());

}  // namespace pensieve::kernels::cpu
