#pragma once
// The int8 matmul for Q8_0 weights: y[t][o] = x[t] . W[o] with the
// activation rows quantised to Q8 blocks (q8_activations.hpp) and each
// 32-wide block multiplied int8 x int8 (AVX-512 VNNI vpdpbusd), as llama.cpp
// does. The definition, which every path meets bit for bit:
//   acc = 0.0f
//   for each block b in ascending order:
//     isum = sum over the block of int32(xq) * int32(wq)     (exact)
//     s    = float(w_scale_b) * x_scale_b                    (one F32 rounding)
//     acc  = fma(s, float(isum), acc)                        (one F32 rounding)
//   y = acc
// isum is an exact integer, so the paths may add its products in any order;
// the F32 steps are fixed per element, so a token's row has the same bits
// alone, in a batch of any size, with any thread count, and on the VNNI and
// the portable path. On VNNI one token runs 8-row tiles (q8_tiles.hpp), a
// decode batch of 2 to 64 tokens 16-row x up to 8-token tiles that load
// and transpose each block once for the tile's tokens (q8_token_tiles.hpp),
// a larger batch packed 32-row panels (q8_tiles.hpp).
//
// Error against the F32 matmul on the dequantised weights: quantising moves
// each x[k] by at most d_b / 2 = max|x_b| / 254 (b: k's block), so y moves
// by at most sum_b max|x_b| / 254 * sum_{k in b} |w[k]|, plus the F32
// rounding of the block steps (a few ulps of sum |x w|). llama.cpp
// quantises the activations the same way (and rounds d_b to F16); only its
// F32 summation order differs.
#include "gpu/kernels/cpu/q8_activations.hpp"
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace pensieve::kernels::cpu {

enum class Q8Path : std::uint8_t {
  best,       // VNNI where compiled in, else portable
  portable,   // plain C++ (any machine)
  per_token,  // VNNI, a decode batch by the one-token tile once per token
              // (the path before the token tiles, for comparisons)
};

// Whether this build has the VNNI kernels (AVX-512 BW/VL + VNNI at compile time).
bool q8_vnni_available();

// x: {n_tokens, w.cols}, w: Q8_0 {rows, cols}; y: {n_tokens, w.rows}.
// scratch holds the quantised activations (caller-owned: no allocation per
// call once it has grown); the batched path's packed weights live in
// pool.scratch(thread).
void q8_matmul(ConstRowsView x, const WeightView& w, RowsView y, ThreadPool& pool,
               std::vector<float>& scratch, Q8Path path = Q8Path::best);

// The same for up to q8_max_weights weights over the same activations
// (a layer's Q/K/V, or gate/up) in one pool dispatch: y[i] = x . w[i]^T,
// every element as q8_matmul computes it.
constexpr std::size_t q8_max_weights = 4;
void q8_matmul_many(ConstRowsView x, std::span<const WeightView> w, std::span<const RowsView> y,
                    ThreadPool& pool, std::vector<float>& scratch, Q8Path path = Q8Path::best);

// One output element by the definition above: quantised activation row
// (xq, xd) against a stored Q8_0 row of n_blocks blocks.
float q8_dot_reference(const std::int8_t* xq, const float* xd, const std::byte* w_row,
                       std::int64_t n_blocks);

}  // namespace pensieve::kernels::cpu
