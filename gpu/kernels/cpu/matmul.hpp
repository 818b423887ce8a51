#pragma once
// y[t][o] = sum_k x[t][k] * W[o][k] for activations x {n_tokens, in} and a
// weight W {out, in} in F32, F16, BF16, Q8_0 or Q4_0.
//
// Batch invariance: every output element is one dot product whose reduction
// order is fixed by `in` alone (16 lanes, each accumulating k = lane, lane+16,
// ... with fused multiply-adds in ascending k, then one fixed horizontal sum).
// The kernel computes tiles of up to 4 tokens x 4 weight rows to reuse loads,
// but a tile only shares loads, never partial sums, so a token's row has the
// same bits alone, in a batch of any size, and with any thread count.
// Quantised weights are dequantised to exactly the values dequantize_row()
// gives, so a matmul on Q8_0 weights equals the F32 matmul on their
// dequantised copy bit for bit.
//
// OpenBLAS sgemm is not used: its result for a row depends on the batch
// shape (M = 1 takes a GEMV path, K blocking differs by shape), which would
// break batch invariance.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kernels/cpu/views.hpp"

#include <vector>

namespace pensieve::kernels::cpu {

struct MatmulParams {
  // Round activations to F16 before multiplying (as ggml does for F16
  // weights); the rounding happens in a copy, x is not modified.
  bool round_activations_to_f16 = false;
};

// x: {n_tokens, w.cols}; y: {n_tokens, w.rows}. y must not alias x.
void matmul(const MatmulParams& params, ConstRowsView x, const WeightView& w, RowsView y,
            ThreadPool& pool);

// The same with a scratch buffer the caller owns for the F16-rounded copy
// (avoids an allocation per call); scratch may be empty when not rounding.
void matmul(const MatmulParams& params, ConstRowsView x, const WeightView& w, RowsView y,
            ThreadPool& pool, std::vector<float>& scratch);

}  // namespace pensieve::kernels::cpu
