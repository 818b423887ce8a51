#pragma once
// The Q8_0 matmul's VNNI row kernels (internal to q8_matmul.cpp), in their
// own translation unit compiled for AVX-512 VNNI (q8_rows_vnni.cpp).
#include "gpu/kernels/cpu/q8_activations.hpp"
#include "gpu/kernels/cpu/views.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::kernels::cpu {

// Rows [o0, o1) of every token; buf: the calling thread's scratch.
using Q8RowsFn = void (*)(const Q8Rows& x, const WeightView& w, const RowsView& y, std::int64_t o0,
                          std::int64_t o1, std::vector<float>& buf);

// Null on a non-x86 build; call only where q8_vnni_available().
Q8RowsFn q8_rows_vnni_decode();   // one token at a time, 8-row tiles
Q8RowsFn q8_rows_vnni_tokens();   // 16-row x up to 8-token tiles
Q8RowsFn q8_rows_vnni_batched();  // packed 32-row panels, 6-token tiles

}  // namespace pensieve::kernels::cpu
