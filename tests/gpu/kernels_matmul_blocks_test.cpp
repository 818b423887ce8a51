// The batched matmul's blocking (64-row panels, 512-wide k blocks, 240-token
// passes, 6 x 4 register tiles) never shows in the bits: a long batch that
// spans two token passes and three k blocks gives every row the bits of that
// row alone (the 1-token decode tile).
#include "gpu/kernels/cpu/matmul.hpp"
#include "gpu/formats/half.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

namespace kc = pensieve::kernels::cpu;
using pensieve::model::DType;

namespace {

std::vector<std::byte> random_weight(DType dtype, std::int64_t rows, std::int64_t cols) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::byte> bytes(pensieve::model::dtype_row_bytes(dtype, cols) * std::size_t(rows));
  if (dtype == DType::f32) {
    for (std::size_t i = 0; i < bytes.size() / 4; ++i) {
      const float v = normal(rng);
      std::memcpy(&bytes[4 * i], &v, 4);
    }
  } else {  // q8_0: random quants, small positive scales
    for (std::size_t b = 0; b < bytes.size() / 34; ++b) {
      const std::uint16_t d = pensieve::f32_to_f16(0.01f + 0.001f * float(rng() % 10));
      std::memcpy(&bytes[b * 34], &d, 2);
      for (std::size_t j = 2; j < 34; ++j) bytes[b * 34 + j] = std::byte(rng() & 0xff);
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("a 250-token batch over several token passes and k blocks equals each row alone",
          "[kernels]") {
  for (DType dtype : {DType::f32, DType::q8_0}) {
    const std::int64_t in = dtype == DType::f32 ? 1100 : 1088, out = 70, n = 250;
    const auto bytes = random_weight(dtype, out, in);
    const kc::WeightView w{dtype, bytes.data(), out, in, pensieve::model::dtype_row_bytes(dtype, in)};
    std::mt19937 rng(37);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n * in));
    for (auto& v : x) v = normal(rng);
    kc::ThreadPool pool(2, 0.0);
    std::vector<float> batch(std::size_t(n * out)), alone(static_cast<std::size_t>(out));
    kc::matmul({}, kc::ConstRowsView(x.data(), n, in, in), w, kc::RowsView{batch.data(), n, out, out}, pool);
    std::int64_t differing_rows = 0;
    for (std::int64_t t = 0; t < n; ++t) {
      kc::matmul({}, kc::ConstRowsView(x.data() + t * in, 1, in, in), w,
                 kc::RowsView{alone.data(), 1, out, out}, pool);
      if (std::memcmp(alone.data(), batch.data() + t * out, alone.size() * sizeof(float)) != 0) ++differing_rows;
    }
    INFO("dtype " << pensieve::model::dtype_name(dtype));
    CHECK(differing_rows == 0);
  }
}
