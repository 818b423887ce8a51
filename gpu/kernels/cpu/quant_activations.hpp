#pragma once
// The activation operand of a matmul on quantised weights, quantised the way
// ggml's CPU backend does for that weight type (its vec_dot_type), so the
// products are llama.cpp's:
//   Q8_0 (Q4_0, Q5_0, IQ4_NL, Q8_0 weights): blocks of 32, amax = max|x|,
//        d = F16(amax / 127), q = round-half-even(x * (127 / amax)).
//   Q8_1 (Q4_1, Q5_1): Q8_0's quants and d, and s = F16(amax / 127 * sum q).
//   Q8_K (the K-quants): blocks of 256, max = the first element of largest
//        |x| (with its sign), iscale = -127 / max,
//        q = min(127, round-half-even(iscale * x)), d = 1 / iscale in F32,
//        and bsums = the sums of q over each 16.
// The F16-rounded values are kept as F32 (exactly representable).
#include "gpu/kernels/cpu/views.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::kernels::cpu {

enum class ActQuant : std::uint8_t { q8_0, q8_1, q8_k };

// ggml's vec_dot_type of a quantised weight type (asserts t is quantised).
ActQuant act_quant_for(model::DType t);
constexpr std::int64_t act_block_values(ActQuant a) {
  return a == ActQuant::q8_k ? 256 : 32;
}

// One quantised activation row: q[0..cols), d per block, s per block (Q8_1)
// and bsums per 16 values (Q8_K); the pointers a format lacks are null.
struct QuantActRow {
  const std::int8_t* q = nullptr;
  const float* d = nullptr;
  const float* s = nullptr;
  const std::int16_t* bsums = nullptr;
};

// n values (whole blocks) of x quantised as `a` into the given arrays
// (s may be null for Q8_0; bsums is used by Q8_K only).
void quantize_act_row(ActQuant a, const float* x, std::int64_t n, std::int8_t* q, float* d,
                      float* s, std::int16_t* bsums);
// The same in scalar code only: the definition the AVX-512 quantisers (Q8_0
// blocks; Q8_K, chosen at run time) meet byte for byte.
void quantize_act_row_portable(ActQuant a, const float* x, std::int64_t n, std::int8_t* q, float* d,
                               float* s, std::int16_t* bsums);

// Every row of x quantised into `storage` (caller-owned, resized as needed).
struct QuantActs {
  ActQuant kind = ActQuant::q8_0;
  std::int64_t rows = 0, cols = 0;
  std::int8_t* q = nullptr;
  float* d = nullptr;
  float* s = nullptr;
  std::int16_t* bsums = nullptr;
  QuantActRow row(std::int64_t t) const;
};
QuantActs quantize_act_rows(ActQuant a, const ConstRowsView& x, std::vector<float>& storage);

}  // namespace pensieve::kernels::cpu
