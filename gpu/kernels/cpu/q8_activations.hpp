#pragma once
// Activation rows quantised to Q8 blocks for the int8 Q8_0 matmul
// (q8_matmul.hpp): each block of 32 values becomes 32 int8 quants and one
// scale, as ggml's x86 quantize_row_q8_0 makes them: d = max|x| / 127 rounded
// to F16 (held as F32), q = x * (127 / max|x|) rounded to nearest, ties to
// even (ggml's scalar reference rounds ties away from zero), so q is in
// [-127, 127]. Only where ggml's F16 d would overflow (max|x| > 8.3e6) the
// scale stays F32.
// The SIMD and the portable quantiser give the same bytes.
#include "gpu/kernels/cpu/views.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::kernels::cpu {

constexpr std::int64_t q8_block_values = 32;

// n_rows rows of `cols` values (a multiple of 32): row t's quants at
// q + t * cols, its block scales at d + t * cols / 32.
struct Q8Rows {
  const std::int8_t* q = nullptr;
  const float* d = nullptr;
  // q + 128 as unsigned bytes (for u8 x s8 dot products), when requested.
  const std::uint8_t* u = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t blocks() const { return cols / q8_block_values; }
  const std::int8_t* q_row(std::int64_t t) const { return q + t * cols; }
  const float* d_row(std::int64_t t) const { return d + t * blocks(); }
  const std::uint8_t* u_row(std::int64_t t) const { return u + t * cols; }
};

// Quantises n values (a multiple of 32) of x into q[0..n) and d[0..n/32).
void quantize_row_q8(const float* x, std::int64_t n, std::int8_t* q, float* d);
// The same without SIMD (the definition; tests compare the two).
void quantize_row_q8_portable(const float* x, std::int64_t n, std::int8_t* q, float* d);

// Quantises every row of x into `storage` (resized as needed, owned by the
// caller so a matmul need not allocate) and returns a view of it, which
// stays valid until storage changes. with_offset adds the u bytes.
Q8Rows quantize_rows_q8(const ConstRowsView& x, std::vector<float>& storage, bool with_offset);

}  // namespace pensieve::kernels::cpu
