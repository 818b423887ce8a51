#pragma once
// Test data for the Q8_0 matmul tests: random Q8_0 weight rows, random
// activations and the matmul's scalar definition, one token at a time.
#include "gpu/formats/half.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/kernels/cpu/q8_activations.hpp"
#include "gpu/kernels/cpu/q8_tiles.hpp"

#include <cstring>
#include <random>
#include <vector>

namespace pensieve::test {

// Q8_0 rows with random quants (the full int8 range, -128 included) and
// scales spread over two orders of magnitude.
struct Q8Weight {
  std::vector<std::byte> bytes;
  kernels::cpu::WeightView view;

  Q8Weight(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
    std::mt19937 rng(seed);
    const std::size_t row_bytes = model::dtype_row_bytes(model::DType::q8_0, cols);
    bytes.resize(row_bytes * std::size_t(rows));
    for (std::size_t b = 0; b < bytes.size() / 34; ++b) {
      const std::uint16_t d = f32_to_f16(0.001f * float(1 + rng() % 100));
      std::memcpy(&bytes[b * 34], &d, 2);
      for (std::size_t j = 2; j < 34; ++j) bytes[b * 34 + j] = std::byte(rng() & 0xff);
    }
    view = {model::DType::q8_0, bytes.data(), rows, cols, row_bytes};
  }
};

inline std::vector<float> random_rows(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(rows * cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

// The definition, each token alone and element by element, on the portable
// quantiser's output: y[t * w.rows + o].
inline std::vector<float> q8_reference(const kernels::cpu::WeightView& w,
                                       const std::vector<float>& x, std::int64_t n_tokens) {
  const std::int64_t nb = w.cols / 32;
  std::vector<std::int8_t> q(std::size_t(w.cols));
  std::vector<float> d(static_cast<std::size_t>(nb)),
      y(static_cast<std::size_t>(n_tokens * w.rows));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    kernels::cpu::quantize_row_q8_portable(x.data() + t * w.cols, w.cols, q.data(), d.data());
    for (std::int64_t o = 0; o < w.rows; ++o)
      y[std::size_t(t * w.rows + o)] =
          kernels::cpu::q8_dot_reference(q.data(), d.data(), w.row(o), nb);
  }
  return y;
}

inline bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

}  // namespace pensieve::test
