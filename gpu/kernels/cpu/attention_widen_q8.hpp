#pragma once
// Dequantising Q8_0 KV (paged_kv_view.hpp's layout) to F32 for the CPU
// attention kernels: values [first, first + n) of one token's row, each
// d * q with d the F16 scale of its block of 64. The vector path and the
// portable one give the same bits (one F32 product per value); which runs is
// chosen at run time from what the CPU reports, as the quantised dot
// products are (quant_dot.cpp), so a portable build still vectorises here.
#include <cstddef>
#include <cstdint>

namespace pensieve::kernels::cpu {

using WidenQ8Fn = void (*)(const std::byte* row, std::int64_t first, std::int32_t n, float* dst);

void widen_q8_0_portable(const std::byte* row, std::int64_t first, std::int32_t n, float* dst);
// The AVX-512 (F, BW) path, or null where the CPU lacks it.
WidenQ8Fn widen_q8_0_avx512_fn();
// The widest path the CPU runs.
WidenQ8Fn widen_q8_0_fn();
// Its name ("avx512", "portable"), for reports.
const char* widen_q8_0_path();

}  // namespace pensieve::kernels::cpu
