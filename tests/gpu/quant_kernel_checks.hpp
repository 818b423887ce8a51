#pragma once
// What the quantised kernel tests share: activation rows quantised as a
// weight type's kernels take them, and the check that a tile stored each row
// of its mask for each token with the reference dot's bits and nothing else.
#include "gpu/kernels/cpu/quant_matmul.hpp"
#include "tests/gpu/quant_test_blocks.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace pensieve::testing {

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// n random activation rows of `cols` (seeded), quantised for t's kernels.
struct ActRows {
  std::vector<float> storage;
  std::vector<kernels::cpu::QuantActRow> rows;
};
inline ActRows act_rows_for(model::DType t, int n, std::int64_t cols, std::uint32_t seed) {
  namespace kc = kernels::cpu;
  const auto x = random_floats(n * cols, seed);
  ActRows a;
  const kc::QuantActs acts = kc::quantize_act_rows(
      kc::act_quant_for(t), kc::ConstRowsView(x.data(), n, cols, cols), a.storage);
  for (int r = 0; r < n; ++r) a.rows.push_back(acts.row(r));
  return a;
}

// Whether y, token k's `rows` rows at k * stride and every other slot
// poisoned with -7, holds the reference dot of each row of `store` for each
// of the n tokens and nothing else.
inline bool stores_masked_rows(kernels::cpu::QuantDotFn ref, const std::vector<std::byte>& w,
                               std::size_t row_bytes,
                               const std::vector<kernels::cpu::QuantActRow>& x, int n,
                               std::int64_t nb, const std::vector<float>& y, std::int64_t rows,
                               std::int64_t stride, unsigned store) {
  bool right = true;
  for (int k = 0; k < n; ++k) {
    for (std::int64_t r = 0; r < stride; ++r) {
      const bool stored = r < rows && ((store >> r) & 1u);
      const float want = stored ? ref(w.data() + r * row_bytes, x[std::size_t(k)], nb) : -7.0f;
      right = right && same_bits(y[std::size_t(k * stride + r)], want);
    }
  }
  return right;
}

}  // namespace pensieve::testing
