// Decode batches of 2-64 tokens on F32, F16 and BF16 weights (the
// small-batch tiles, the decode tiles and the panel GEMM, where each takes
// over): bit for bit the 16-lane definition of matmul.hpp over odd batch
// sizes and shapes (every token-group size and row-tile edge of
// matmul_batch_tile.hpp), with one and two threads.
#include "gpu/kernels/cpu/dequant.hpp"
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/formats/half.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

namespace {

std::vector<std::byte> random_weight(DType t, std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> bytes(pensieve::model::dtype_row_bytes(t, cols) * std::size_t(rows));
  for (std::size_t i = 0; i < std::size_t(rows * cols); ++i) {
    const float v = normal(rng);
    std::uint16_t h = 0;
    if (t == DType::f32) std::memcpy(&bytes[4 * i], &v, 4);
    if (t == DType::f16) h = pensieve::f32_to_f16(v);
    if (t == DType::bf16) h = pensieve::f32_to_bf16(v);
    if (t != DType::f32) std::memcpy(&bytes[2 * i], &h, 2);
  }
  return bytes;
}

std::vector<float> random_rows(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(rows * cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

// The definition: lane k % 16 accumulates x[k] * w[k] with fused
// multiply-adds in ascending k, then the fixed tree over the 16 lanes.
float reference_dot(const float* x, const float* w, std::int64_t n) {
  float lanes[16] = {};
  for (std::int64_t k = 0; k < n; ++k) lanes[k % 16] = std::fma(x[k], w[k], lanes[k % 16]);
  for (int width = 8; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

}  // namespace

TEST_CASE("a small-batch matmul equals the 16-lane reference bit for bit over odd batch sizes and shapes",
          "[kernels]") {
  struct Shape {
    std::int64_t in, out;
  };
  // k: under one step, steps with a masked tail, exact steps, a long row;
  // rows: under one tile, tiles with single-row edges, several 24-row blocks
  // with a short last one, and enough for two threads.
  const Shape shapes[] = {{7, 5}, {45, 37}, {64, 24}, {101, 61}, {773, 50}, {96, 1501}};
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const Shape& s : shapes) {
      const auto bytes = random_weight(t, s.out, s.in, 17);
      const kc::WeightView w{t, bytes.data(), s.out, s.in, pensieve::model::dtype_row_bytes(t, s.in)};
      std::vector<float> deq(std::size_t(s.out * s.in));
      for (std::int64_t o = 0; o < s.out; ++o) kc::dequantize_row(t, w.row(o), s.in, deq.data() + o * s.in);
      for (std::int64_t n : {2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 24, 31, 33, 47, 64}) {
        if (s.out == 1501 && n > 9) continue;  // the large shape for the thread split only
        const auto x = random_rows(n, s.in, 23);
        std::vector<float> expected(std::size_t(n * s.out));
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t o = 0; o < s.out; ++o)
            expected[std::size_t(r * s.out + o)] = reference_dot(x.data() + r * s.in, deq.data() + o * s.in, s.in);
        for (std::size_t threads : {1u, 2u}) {
          kc::ThreadPool pool(threads);
          std::vector<float> y(std::size_t(n * s.out));
          kc::matmul({}, kc::ConstRowsView(x.data(), n, s.in, s.in), w,
                     kc::RowsView{y.data(), n, s.out, s.out}, pool);
          INFO("dtype " << pensieve::model::dtype_name(t) << " in " << s.in << " out " << s.out
                        << " tokens " << n << " threads " << threads);
          CHECK(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("a small batch's token rows have the bits of the same tokens in a batch of 65 (the panel GEMM)",
          "[kernels]") {
  // 65 tokens take the blocked panel path, 2 and 11 the small-batch or
  // decode tiles: the paths must agree for every row they share.
  const std::int64_t in = 600, out = 70, big = 65;
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const auto bytes = random_weight(t, out, in, 41);
    const kc::WeightView w{t, bytes.data(), out, in, pensieve::model::dtype_row_bytes(t, in)};
    const auto x = random_rows(big, in, 42);
    kc::ThreadPool pool(2);
    std::vector<float> all(std::size_t(big * out));
    kc::matmul({}, kc::ConstRowsView(x.data(), big, in, in), w, kc::RowsView{all.data(), big, out, out}, pool);
    for (std::int64_t n : {2, 11, 64}) {
      std::vector<float> y(std::size_t(n * out));
      kc::matmul({}, kc::ConstRowsView(x.data(), n, in, in), w, kc::RowsView{y.data(), n, out, out}, pool);
      INFO("dtype " << pensieve::model::dtype_name(t) << " tokens " << n);
      CHECK(std::memcmp(y.data(), all.data(), y.size() * sizeof(float)) == 0);
    }
  }
}
