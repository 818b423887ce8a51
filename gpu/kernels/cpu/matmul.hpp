#pragma once
// y[t][o] = sum_k x[t][k] * W[o][k] for activations x {n_tokens, in} and a
// weight W {out, in} of any model::DType.
//
// Quantised weights by default take llama.cpp's numerics: the activations are
// quantised as ggml does for the weight type and multiplied block by block
// in integers (Q8_0: q8_matmul.hpp; the others: quant_matmul.hpp). With
// MatmulParams::float_activations they take the F32 path below instead.
//
// Batch invariance: every output element is one dot product whose reduction
// order is fixed by `in` alone (16 lanes, each accumulating k = lane, lane+16,
// ... with fused multiply-adds in ascending k, then one fixed horizontal sum).
// One token streams the weights in tiles of 8 rows (F16: 4) with software
// prefetch (dot_tile.hpp); on AVX-512, 2-8 tokens of F16 or BF16 weights
// (2-16 of F32) take the small-batch tiles of up to 8 tokens x 3 rows, each
// weight vector converted once for every token of its tile
// (matmul_batch_tile.hpp); up to 8 tokens (32 for halves) otherwise take the
// decode tiles two tokens a pass, edges up to 4 x 4;
// larger batches convert 64-row x 512-k blocks of weights to F32 panels once and
// sweep them with 6-token x 4-row register tiles (gemm_tile.hpp). Tiles share
// loads, never partial sums, and a k-blocked accumulator continues the same
// FMA sequence, so a token's row has the same bits alone, in a batch of any
// size, and with any thread count.
// On the F32 path quantised weights are dequantised to exactly the values
// dequantize_row() gives (Q4_0 and Q4_K in registers, the others into a
// per-call buffer of F32 rows), so a matmul on F16, BF16 or quantised weights
// equals the F32 matmul on their dequantised copy bit for bit.
// Q8_0 weights are the exception (q8_matmul.hpp): the activation rows are
// quantised to Q8 blocks once per call and each block multiplied int8 x int8,
// as llama.cpp does, so y equals a scalar reference bit for bit instead
// (q8_dot_reference: quantise x to Q8, exact int32 block dot, then
// acc = fma(w_scale * x_scale, isum, acc) over the blocks in ascending
// order); it stays batch and thread-count invariant, and is within the
// activations' rounding (max|x_block| / 254 per element) of the F32 matmul on
// the dequantised weights, which dequantize_q8_0 still selects.
//
// OpenBLAS sgemm is not used: its result for a row depends on the batch
// shape (M = 1 takes a GEMV path, K blocking differs by shape), which would
// break batch invariance.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kernels/cpu/views.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace pensieve::kernels::cpu {

// Which float row kernels run (the F32, F16, BF16 weights, and quantised ones
// on float activations); every path gives the same bits.
enum class MatmulPath : std::uint8_t {
  best,      // the fastest this CPU runs: avx512, else avx2, else portable
  portable,  // the tiles' scalar twins
  avx2,      // the scalar twins compiled for AVX2 + FMA + F16C
  avx512,    // the AVX-512 F/BW/VL tiles
};

// Whether this CPU (and build) runs `path`; best and portable always.
bool matmul_path_supported(MatmulPath path);
// The path `best` takes here, and a path's name ("avx512", "avx2", "portable").
MatmulPath matmul_best_path();
const char* matmul_path_name(MatmulPath path);

struct MatmulParams {
  // Round activations to F16 before multiplying (as ggml does for F16
  // weights); the rounding happens in a copy, x is not modified.
  bool round_activations_to_f16 = false;
  // Compute Q8_0 weights as the F32 matmul on their dequantised values (the
  // previous kernel, for comparisons) instead of int8 x int8.
  bool dequantize_q8_0 = false;
  // Compute every quantised weight (Q8_0 included) as the F32 matmul on its
  // dequantised values, on float activations, instead of llama.cpp's
  // quantised activations and integer block dot products (the default:
  // q8_matmul.hpp for Q8_0, quant_matmul.hpp for the others).
  bool float_activations = false;
  // The float kernels' instruction set (a path the CPU lacks is a fault).
  MatmulPath path = MatmulPath::best;
};

// x: {n_tokens, w.cols}; y: {n_tokens, w.rows}. y must not alias x.
void matmul(const MatmulParams& params, ConstRowsView x, const WeightView& w, RowsView y,
            ThreadPool& pool);

// The same with a scratch buffer the caller owns for the F16-rounded copy
// (avoids an allocation per call); scratch may be empty when not rounding.
// The batched path's panels and accumulators live in pool.scratch(thread).
void matmul(const MatmulParams& params, ConstRowsView x, const WeightView& w, RowsView y,
            ThreadPool& pool, std::vector<float>& scratch);

// Several weights over the same activations in one pool dispatch (a layer's
// Q/K/V, or gate/up): y[i] = x . w[i]^T, with y[i] = {n_tokens, w[i].rows}.
// The weights' rows are split between the threads as one concatenated range,
// so a decode step pays one fork/join instead of one per weight. Every output
// element is computed exactly as matmul() computes it (same bits).
void matmul_many(const MatmulParams& params, ConstRowsView x, std::span<const WeightView> w,
                 std::span<const RowsView> y, ThreadPool& pool, std::vector<float>& scratch);

}  // namespace pensieve::kernels::cpu
