#pragma once
// Element-wise ops of the decoder; each element depends on its inputs only.
#include "gpu/kernels/cpu/thread_pool.hpp"
#include "gpu/kernels/cpu/views.hpp"

namespace pensieve::kernels::cpu {

// gate[i] = silu(gate[i]) * up[i] for every row (SwiGLU); gate, up: {n, ff}.
void silu_mul(RowsView gate, ConstRowsView up, ThreadPool& pool);

// x += delta (residual connection); both {n, dim}.
void add_inplace(RowsView x, ConstRowsView delta);

// Adds bias (cols floats) to every row.
void add_bias(RowsView x, const float* bias);

}  // namespace pensieve::kernels::cpu
