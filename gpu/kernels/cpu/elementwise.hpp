#pragma once
// Element-wise ops of the decoder; each element depends on its inputs only.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kernels/cpu/views.hpp"

namespace pensieve::kernels::cpu {

// gate[i] = silu(gate[i]) * up[i] for every row (SwiGLU); gate, up: {n, ff}.
void silu_mul(RowsView gate, ConstRowsView up, ThreadPool& pool);

// gate[i] = gelu(gate[i]) * up[i] (GeGLU, Gemma), GELU's tanh approximation
// computed as ggml's CPU backend does: from the F16 rounding of the input,
// the result rounded to F16 (its 64K-entry table), 0 below -10 and the
// identity above 10.
void gelu_mul(RowsView gate, ConstRowsView up, ThreadPool& pool);

// x[i] = cap * tanh(x[i] / cap) (Gemma 2's final logit soft-capping, as
// ggml: a multiply by 1 / cap, tanh, a multiply by cap).
void softcap(RowsView x, float cap);

// x *= factor (Gemma's embedding scaling by sqrt(dim)).
void scale_inplace(RowsView x, float factor);

// x += delta (residual connection); both {n, dim}.
void add_inplace(RowsView x, ConstRowsView delta);

// Adds bias (cols floats) to every row.
void add_bias(RowsView x, const float* bias);

}  // namespace pensieve::kernels::cpu
