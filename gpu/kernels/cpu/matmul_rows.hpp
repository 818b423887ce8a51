#pragma once
// The float matmul's row kernels per instruction set (internal to
// gpu/kernels/cpu): one function per set, each in its own translation unit
// compiled for that set whatever the build's -march (matmul_rows_impl.hpp),
// and matmul.cpp picks one per call from the CPU's features.
#include "gpu/kernels/cpu/views.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::kernels::cpu {

// Rows [o0, o1) of y = x . w^T; buf: the calling thread's scratch.
using MatmulRowsFn = void (*)(const ConstRowsView& x, const WeightView& w, const RowsView& y,
                              std::int64_t o0, std::int64_t o1, std::vector<float>& buf);

// Each is null where the build has no such kernel (a non-x86 build lacks
// the AVX2 and AVX-512 ones); call a kernel only on a CPU with its features.
MatmulRowsFn matmul_rows_portable();
MatmulRowsFn matmul_rows_avx2();    // AVX2 + FMA + F16C
MatmulRowsFn matmul_rows_avx512();  // AVX-512 F/BW/VL/DQ + AVX2 + FMA + F16C

}  // namespace pensieve::kernels::cpu
