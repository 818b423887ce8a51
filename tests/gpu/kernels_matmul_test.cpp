// The CPU matmul kernel: exact against its own definition (dequantised
// weights), close to a double-precision reference, and batch invariant.
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

// A weight matrix with random contents, stored in `dtype`.
struct RandomWeight {
  std::vector<std::byte> bytes;
  kc::WeightView view;

  RandomWeight(DType dtype, std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::size_t row_bytes = pensieve::model::dtype_row_bytes(dtype, cols);
    bytes.resize(row_bytes * std::size_t(rows));
    auto put16 = [&](std::size_t at, std::uint16_t v) { std::memcpy(&bytes[at], &v, 2); };
    for (std::size_t i = 0; i < std::size_t(rows * cols); ++i) {
      const float x = normal(rng);
      if (dtype == DType::f32) std::memcpy(&bytes[4 * i], &x, 4);
      if (dtype == DType::f16) put16(2 * i, pensieve::f32_to_f16(x));
      if (dtype == DType::bf16) put16(2 * i, pensieve::f32_to_bf16(x));
    }
    if (dtype == DType::q8_0 || dtype == DType::q4_0) {
      const std::size_t block = pensieve::model::dtype_block_bytes(dtype);
      for (std::size_t b = 0; b < bytes.size() / block; ++b) {
        for (std::size_t j = 2; j < block; ++j) bytes[b * block + j] = std::byte(rng() & 0xff);
        put16(b * block, pensieve::f32_to_f16(0.01f + 0.02f * float(rng() % 100) / 100.0f));
      }
    }
    view = {dtype, bytes.data(), rows, cols, row_bytes};
  }

  std::vector<float> dequantized() const {
    std::vector<float> out(std::size_t(view.rows * view.cols));
    for (std::int64_t r = 0; r < view.rows; ++r) {
      kc::dequantize_row(view.dtype, view.row(r), view.cols, out.data() + r * view.cols);
    }
    return out;
  }
};

std::vector<float> random_rows(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(std::size_t(rows * cols));
  for (auto& v : x) v = normal(rng);
  return x;
}

std::vector<float> run(const kc::WeightView& w, const std::vector<float>& x, std::int64_t n_tokens,
                       std::size_t threads, bool round_f16 = false, bool float_activations = false) {
  kc::ThreadPool pool(threads);
  std::vector<float> y(std::size_t(n_tokens * w.rows));
  kc::MatmulParams params;
  params.round_activations_to_f16 = round_f16;
  params.float_activations = float_activations;
  kc::matmul(params, kc::ConstRowsView(x.data(), n_tokens, w.cols, w.cols), w,
             kc::RowsView{y.data(), n_tokens, w.rows, w.rows}, pool);
  return y;
}

bool same_bits(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

const DType all_types[] = {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0};
// The types computed on their dequantised values (Q4_0 with
// MatmulParams::float_activations; by default it and Q8_0 multiply integers
// on quantised activations instead, which kernels_q8_matmul_test.cpp and
// kernels_quant_dot_test.cpp check against their own references).
const DType dequantised_types[] = {DType::f32, DType::f16, DType::bf16, DType::q4_0};

}  // namespace

TEST_CASE("a matmul row has the same bits alone and in batches of 2 to 33 tokens, with any thread count",
          "[kernels]") {
  // Up to 8 tokens (32 for halves) read the weights row by row, two tokens
  // a pass, as one token does; more go through the blocked F32 panel.
  for (DType t : all_types) {
    const bool blocked = t == DType::q8_0 || t == DType::q4_0;
    const std::int64_t in = blocked ? 96 : 101, out = 1501;  // big enough to use the threads
    RandomWeight w(t, out, in, 7);
    for (std::int64_t n_tokens : {2, 3, 4, 5, 9, 33}) {
      const auto batch_x = random_rows(n_tokens, in, 11);
      const auto batch_y = run(w.view, batch_x, n_tokens, 3);
      for (std::int64_t r = 0; r < n_tokens; ++r) {
        const std::vector<float> one(batch_x.begin() + r * in, batch_x.begin() + (r + 1) * in);
        for (std::size_t threads : {1u, 2u}) {
          const auto alone = run(w.view, one, 1, threads);
          INFO("dtype " << pensieve::model::dtype_name(t) << " batch " << n_tokens << " row " << r
                        << " threads " << threads);
          CHECK(same_bits(alone.data(), batch_y.data() + r * out, std::size_t(out)));
        }
      }
    }
  }
}

TEST_CASE("a matmul on stored weights and float activations equals the F32 matmul on their dequantised copy bit for bit",
          "[kernels]") {
  for (DType t : dequantised_types) {
    const std::int64_t in = 128, out = 19, n = 5;
    RandomWeight w(t, out, in, 3);
    const auto deq = w.dequantized();
    const kc::WeightView f32{DType::f32, reinterpret_cast<const std::byte*>(deq.data()), out, in,
                             std::size_t(in) * 4};
    const auto x = random_rows(n, in, 5);
    INFO("dtype " << pensieve::model::dtype_name(t));
    CHECK(same_bits(run(w.view, x, n, 2, false, true).data(), run(f32, x, n, 2).data(), std::size_t(n * out)));
  }
}

TEST_CASE("a matmul on float activations agrees with a double-precision reference", "[kernels]") {
  for (DType t : dequantised_types) {
    const std::int64_t in = 160, out = 23, n = 9;
    RandomWeight w(t, out, in, 21);
    const auto deq = w.dequantized();
    const auto x = random_rows(n, in, 22);
    const auto y = run(w.view, x, n, 2, false, true);
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t o = 0; o < out; ++o) {
        double ref = 0, mag = 0;
        for (std::int64_t k = 0; k < in; ++k) {
          ref += double(x[std::size_t(r * in + k)]) * double(deq[std::size_t(o * in + k)]);
          mag += std::fabs(double(x[std::size_t(r * in + k)]) * double(deq[std::size_t(o * in + k)]));
        }
        REQUIRE(std::fabs(double(y[std::size_t(r * out + o)]) - ref) <= 1e-5 * mag + 1e-12);
      }
    }
  }
}

TEST_CASE("rounding activations to F16 equals multiplying pre-rounded activations", "[kernels]") {
  const std::int64_t in = 64, out = 8, n = 3;
  RandomWeight w(DType::f16, out, in, 9);
  auto x = random_rows(n, in, 10);
  const auto rounded_y = run(w.view, x, n, 1, true);
  const auto plain_y = run(w.view, x, n, 1, false);
  for (auto& v : x) v = pensieve::f16_to_f32(pensieve::f32_to_f16(v));
  CHECK(same_bits(rounded_y.data(), run(w.view, x, n, 1, false).data(), std::size_t(n * out)));
  CHECK_FALSE(same_bits(rounded_y.data(), plain_y.data(), std::size_t(n * out)));
}

TEST_CASE("a cache-blocked batch (70 tokens, rows over several k blocks) equals each row alone",
          "[kernels]") {
  for (DType t : all_types) {
    const bool blocked = t == DType::q8_0 || t == DType::q4_0;
    const std::int64_t in = blocked ? 1088 : 1100, out = 133, n = 70;
    RandomWeight w(t, out, in, 31);
    const auto x = random_rows(n, in, 32);
    const auto batch = run(w.view, x, n, 2);
    for (std::int64_t r : {0, 3, 4, 63, 64, 69}) {
      const std::vector<float> one(x.begin() + r * in, x.begin() + (r + 1) * in);
      INFO("dtype " << pensieve::model::dtype_name(t) << " row " << r);
      CHECK(same_bits(run(w.view, one, 1, 1).data(), batch.data() + r * out, std::size_t(out)));
    }
  }
}
